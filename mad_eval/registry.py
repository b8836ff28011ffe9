"""One registry per extension point: names to things, a clash refused in one sentence naming
both owners, a mistyped name answered with the nearest one, entries given as `module:attr`
imported on first use, and packages that declare the registry's entry-point group adding to it
without editing mad-eval.

Entry points are read on a registry's first lookup, once per process; `reread_plugins()` makes
every registry read them again at its next lookup (a package installed into a running process,
or a test that puts one on sys.path)."""

from __future__ import annotations

import importlib
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from typing import Any, Generic, TypeVar

from mad_eval.errors import UserError
from mad_eval.records import shown
from mad_eval.words import did_you_mean

T = TypeVar("T")
BUILT_IN = "mad-eval"
_SUGGESTED = 100  # a name longer than this gets no "did you mean": it is no typo


class RegistryError(UserError, ValueError):
    """A name is unknown, taken twice, or names something that cannot be loaded."""


@dataclass
class _Entry(Generic[T]):
    owner: str  # "mad-eval", "the package <distribution>", or whoever added it
    value: T | None = None
    ref: str | None = None  # module:attr, imported on first use
    plugin: bool = False  # read from an entry point (forgotten by reread_plugins)


class Registry(Generic[T]):
    """Names to values of one kind. `what` words the kind in sentences ("protocol"); `group` is
    the entry-point group installed packages add to; `holds`, when given, is the type every
    value is an instance of, named as it is registered (`value.name == name`); `check` vets
    each value further as it is loaded. Both raise the registry's `error` (RegistryError
    unless given) for a value that cannot serve."""

    def __init__(
        self,
        what: str,
        group: str | None = None,
        *,
        error: type[UserError] = RegistryError,
        holds: type | None = None,
        check: Callable[[str, T], None] | None = None,
    ) -> None:
        self.what = what
        self.group = group
        self.error = error
        self._holds = holds
        self._extra_check = check
        self._entries: dict[str, _Entry[T]] = {}
        self._plugins_read = group is None
        _REGISTRIES.add(self)

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

    def remove(self, name: str) -> None:
        """Take a name out (a test's entry, cleaned up)."""
        self._entries.pop(name, None)

    def get(self, name: str) -> T:
        """The value named `name`, imported if it was given as `module:attr`."""
        self._read_plugins()
        entry = self._entries.get(name)
        if entry is None:
            raise self.error(self.unknown(name))
        if entry.value is None:
            entry.value = self._load(name, entry)
        return entry.value

    def unknown(self, name: object) -> str:
        """The sentence refusing an unknown name: the nearest known one, and the list."""
        known = self.names()
        near = (
            did_you_mean(name, known) if isinstance(name, str) and len(name) <= _SUGGESTED else ""
        )
        return f"unknown {self.what} {shown(name, 80)}{near}; known: {', '.join(known) or 'none'}."

    def owner(self, name: str) -> str:
        """Who registered `name`: mad-eval, a package (by its distribution), or a caller."""
        self._read_plugins()
        return self._entries[name].owner

    def ref(self, name: str) -> str | None:
        """The `module:attr` a lazy entry (every plug-in's) was given as; None for a value."""
        self._read_plugins()
        return self._entries[name].ref

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

    def forget_plugins(self) -> None:
        """Drop what entry points added; the next lookup reads them again."""
        if self.group is None:
            return
        self._entries = {k: e for k, e in self._entries.items() if not e.plugin}
        self._plugins_read = False

    def _add(self, name: str, value: T | str, owner: str, plugin: bool = False) -> None:
        if not isinstance(name, str) or not name:
            raise self.error(f"a {self.what} needs a name, got {shown(name, 80)}.")
        taken = self._entries.get(name)
        if taken is not None:
            raise self.error(
                f"{owner} registers a {self.what} named {shown(name, 80)}, "
                f"which {taken.owner} already registers; one of them must take another name."
            )
        if isinstance(value, str) and ":" in value:
            self._entries[name] = _Entry(owner, ref=value, plugin=plugin)
            return
        entry: _Entry[T] = _Entry(owner, value=value, plugin=plugin)  # type: ignore[arg-type]
        self._check(name, entry.value)  # type: ignore[arg-type]
        self._entries[name] = entry

    def _load(self, name: str, entry: _Entry[T]) -> T:
        module, _, attr = (entry.ref or "").partition(":")
        try:
            value: T = importlib.import_module(module)  # type: ignore[assignment]
            for part in attr.split("."):
                value = getattr(value, part)
        except Exception as exc:  # a plug-in's import error is its own, reported as one sentence
            raise self.error(
                f"{self.what} {shown(name, 80)} from {entry.owner} cannot be loaded from "
                f"{entry.ref}: {type(exc).__name__}: {shown(str(exc), 200)}."
            ) from None
        self._check(name, value)
        return value

    def _check(self, name: str, value: T) -> None:
        holds = self._holds
        if holds is not None and (
            not isinstance(value, holds) or getattr(value, "name", None) != name
        ):
            kind = f"{holds.__module__}.{holds.__qualname__}"
            raise self.error(
                f"{self.what} {shown(name, 80)} must be a {kind} named {shown(name, 80)}, "
                f"not {shown(value, 80)}."
            )
        if self._extra_check is not None:
            self._extra_check(name, value)

    def _read_plugins(self) -> None:
        # All or nothing: a clash is refused at every lookup, not once and then forgotten.
        if self._plugins_read:
            return
        before = dict(self._entries)
        try:
            for point in entry_points(group=self.group or ""):
                self._add(point.name, point.value, _distribution(point), plugin=True)
        except Exception:
            self._entries = before
            raise
        self._plugins_read = True


_REGISTRIES: weakref.WeakSet[Registry[Any]] = weakref.WeakSet()


def reread_plugins() -> None:
    """Make every registry read installed packages' entry points again at its next lookup."""
    importlib.invalidate_caches()  # importlib.metadata's cache of sys.path's folders too
    for registry in list(_REGISTRIES):
        registry.forget_plugins()


def _distribution(point: EntryPoint) -> str:
    dist = getattr(point, "dist", None)
    return f"the package {dist.name}" if dist is not None else f"the entry point {point.value}"
