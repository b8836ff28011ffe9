"""Values checked against type hints, not against the text of a type: a run's settings as
given, a manifest's "config" as read, a roster file's entries."""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Sequence
from typing import Any


def fits(value: Any, hint: Any) -> bool:
    """Whether `value` is of type `hint` exactly (true is no number, "3" no integer; a
    float may be written as an integer), a sequence a list or tuple of fitting items, a
    dataclass a table of its fields."""
    if hint is Any:
        return True
    if hint is type(None):
        return value is None
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (types.UnionType, typing.Union):
        return any(fits(value, part) for part in args)
    if origin in (tuple, list, Sequence):  # tuple[X, ...], list[X] or Sequence[X]
        return isinstance(value, list | tuple) and all(fits(item, args[0]) for item in value)
    if origin is dict:
        return isinstance(value, dict) and all(
            fits(key, args[0]) and fits(item, args[1]) for key, item in value.items()
        )
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):  # made, or a table of fields
        return isinstance(value, hint) or _table_fits(value, hint)
    if hint is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, hint)


def describe(hint: Any) -> str:
    """A type as a message names it: `int`, `float or str`, `a list of str`."""
    union = typing.get_origin(hint) in (types.UnionType, typing.Union)
    parts = typing.get_args(hint) if union else (hint,)
    names = []
    for part in parts:
        origin = typing.get_origin(part)
        if part is type(None):
            continue
        if origin in (tuple, list, Sequence):
            names.append(f"a list of {describe(typing.get_args(part)[0])}")
        elif origin is dict:
            names.append("dict")
        elif isinstance(part, type) and dataclasses.is_dataclass(part):
            names.append(f"{part.__name__} tables")
        else:
            names.append(getattr(part, "__name__", str(part)))
    return " or ".join(names)


def _table_fits(value: Any, cls: type) -> bool:
    """A table of a dataclass's fields: those without a default present, every key a field."""
    hints = typing.get_type_hints(cls)
    needed = {
        f.name
        for f in dataclasses.fields(cls)
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    }
    return (
        isinstance(value, dict)
        and needed <= value.keys()
        and all(key in hints and fits(item, hints[key]) for key, item in value.items())
    )
