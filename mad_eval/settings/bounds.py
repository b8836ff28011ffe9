"""What one render of a prompt template may spend (steps, characters made, copying and time)
and how long a value is as text, measured without making the text. mad_eval.settings.sandbox
weaves these checks into every loop, operator, filter and call of a template from anyone.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from typing import Any

MAX_TOKENS = 20_000  # Jinja tokens of one message: tags, names, operators, not its text
MAX_RANGE = 10_000  # items of one range(...)
MAX_STEPS = 100_000  # loop turns, calls, filters and operators of one message
MAX_EXTRA = 1_000_000  # characters a message may make beyond 8 times the text it is given
INPUT_FACTOR = 8
MAX_SECONDS = 10.0  # a message's render (a check's sample prompts: all), a backstop
MAX_INT_BITS = 4096  # numbers a template computes: about 1,200 digits
MAX_DEPTH = 50  # levels of nested data
MAX_COPIES = 10_000_000  # items one filter copies beyond its result (sum() of lists)
TICK = 1024  # items a walk or a filter goes through between two looks at the clock


class BoundError(Exception):
    """A template went past one of the bounds above; the message says which."""


class Budget:
    """One render's account: the limit on the text it may make grows with its data, which
    is measured only when a text nears the fixed part, so an ordinary render never walks it."""

    __slots__ = ("_limit", "deadline", "inputs", "made", "steps")

    def __init__(self, inputs: Callable[[], int] = lambda: 0, deadline: float = 0.0):
        self.inputs = inputs  # the characters of the render's data, if asked
        self.deadline = deadline
        self.steps = self.made = 0
        self._limit: int | None = None

    @property
    def limit(self) -> int:
        if self._limit is None:
            self._limit = MAX_EXTRA + INPUT_FACTOR * self.inputs()
        return self._limit

    def step(self) -> None:
        self.steps += 1
        if self.steps > MAX_STEPS:
            raise BoundError(
                f"it takes more than {MAX_STEPS:,} steps (loop turns, calls, filters, operators)"
            )
        if not self.steps % 64:
            self.tick()

    def tick(self) -> None:
        if self.deadline and time.monotonic() > self.deadline:
            raise BoundError(f"it takes more than {MAX_SECONDS:g} seconds to render")

    def check(self, size: int) -> None:
        """Refuse a text of `size` characters before it is made."""
        if size > MAX_EXTRA and size > self.limit:
            raise BoundError(
                f"it would make a text of over {self.limit:,} characters, this message's bound"
            )

    def fits(self, bound: Callable[[Callable[[Any], int]], int]) -> None:
        """Refuse what `bound` says would pass the limit, `bound` given a way to size a
        value: a quick one first (each quoted character counted as its longest escape),
        then, only if that says too long, one that counts the escapes."""
        if bound(quick) > MAX_EXTRA:
            cap = self.limit

            def counted(value: Any, indent: int = 0) -> int:
                return size(value, cap, indent=indent)

            self.check(bound(counted))

    def add(self, size: int) -> None:
        """Count `size` more characters written or made by this render."""
        self.made += size
        if self.made > MAX_EXTRA and self.made > self.limit:
            raise BoundError(f"it writes more than {self.limit:,} characters, this message's bound")

    def turn(self, text: int) -> None:
        """A loop turn, which writes `text` characters of the template's own (step() and
        add() in one: this runs for every turn)."""
        self.steps += 1
        self.made += text
        if self.made > MAX_EXTRA or self.steps > MAX_STEPS or not self.steps % 64:
            self.steps -= 1
            self.made -= text
            self.step()
            self.add(text)

    def hold(self, value: Any) -> Any:
        """`value`, made by the template, counted: text by its length, a list or table by its
        items, and refused if its text (every shared part as often as it is reached) would
        pass the limit, so nothing later can make that text or walk that far."""
        kind = type(value)
        if kind is str or isinstance(value, (str, bytes, bytearray)):
            self.add(len(value))
        elif kind in (list, tuple, dict):
            self.add(len(value))
            if not _few_atoms(value):
                self.fits(lambda measure: measure(value))
        return value


_ATOMS = (int, float, bool, type(None))


def _few_atoms(value: list[Any] | tuple[Any, ...] | dict[Any, Any]) -> bool:
    """Whether a container holds only a few numbers and short texts, so its text is short
    with no need to walk it: [agent, n - 1]."""
    items = [*value.keys(), *value.values()] if type(value) is dict else value
    return len(items) <= 16 and all(
        type(item) in _ATOMS or (type(item) is str and len(item) <= 4096) for item in items
    )


class _Current(threading.local):
    budget: Budget | None = None
    deadline: float = 0.0  # one for every render, where set (a template's check)


_local = _Current()


def budget() -> Budget:
    """This thread's render budget; outside a render, a fresh one (with no deadline), so
    the size checks hold there too."""
    return _local.budget or Budget()


def written(size: int) -> None:
    """Count `size` characters written out by this thread's render (add() inlined: this runs
    for every value written)."""
    spent = _local.budget or Budget()
    spent.made += size
    if spent.made > MAX_EXTRA:
        spent.made -= size
        spent.add(size)


class spending:
    """Charge what runs inside to `spent` (a render, or reading a template, whose constant
    parts Jinja works out then)."""

    def __init__(self, spent: Budget):
        self.spent = spent

    def __enter__(self) -> Budget:
        self.outer, _local.budget = _local.budget, self.spent
        return self.spent

    def __exit__(self, *exc: object) -> None:
        _local.budget = self.outer


class sharing:
    """Every render inside ends by one deadline, MAX_SECONDS from now: a template's check
    renders many sample prompts, which together take no longer than one may."""

    def __enter__(self) -> None:
        self.outer = _local.deadline
        if not self.outer:
            _local.deadline = time.monotonic() + MAX_SECONDS

    def __exit__(self, *exc: object) -> None:
        _local.deadline = self.outer


def deadline() -> float:
    """When a render starting now must end."""
    alone = time.monotonic() + MAX_SECONDS
    shared = _local.deadline
    return shared if shared and shared < alone else alone


def paced(items: Iterable[Any]) -> Iterator[Any]:
    """`items`, looking at the clock every TICK of them, for a filter that goes through
    them in one call."""
    spent = budget()
    for i, item in enumerate(items, 1):
        if not i % TICK:
            spent.tick()
        yield item


def quick(value: Any, indent: int = 0) -> int:
    """size() up to a little past MAX_EXTRA, each quoted character counted as its longest
    escape."""
    return size(value, MAX_EXTRA, quoting=_longest, indent=indent)


def inputs(data: Any) -> int:
    """The characters of text in a render's data, a shared text as often as it is reached."""
    return size(data, quoting=len)


def size(
    value: Any,
    cap: int = 1 << 62,
    *,
    quoting: Callable[[str], int] | None = None,
    indent: int = 0,
) -> int:
    """About how many characters `value` turns into as text (counted up to a little past
    `cap`), without making the text: str() of it, a container's repr, or its JSON with
    `indent` more per line. A part shared by reference counts as often as the text repeats
    it, yet is walked once. A text inside a container counts as `quoting` says: at most 12
    characters for each of its characters that repr or JSON may escape."""
    if type(value) is str:
        return len(value)
    return _Walk(cap, quoting or _escaped, indent).size(value, 0)


def _longest(text: str) -> int:
    return 12 * len(text) + 2


# What repr and JSON write as an escape: control characters, quotes, backslash, and what
# tojson writes as \u00XX (<, >, &, ').
_ESCAPED = bytes(range(32)) + b"\x7f\\'\"<>&"


def _escaped(text: str) -> int:
    plain = text.encode("ascii", "ignore").translate(None, _ESCAPED)
    return len(text) + 2 + 11 * (len(text) - len(plain))


_SHORT = {bool: 5, type(None): 4, float: 24, range: 80}
_FIELDS: dict[type, tuple[str, ...]] = {}  # a dataclass's field names, by class


class _Walk:
    def __init__(self, cap: int, quoting: Callable[[str], int], indent: int):
        self.cap, self.quoting, self.indent = cap, quoting, indent
        self.known: dict[int, int] = {}  # sizes of the parts walked, by id (all alive)
        self.walked = 0

    def size(self, value: Any, depth: int) -> int:
        kind = type(value)
        if kind in _SHORT:
            return _SHORT[kind]
        if isinstance(value, str):
            if not depth:
                return len(value)
            found = self.known.get(id(value))
            if found is None:
                found = self.quoting(value) + (kind is not str) * 10  # Markup('...')
                self.known[id(value)] = found
            return found
        if isinstance(value, (bytes, bytearray)):
            return 4 * len(value) + 14  # b'\xNN...', bytearray(b'...')
        if isinstance(value, int):
            return value.bit_length() * 309 // 1024 + 3  # its digits, sign, quotes (a key)
        found = self.known.get(id(value))
        if found is not None:
            return found
        parts = _parts(value)
        if parts is None:
            return 80  # what prints short: a function, a loop, a generator
        if depth >= MAX_DEPTH:
            raise BoundError(f"it nests data more than {MAX_DEPTH} levels deep")
        self.walked += 1
        if not self.walked % TICK:
            budget().tick()
        line = self.indent * (depth + 1) + 1 if self.indent else 0
        total = 2
        for part in parts:
            total += self.size(part, depth + 1) + 2 + line
            if total > self.cap:
                break
        self.known[id(value)] = total
        return total


def _parts(value: Any) -> Iterable[Any] | None:
    """What a container's text is made of: items, keys and values, fields and their names."""
    kind = type(value)
    if kind is list or kind is tuple:
        items: Iterable[Any] = value
        return items
    if kind is dict or isinstance(value, Mapping):
        return [part for pair in value.items() for part in pair]
    if kind in _FIELDS or (dataclasses.is_dataclass(value) and not isinstance(value, type)):
        if kind not in _FIELDS:
            _FIELDS[kind] = tuple(f.name for f in dataclasses.fields(value))
        names = _FIELDS[kind]
        return [*names, *(getattr(value, name) for name in names)]
    if isinstance(value, Collection) and not isinstance(value, range):
        return value  # a set, a table's keys
    return None
