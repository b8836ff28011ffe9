"""What every conformance test (tests/test_conformance_*.py) reads of its suite in
conformance/: the stored cases, the declared differences, and the ledger that holds each
difference found to a declared class, so that an undeclared difference fails and so does a
declared class that no longer differs (the list cannot go stale)."""

from __future__ import annotations

import json
import tomllib
from collections.abc import Sequence
from functools import cache, cached_property
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent / "conformance"


class Suite:
    """One folder of conformance/: `name` its folder, `reference` what it is checked against
    (said in a failure)."""

    def __init__(self, name: str, reference: str):
        self.folder = ROOT / name
        self.reference = reference

    @cached_property
    def differences(self) -> dict[str, Any]:
        return tomllib.loads((self.folder / "differences.toml").read_text(encoding="utf-8"))

    def declared(self) -> dict[str, Any]:
        """differences.toml: its classes (name, sets, ...) and its single cases (id, sets)."""
        return self.differences

    def cases(self, kind: str) -> list[dict[str, Any]]:
        """The stored cases of one set (a line's "set"), in file order."""
        return _cases(self.folder, kind)

    def ledger(self, kind: str, *, first: bool = False, every: bool = False) -> Ledger:
        return Ledger(self, kind, first=first, every=every)


@cache
def _cases(folder: Path, kind: str) -> list[dict[str, Any]]:
    with open(folder / "cases.jsonl", encoding="utf-8") as lines:
        return [case for line in lines if (case := json.loads(line))["set"] == kind]


class Ledger:
    """The differences found in one set of cases, each held to differences.toml as it is
    found: a case that differs must be a declared single case or be accounted for by a
    declared class of the set. `first`: a case several classes cover counts for the first
    only; `every`: each class named must be declared, not just one."""

    def __init__(self, suite: Suite, kind: str, *, first: bool = False, every: bool = False):
        self.suite, self.kind, self.first, self.every = suite, kind, first, every
        declared = suite.declared()
        self.classes = {c["name"]: c for c in declared.get("class", []) if kind in c["sets"]}
        self.ids = {c["id"] for c in declared.get("case", []) if kind in c.get("sets", [kind])}
        self.hits: dict[str, int] = dict.fromkeys(self.classes, 0)
        self.undeclared: list[str] = []

    def found(self, case_id: str, covering: str | Sequence[str] | None) -> None:
        """A case that differs, and the classes that account for it (none: undeclared)."""
        if case_id in self.ids:
            return
        names = [covering] if isinstance(covering, str) else list(covering or [])
        known = [name for name in names if name in self.classes]
        if not known or (self.every and len(known) != len(names)):
            self.undeclared.append(f"{case_id} ({', '.join(names) or 'no class'})")
            return
        for name in known[:1] if self.first else known:
            self.hits[name] += 1

    def check(self, total: int | None = None) -> None:
        of = f"of {total} " if total is not None else ""
        assert not self.undeclared, (
            f"{len(self.undeclared)} {of}{self.kind} cases differ from {self.suite.reference} "
            f"without a declared reason, e.g. {self.undeclared[:5]}"
        )
        stale = [name for name, hits in self.hits.items() if not hits]
        assert not stale, f"differences.toml declares classes that no longer differ: {stale}"
