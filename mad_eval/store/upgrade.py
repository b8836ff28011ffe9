"""Run folders written by older versions, read in today's shape: every default a reader used
to fill in for a key an older writer left out is filled here, once, as the file is read, so
manifest.py and every reader of metrics.json see only the current shape. Nothing is written
back: a folder stays as it was made.

Every layout so far is today's less some keys (version 1 of both files is version 2 without
`schema_version` and the keys added since), so reading one is filling keys. A layout that
moves or renames a key adds a step to MANIFEST_STEPS: STEPS[v - 1] takes version v's dict
to version v + 1's, and the fills apply after the last step."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from mad_eval.errors import UserError
from mad_eval.records import shown
from mad_eval.settings.config import RecordedConfig
from mad_eval.store.files import StoreError

MANIFEST_VERSION = 2  # 1: the manifests written before `schema_version` existed
METRICS_VERSION = 2  # 1: the metrics.json files written before `schema_version` existed

Data = dict[str, Any]


class MetricsVersionError(UserError, ValueError):
    """A metrics.json written by a newer mad-eval than this one."""


def manifest_version(data: Data, path: Path) -> int:
    """The schema version a manifest.json's dict was written in; one this mad-eval cannot
    read (no number, or newer than its own) is a StoreError naming `path`."""
    version = data.get("schema_version", 1)
    if type(version) is not int or version < 1:
        raise StoreError(f"{path} is not a mad-eval run manifest (schema {shown(version, 80)}).")
    if version > MANIFEST_VERSION:
        raise StoreError(
            f"{path} was written by a newer mad-eval (manifest schema {version}; this one "
            f"reads up to {MANIFEST_VERSION}); upgrade mad-eval to read it."
        )
    return version


def upgrade_manifest(data: Data, path: Path) -> Data:
    """A manifest.json's dict (its "config" an object) in the current shape: each key an
    older writer left out given the value its readers always took for it. `data` is not
    changed; "schema_version" stays the one it was written in."""
    version = manifest_version(data, path)
    found = dict(data)
    for step in MANIFEST_STEPS[version - 1 :]:
        found = step(found)
    _named(found)
    for name, added in _ADDED.items():
        section = _section(found, name) if name else found
        if section is None:
            continue
        for key, value in added.items():
            if key in _OR_EMPTY and not section.get(key):
                section[key] = value
            else:
                section.setdefault(key, value)
    return found


MANIFEST_STEPS: tuple[Callable[[Data], Data], ...] = (lambda data: data,)  # 1 -> 2: keys only
assert len(MANIFEST_STEPS) == MANIFEST_VERSION - 1, "a step for every version before ours"

# Keys added since the first manifests, by section ("" for the top level), with the value a
# file written before each meant: None for "not recorded" (its reader says what that means:
# no hub, the kind's scoring rule, built-in prompt templates, ...).
_ADDED: dict[str, dict[str, Any]] = {
    "": {"team": [], "operational": {}, "serving": None, "versions": {}, "git_commit": None,
         "command": [], "created": None},
    "benchmark": {"kind": "math", "answer": None, "answer_revision": 1, "questions": [],
                  "orders": {}},
    "protocol": {"class": None, "params": {}, "source": None, "hub": None, "score": None,
                 "sees": None, "waves": None, "roles": None,
                 "asks": None, "ends": None},
    "prompt": {"prompt_templates": None, "templates": {}},
}  # fmt: skip
_OR_EMPTY = {"team", "operational", "versions", "command", "questions"}  # null read as none


def _named(data: Data) -> None:
    """The first manifests named their benchmark, protocol and prompt style in "config"
    only: the sections take them from there."""
    benchmark, protocol, prompt = (_section(data, n) for n in ("benchmark", "protocol", "prompt"))
    if benchmark is not None:
        if not benchmark.get("name"):
            benchmark["name"] = _setting(data, "benchmark")
        benchmark.setdefault("title", benchmark["name"])
    if protocol is not None:
        protocol.setdefault("name", _setting(data, "protocol"))
    if prompt is not None:
        for key, setting in (("style", "prompt_style"), ("strip_think", "strip_think"),
                             ("api", "api"), ("template", "template")):  # fmt: skip
            prompt.setdefault(key, _setting(data, setting))


def _section(data: Data, name: str) -> Data | None:
    """A copy of section `name`, put in `data` (an absent or null one as {}); None when it
    is no object (the reader refuses it)."""
    value = data.get(name) or {}
    if not isinstance(value, dict):
        return None
    section: dict[str, Any] = dict(value)
    data[name] = section
    return section


def _setting(data: Data, key: str) -> Any:
    """A recorded setting, or its default for a manifest written before the setting."""
    return data["config"].get(key, getattr(RecordedConfig, key))


def upgrade_metrics(data: Data, path: Path) -> Data:
    """A metrics.json's dict in the current shape; one of a newer layout than this
    mad-eval knows is a MetricsVersionError naming `path`. Version 1 reads as 2."""
    found = data.get("schema_version", 1)
    if not isinstance(found, int) or isinstance(found, bool) or found > METRICS_VERSION:
        raise MetricsVersionError(
            f"{path} has schema_version {shown(found, 80)}; this mad-eval reads metrics.json up to "
            f"version {METRICS_VERSION}: use the newer mad-eval that wrote it."
        )
    return data
