"""One registry per extension point: names to things, a clash refused in one sentence naming
both owners, a mistyped name answered with the nearest one, entries given as `module:attr`
imported on first use, and packages that declare the registry's entry-point group adding to it
without editing mad-eval."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from typing import Generic, TypeVar

from mad_eval.errors import UserError
from mad_eval.words import did_you_mean

T = TypeVar("T")
BUILT_IN = "mad-eval"


class RegistryError(UserError, ValueError):
    """A name is unknown, taken twice, or names something that cannot be loaded."""


@dataclass
class _Entry(Generic[T]):
    owner: str  # "mad-eval", a distribution's name, or the module that added it
    value: T | None = None
    ref: str | None = None  # module:attr, imported on first use


class Registry(Generic[T]):
    """Names to values of one kind. `what` words the kind in sentences ("protocol"); `group` is
    the entry-point group installed packages add to; `check` vets each value as it is loaded
    and raises RegistryError (or the registry's `error` class) for one that cannot serve."""

    def __init__(
        self,
        what: str,
        group: str | None = None,
        *,
        error: type[UserError] = RegistryError,
        check: Callable[[str, T], None] | None = None,
    ) -> None:
        self.what = what
        self.group = group
        self.error = error
        self._check = check
        self._entries: dict[str, _Entry[T]] = {}
        self._plugins_read = group is None

    def add(self, name: str, value: T | str, owner: str = BUILT_IN) -> None:
        """Register `value` (or a `module:attr` string, imported when first asked for) under
        `name`; refuse a name already taken. Built-ins are added at import, before any plug-in
        is read, so a plug-in that takes a built-in's name is the one refused."""
        self._add(name, value, owner)

    def register(self, name: str, owner: str = BUILT_IN) -> Callable[[T], T]:
        """`add` as a decorator."""

        def decorate(value: T) -> T:
            self.add(name, value, owner)
            return value

        return decorate

    def get(self, name: str) -> T:
        """The value named `name`, imported if it was given as `module:attr`."""
        self._read_plugins()
        entry = self._entries.get(name)
        if entry is None:
            known = sorted(self._entries)
            raise self.error(
                f"unknown {self.what} '{name}'{did_you_mean(name, known)}; "
                f"available: {', '.join(known) or 'none'}."
            )
        if entry.value is None:
            entry.value = self._load(name, entry)
        return entry.value

    def owner(self, name: str) -> str:
        self._read_plugins()
        return self._entries[name].owner

    def names(self) -> list[str]:
        """Every name, in the order they were added (built-ins first, then plug-ins)."""
        self._read_plugins()
        return list(self._entries)

    def items(self) -> Iterator[tuple[str, T]]:
        """Every (name, value), loading each."""
        for name in self.names():
            yield name, self.get(name)

    def __contains__(self, name: object) -> bool:
        self._read_plugins()
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self.names())

    def remove(self, name: str) -> None:
        """Take a name out (a test's plug-in, cleaned up)."""
        self._entries.pop(name, None)

    def _add(self, name: str, value: T | str, owner: str) -> None:
        if not isinstance(name, str) or not name:
            raise self.error(f"a {self.what} needs a name, got {name!r}.")
        taken = self._entries.get(name)
        if taken is not None:
            raise self.error(
                f"{owner} registers a {self.what} named '{name}', "
                f"which {taken.owner} already registers; one of them must take another name."
            )
        if isinstance(value, str) and ":" in value:
            self._entries[name] = _Entry(owner, ref=value)
        else:
            entry: _Entry[T] = _Entry(owner, value=value)  # type: ignore[arg-type]
            self._entries[name] = entry
            if self._check is not None:
                try:
                    self._check(name, entry.value)  # type: ignore[arg-type]
                except Exception:
                    del self._entries[name]
                    raise

    def _load(self, name: str, entry: _Entry[T]) -> T:
        module, _, attr = (entry.ref or "").partition(":")
        try:
            value: T = importlib.import_module(module)  # type: ignore[assignment]
            for part in attr.split("."):
                value = getattr(value, part)
        except Exception as exc:  # a plug-in's import error is its own, reported as one sentence
            raise self.error(
                f"{self.what} '{name}' from {entry.owner} cannot be loaded from "
                f"{entry.ref}: {type(exc).__name__}: {exc}."
            ) from None
        if self._check is not None:
            self._check(name, value)
        return value

    def _read_plugins(self) -> None:
        # All or nothing: a clash is refused at every lookup, not once and then forgotten.
        if self._plugins_read:
            return
        before = dict(self._entries)
        try:
            for point in entry_points(group=self.group or ""):
                self._add(point.name, point.value, _distribution(point))
        except Exception:
            self._entries = before
            raise
        self._plugins_read = True


def _distribution(point: EntryPoint) -> str:
    dist = getattr(point, "dist", None)
    return f"the package {dist.name}" if dist is not None else f"the entry point {point.value}"
