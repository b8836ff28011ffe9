"""Jinja's built-in filters, each wrapped with its bounds for the sandbox: a step, numbers
past the limit refused, its value given as a list or paced where it goes through many items,
its result sized from its inputs before it is made (mad_eval.settings.growth) and counted
after; sum(), wordwrap and pprint, which can work far longer or write far more in one call
than their inputs suggest, have bounds of their own.
"""

from __future__ import annotations

import functools
import io
import pprint
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from jinja2.filters import make_attrgetter

from mad_eval.settings.bounds import MAX_COPIES, MAX_EXTRA, TICK, BoundError, Budget, budget, paced
from mad_eval.settings.growth import SIZED_FILTERS, filter_bound


def bounded_filters(filters: dict[str, Callable[..., Any]]) -> dict[str, Callable[..., Any]]:
    """Jinja's filters by name, each bounded (pprint writing its text piece by piece)."""
    return {name: _bounded(name, _pprint if name == "pprint" else f) for name, f in filters.items()}


# Filters that go through their value's items in one call: each is given the items paced
# (a look at the clock every so many); those that measure or count them, as a list.
_ITERATING = {"map", "select", "reject", "selectattr", "rejectattr", "unique", "groupby",
              "sort", "min", "max", "list", "first", "sum"}  # fmt: skip
_LISTED = {"join", "batch", "slice"}
_TEXT_OF = {"replace", "format"}  # filters that make str() of their value first
_SHORT_LISTS = (list, tuple, range, str)


def _bounded(name: str, func: Callable[..., Any]) -> Callable[..., Any]:
    """A built-in filter that refuses arguments or a result past the bounds."""
    passes = getattr(func, "jinja_pass_arg", None)
    given = name in _ITERATING or name in _LISTED or name in _TEXT_OF
    sized = name in SIZED_FILTERS

    @functools.wraps(func)
    def bounded(*args: Any, **kwargs: Any) -> Any:
        spent = budget()
        spent.step()
        context, own = (args[:1], args[1:]) if passes is not None else ((), args)
        for value in (*own, *kwargs.values()):
            if type(value) is int and value > MAX_EXTRA and value > spent.limit:
                raise BoundError(f"filter {name} is given the number {value}, too large")
        if own and name == "sum":
            return spent.hold(_summed(_environment(context), *own, **kwargs))
        if own and given:
            own = (_given(name, own[0], spent), *own[1:])
        if name == "join" and (len(own) > 2 or "attribute" in kwargs):
            attribute = own[2] if len(own) > 2 else kwargs.pop("attribute")
            own = (list(map(make_attrgetter(_environment(context), attribute), own[0])), *own[1:2])
        if name == "wordwrap" and own and isinstance(own[0], str):
            _wrap_work(own[0], own[1] if len(own) > 1 else kwargs.get("width", 79))
        if sized:
            bound = filter_bound(name, own, kwargs)
            if bound is not None:
                spent.fits(bound)
        return spent.hold(func(*context, *own, **kwargs))

    return bounded


def _given(name: str, value: Any, spent: Budget) -> Any:
    """A filter's value as it is given to it: a list for those that measure or count their
    items, paced items for those that go through many, text for those that make str() of
    their value first (sized before it is made)."""
    if name in _LISTED:
        return list(paced(value))
    if name in _ITERATING:
        if type(value) in _SHORT_LISTS and len(value) < TICK:
            return value  # the usual case, without asking abc
        return paced(value) if iterable(value) else value
    if name in _TEXT_OF and not isinstance(value, str):
        spent.fits(lambda measure: measure(value))
        return str(value)
    return value


class _Capped(io.StringIO):
    """A text stream that refuses to grow past the render's limit."""

    def __init__(self, spent: Budget):
        super().__init__()
        self.spent, self.size = spent, 0

    def write(self, text: str) -> int:
        self.size += len(text)
        self.spent.check(self.size)
        return super().write(text)


def _pprint(value: Any) -> str:
    """pprint's text, written piece by piece and stopped at the limit: it indents by the
    length of the keys above, which no estimate from the value's own text bounds."""
    stream = _Capped(budget())
    pprint.PrettyPrinter(stream=stream).pprint(value)
    return stream.getvalue()[:-1]


def _environment(context: tuple[Any, ...]) -> Any:
    """The environment of a filter's first argument (an environment, or a context)."""
    return getattr(context[0], "environment", context[0])


def iterable(value: Any) -> bool:
    """Whether `value` is items to go through: not a text, bytes or a table."""
    return isinstance(value, Iterable) and not isinstance(value, (str, bytes, Mapping))


def _summed(environment: Any, items: Any, attribute: Any = None, start: Any = 0) -> Any:
    """sum() of the items, refused before it copies more than MAX_COPIES items (adding
    lists one by one copies the total so far each time) or makes too long a list."""
    if attribute is not None:
        items = map(make_attrgetter(environment, attribute), items)
    spent = budget()
    total = len(start) if isinstance(start, (list, tuple)) else 0
    copied = 0

    def counted() -> Iterator[Any]:
        nonlocal total, copied
        for item in paced(items):
            if isinstance(item, (list, tuple)):
                copied += total
                total += len(item)
                if copied > MAX_COPIES:
                    raise BoundError(f"sum() of these lists copies more than {MAX_COPIES:,} items")
                spent.check(total)
            yield item

    return sum(counted(), start)


def _wrap_work(text: str, width: Any) -> None:
    """Refuse a wordwrap that would copy too much: each line cut from a word longer than
    the width copies the rest of the word."""
    if not isinstance(width, int) or width < 1 or len(text) <= width:
        return
    copies = sum(n * n for n in map(len, text.split()) if n > width) // (2 * width)
    if copies > MAX_COPIES:
        raise BoundError(f"wordwrap at width {width} copies more than {MAX_COPIES:,} characters")
