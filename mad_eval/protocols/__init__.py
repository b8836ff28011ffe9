"""Protocol classes and how `--protocol` finds one: a TOML preset in protocols/, a built-in
class, an import path (pkg.mod:Class) or a `mad_eval.protocols` entry point, each optionally
followed by parameters (sparse:degree=4)."""

from __future__ import annotations

import importlib
import inspect
import re
import tomllib
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from mad_eval.grading.reasoning import parse_quoting
from mad_eval.protocols.base import (
    Decision,
    Protocol,
    ProtocolError,
    Role,
    check_protocol,
    debate_shape,
    role_templates,
)
from mad_eval.protocols.baselines import Refinement, Shuffled
from mad_eval.protocols.centralized import Centralized
from mad_eval.protocols.chateval import ChatEval
from mad_eval.protocols.decentralized import Decentralized
from mad_eval.protocols.group import Group
from mad_eval.protocols.heterogeneous import Heterogeneous
from mad_eval.protocols.judged import Judged
from mad_eval.protocols.paradigms import Memory, Relay, Report
from mad_eval.protocols.single import Single
from mad_eval.protocols.sparse import Sparse
from mad_eval.records import shown
from mad_eval.registry import BUILT_IN, Registry
from mad_eval.settings.config import project_folder, spec_files
from mad_eval.settings.tomlfile import TomlFileError, read_toml
from mad_eval.words import did_you_mean

__all__ = [
    "PROTOCOLS",
    "Choice",
    "Decision",
    "Protocol",
    "ProtocolError",
    "Role",
    "catalogue",
    "check_protocol",
    "debate_shape",
    "presets",
    "resolve",
    "role_templates",
]

PRESET_KEYS = {"class", "description", "prompt_template", "quote", "params"}


@dataclass(frozen=True)
class Choice:
    """What --protocol resolved to."""

    protocol: Protocol
    cls: str  # the class, as a preset names it: a built-in name or pkg.mod:Class
    source: str  # the preset file, "built-in", the import path or the entry point
    prompt_template: str | None = None  # a preset may pick the prompt template it is meant for
    quote: str | None = None  # and what its agents read of each other's replies


def presets() -> dict[str, Path]:
    """Preset files by name: the project's, then the working directory's ./protocols for new
    names only. A preset may name a class to import, so a file there never stands in for a
    built-in name: a plain `mad-eval run` in a cloned repository imports nothing of it."""
    found = spec_files("protocols")
    ours = project_folder("protocols").resolve()
    taken = set(PROTOCOLS.names())
    return {
        name: path
        for name, path in found.items()
        if path.parent.resolve() == ours or name not in taken
    }


def resolve(text: str) -> Choice:
    """Build the protocol `--protocol TEXT` names; raise ProtocolError with one sentence."""
    head, _, tail = text.partition(":")
    ref, _, rest = tail.partition(":")
    if tail and "=" not in ref and ref.isidentifier():  # pkg.mod:Class[:params]
        name, overrides = f"{head}:{ref}", parse_params(rest, text)
    else:
        name, overrides = head, parse_params(tail, text)

    if ":" in name:
        return _build(name, _import_class(name), overrides, source=name)
    known = presets()
    if name in known:
        preset = _read_preset(known[name])
        cls_name = preset.get("class", "")
        cls = _class_named(cls_name, where=str(known[name]))
        params = {**preset.get("params", {}), **overrides}
        template = preset.get("prompt_template")
        choice = _build(cls_name, cls, params, str(known[name]), template)
        return replace(choice, quote=preset.get("quote"))
    if name in PROTOCOLS:
        return _build(name, PROTOCOLS.get(name), overrides, _source(name))
    available = sorted({*known, *PROTOCOLS.names()})
    raise ProtocolError(
        f"unknown protocol '{name}'{did_you_mean(name, available, 0.8)}; available: "
        f"{', '.join(available)} "
        "(or pkg.module:Class for your own)."
    )


def catalogue() -> list[tuple[str, str, str]]:
    """(name, description, where it comes from) for every protocol --protocol accepts by name."""
    rows = []
    for name, path in presets().items():
        try:
            preset = _read_preset(path)
            rows.append((name, str(preset.get("description", "")), str(path)))
        except ProtocolError as exc:
            rows.append((name, f"unreadable: {exc}", str(path)))
    listed = {row[0] for row in rows}
    for name in PROTOCOLS.names():
        if name in listed:
            continue
        ref = PROTOCOLS.ref(name)
        where = "built-in class" if PROTOCOLS.owner(name) == BUILT_IN else f"entry point {ref}"
        try:
            description = PROTOCOLS.get(name).description
        except ProtocolError as exc:
            description = f"unusable: {exc}"
        rows.append((name, description, where))
    return rows


def parse_params(text: str, where: str) -> dict[str, Any]:
    """'degree=4,hub=1' -> {'degree': 4, 'hub': 1}; values are TOML literals (numbers,
    true/false, [lists]) or else plain strings. Commas inside brackets do not split."""
    params: dict[str, Any] = {}
    for item in _split_top_level(text):
        key, eq, raw = item.partition("=")
        key = key.strip()
        if not eq or not key.isidentifier():
            raise ProtocolError(
                f"cannot read protocol parameter '{item}' in '{where}'; write key=value, "
                "e.g. sparse:degree=4."
            )
        try:
            params[key] = tomllib.loads(f"v = {raw.strip()}")["v"]
        except (tomllib.TOMLDecodeError, RecursionError):  # [[[[...: read as text
            params[key] = raw.strip()
    return params


def _split_top_level(text: str) -> list[str]:
    items, depth, start = [], 0, 0
    for i, char in enumerate(text):
        depth += {"[": 1, "]": -1}.get(char, 0)
        if char == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
    items.append(text[start:])
    return [item.strip() for item in items if item.strip()]


def _build(
    cls_name: str,
    cls: type[Protocol],
    params: dict[str, Any],
    source: str,
    prompt_template: str | None = None,
) -> Choice:
    parameters = inspect.signature(cls).parameters.values()
    named = [p.name for p in parameters if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    takes_more = any(p.kind is p.VAR_KEYWORD for p in parameters)
    # Every protocol takes `score` (its scoring rule) unless its class handles it itself.
    params = dict(params)
    score = params.pop("score", None) if "score" not in named else None
    if score is not None and not isinstance(score, str):
        raise ProtocolError(
            f"score must name a scoring rule (e.g. score=hub), got {shown(score, 80)}."
        )
    unknown = [key for key in params if key not in named]
    if unknown and not takes_more:
        raise ProtocolError(
            f"protocol class '{cls_name}' has no parameter '{unknown[0]}'; "
            f"it accepts: {', '.join(named) or 'no parameters'}."
        )
    try:
        protocol = cls(**params)
    except TypeError as exc:
        raise ProtocolError(
            f"protocol class '{cls_name}' cannot take the parameters {params} ({exc})."
        ) from None
    if score is not None:
        protocol.score = score
    return Choice(protocol, cls_name, source, prompt_template)


def _read_preset(path: Path) -> dict[str, Any]:
    try:
        preset = read_toml(path)
    except (OSError, TomlFileError) as exc:
        problem = exc if isinstance(exc, TomlFileError) else exc.strerror or exc
        raise ProtocolError(f"cannot read protocol preset {path}: {problem}.") from None
    if "prompt_style" in preset:
        raise ProtocolError(f"{path}: prompt_style is now prompt_template; rename the key.")
    unknown = set(preset) - PRESET_KEYS
    if unknown:
        raise ProtocolError(
            f"{path}: unknown key(s) {', '.join(sorted(unknown))}; "
            f"a preset has: {', '.join(sorted(PRESET_KEYS))}."
        )
    if not isinstance(preset.get("params", {}), dict):
        raise ProtocolError(f"{path}: 'params' must be a table ([params]).")
    for key in sorted(PRESET_KEYS - {"params"}):
        if not isinstance(preset.get(key, ""), str):
            raise ProtocolError(f"{path}: '{key}' must be text, not {preset[key]!r:.80}.")
    if "quote" in preset:
        try:
            parse_quoting(str(preset["quote"]))
        except ValueError as exc:
            raise ProtocolError(f"{path}: {exc}.") from None
    return preset


def _class_named(name: str, where: str) -> type[Protocol]:
    if ":" in name:
        return _import_class(name)
    if name in PROTOCOLS:
        return PROTOCOLS.get(name)
    raise ProtocolError(
        f"{where}: class {shown(name, 80)} is not one of: {', '.join(PROTOCOLS)} (or "
        "pkg.module:Class)."
    )


def _import_class(ref: str) -> type[Protocol]:
    module_name, _, attr = ref.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ProtocolError(
            f"cannot import module '{module_name}' for protocol {ref} ({exc})."
        ) from None
    if not hasattr(module, attr):
        raise ProtocolError(f"module '{module_name}' has no attribute '{attr}' (protocol {ref}).")
    return _checked_class(getattr(module, attr), ref)


def _source(name: str) -> str:
    return "built-in" if PROTOCOLS.owner(name) == BUILT_IN else f"entry point {name}"


def _checked_class(obj: Any, ref: str) -> type[Protocol]:
    """A plug-in must subclass Protocol, implement sees() and name and describe itself."""
    if not (inspect.isclass(obj) and issubclass(obj, Protocol)):
        raise ProtocolError(
            f"{ref} is not a protocol class: subclass mad_eval.protocols.Protocol and "
            "implement sees(agent, n_agents)."
        )
    if inspect.isabstract(obj):
        missing = ", ".join(sorted(obj.__abstractmethods__))
        raise ProtocolError(f"{ref} does not implement {missing}(agent, n_agents).")
    for attr in ("name", "description"):
        if not isinstance(getattr(obj, attr, None), str):
            raise ProtocolError(f"{ref} must set the class attribute `{attr}` to a string.")
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", obj.name):
        raise ProtocolError(
            f"{ref}: name {shown(obj.name, 80)} may hold only letters, digits, . _ -."
        )
    return obj


def _check(name: str, cls: type[Protocol]) -> None:
    _checked_class(cls, f"protocol {shown(name, 80)}")


# Protocol classes by name; other packages add theirs through the `mad_eval.protocols`
# entry-point group (a preset of the same name, in protocols/, names the class it uses).
PROTOCOLS: Registry[type[Protocol]] = Registry(
    "protocol", "mad_eval.protocols", error=ProtocolError, check=_check
)
for _cls in (
    Decentralized,
    Sparse,
    Centralized,
    Heterogeneous,
    Single,
    Judged,
    ChatEval,
    Group,
    Relay,
    Memory,
    Report,
    Shuffled,
    Refinement,
):
    PROTOCOLS.add(_cls.name, _cls)
