"""Protocol classes, and the TOML presets in the top-level protocols/ folder that name them."""

from __future__ import annotations

import tomllib
from pathlib import Path

from mad_eval.config import spec_folders
from mad_eval.protocols.base import Protocol, ProtocolError
from mad_eval.protocols.decentralized import Decentralized

__all__ = ["CLASSES", "Protocol", "ProtocolError", "get_protocol", "presets"]

CLASSES: dict[str, type[Protocol]] = {cls.name: cls for cls in (Decentralized,)}


def presets() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for folder in spec_folders("protocols"):
        for path in sorted(folder.glob("*.toml")):
            found.setdefault(path.stem, path)
    return found


def get_protocol(name: str) -> Protocol:
    """A preset by name (protocols/<name>.toml: a class and its parameters)."""
    known = presets()
    if name not in known:
        raise ProtocolError(
            f"unknown protocol '{name}'; available: {', '.join(sorted(known)) or 'none found'}."
        )
    try:
        preset = tomllib.loads(known[name].read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ProtocolError(f"cannot read protocol preset {known[name]}: {exc}") from None
    cls = CLASSES.get(preset.get("class", ""))
    if cls is None:
        raise ProtocolError(
            f"{known[name]}: class {preset.get('class')!r} is not one of: {', '.join(CLASSES)}."
        )
    try:
        return cls(**preset.get("params", {}))
    except TypeError as exc:
        raise ProtocolError(f"{known[name]}: bad params for class '{cls.name}' ({exc}).") from None
