"""Verdicts math-verify has reached, so that none is reached twice: a comparison (an answer
against a gold, or two answers for a vote's classes) and a reading of a whole reply (the
math-verify answer protocol). Kept in memory for the process and, where a run has a request
cache, in a file beside it (mad_eval.store.verdict_file), so re-runs, seeds and the cells of
an experiment ask math-verify only what no run asked before.

Every key holds the grader's version (`grader()`: mad-eval's way of asking with math-verify's,
latex2sympy2_extended's and sympy's versions), so a grader change finds none of the old
verdicts. A verdict math-verify reached by running out of time is kept in memory only: on
another day, or a less loaded machine, it may decide.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import threading
from collections.abc import Callable
from importlib import metadata
from typing import Any, Protocol

REVISION = 1
"""mad-eval's way of asking math-verify: raise it when the worker's parse or compare changes."""
MEMORY = 65536  # verdicts kept in memory (short keys and values: a few tens of MB at most)
_PACKAGES = ("math-verify", "latex2sympy2_extended", "sympy")


@functools.cache
def grader() -> str:
    """The grader's version, as verdicts are keyed by."""
    versions = []
    for name in _PACKAGES:
        try:
            versions.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            versions.append(f"{name} absent")
    return f"mad-eval {REVISION}; " + "; ".join(versions)


class Shelf(Protocol):
    """Where verdicts outlive the process (mad_eval.store.verdict_file.VerdictFile): never
    raises; a shelf that fails says so once and keeps nothing from then on."""

    def get(self, key: str) -> str | None: ...

    def put(self, key: str, value: str) -> None: ...

    def close(self) -> None: ...


class Verdicts:
    """The process's verdicts: a bounded map in memory, in front of an optional shelf."""

    def __init__(self) -> None:
        self._memory: dict[str, list[Any]] = {}
        self._shelf: Shelf | None = None
        self._lock = threading.Lock()  # shelving and unshelving from several threads
        self.asked = 0  # verdicts reached by math-verify in this process: for tests and benches

    @property
    def shelf(self) -> Shelf | None:
        return self._shelf

    def shelve(self, shelf: Shelf | None) -> None:
        """Keep verdicts on `shelf` from now on (None: in memory only); the one before closes."""
        with self._lock:
            old, self._shelf = self._shelf, shelf
        if old is not None and old is not shelf:
            old.close()

    def forked(self) -> None:
        """In a forked child: its parent's file connection is not its own to write through
        (nor to close), so its verdicts are kept in memory only."""
        self._shelf = None
        self._lock = threading.Lock()

    def forget(self) -> None:
        """Drop every verdict in memory and the shelf: for tests."""
        self.shelve(None)
        self._memory.clear()

    def get(self, key: str, fits: Callable[[list[Any]], bool]) -> list[Any] | None:
        """The verdict kept under `key`; one read from the shelf must pass `fits` (the shape
        of what is asked), as the file is anyone's to edit: one that does not is not kept."""
        found = self._memory.get(key)
        if found is None and self._shelf is not None:
            raw = self._shelf.get(key)
            if raw is not None:
                try:
                    found = json.loads(raw)
                except ValueError:
                    return None
                if not isinstance(found, list) or not fits(found):
                    return None
                self._remember(key, found)
        return found

    def put(self, key: str, value: list[Any], lasting: bool = True) -> None:
        """Keep a new verdict; `lasting` False: in memory only."""
        self.asked += 1
        self._remember(key, value)
        shelf = self._shelf
        if lasting and shelf is not None:
            shelf.put(key, json.dumps(value))

    def _remember(self, key: str, value: list[Any]) -> None:
        if len(self._memory) >= MEMORY:
            self._memory.clear()
        self._memory[key] = value


VERDICTS = Verdicts()


if hasattr(os, "register_at_fork"):  # POSIX only
    os.register_at_fork(after_in_child=VERDICTS.forked)


def key(*parts: str | None) -> str:
    """A verdict's key: what was asked, with the grader's version, hashed to a fixed size."""
    return hashlib.sha256(json.dumps([grader(), *parts]).encode()).hexdigest()
