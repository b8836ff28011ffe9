"""The Jinja environment prompt templates render in. A template file, or the template text a
shared run folder's manifest carries, may come from anyone: it renders in Jinja's immutable
sandbox (no attribute or call reaches Python's internals, nothing is changed in place) with
bounds on the work, the text and the time of each message, checked before a big string is
made, so a hostile template is refused in one sentence and never runs, hangs or fills memory.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import threading
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from typing import Any

import jinja2
from jinja2 import nodes
from jinja2.runtime import markup_join
from jinja2.sandbox import ImmutableSandboxedEnvironment
from jinja2.visitor import NodeTransformer

MAX_RANGE = 10_000  # items of one range(...)
MAX_STEPS = 100_000  # loop turns, calls, attribute reads and operators of one message
MAX_EXTRA = 1_000_000  # characters a message may make beyond 8 times the text it is given
INPUT_FACTOR = 8
MAX_SECONDS = 10.0  # a message's render, a backstop for the bounds above
MAX_INT_BITS = 4096  # numbers a template computes: about 1,200 digits

# Names a template's source cannot spell (a space), for the checks woven into its loops and
# concatenations.
_LOOP, _CONCAT = "mad-eval loop", "mad-eval concat"


class BoundError(Exception):
    """A template went past one of the bounds above; the message says which."""


@dataclasses.dataclass
class _Budget:
    inputs: Callable[[], int] = lambda: 0  # the characters of the render's data, if asked
    steps: int = 0
    made: int = 0
    deadline: float = 0.0
    _limit: int | None = None

    @property
    def limit(self) -> int:
        """The characters this render may make: counted from its data only when a text
        nears it, so an ordinary render never walks its data to count it."""
        if self._limit is None:
            self._limit = MAX_EXTRA + INPUT_FACTOR * self.inputs()
        return self._limit

    def step(self) -> None:
        self.steps += 1
        if self.steps > MAX_STEPS:
            raise BoundError(
                f"it takes more than {MAX_STEPS:,} steps (loop turns, calls, attribute reads)"
            )
        if not self.steps % 64 and self.deadline and time.monotonic() > self.deadline:
            raise BoundError(f"it takes more than {MAX_SECONDS:g} seconds to render")

    def check(self, size: int) -> None:
        """Refuse a text of `size` characters before it is made."""
        if size > MAX_EXTRA and size > self.limit:
            raise BoundError(
                f"it would make a text of over {self.limit:,} characters, this message's bound"
            )

    def add(self, size: int) -> None:
        """Count `size` more characters written or made by this render."""
        self.made += size
        if self.made > MAX_EXTRA and self.made > self.limit:
            raise BoundError(f"it writes more than {self.limit:,} characters, this message's bound")


_local = threading.local()


def _budget() -> _Budget:
    """This thread's render budget; outside a render (Jinja folding constants while it
    compiles) a fresh one, so the size checks hold there too."""
    return getattr(_local, "budget", None) or _Budget()


_SHORT = (int, float, bool, type(None), range)
_PLAIN = (str, int, float, bool, type(None))


def size(value: Any, cap: int = 1 << 62, depth: int = 0) -> int:
    """About how many characters `value` turns into as text, counted up to `cap`, without
    making that text."""
    kind = type(value)
    if kind is str:
        return len(value)
    if kind in _SHORT:
        return 24
    if depth > 50:
        raise BoundError("it nests data more than 50 levels deep")
    if kind is dict or isinstance(value, Mapping):
        value = [*value.keys(), *value.values()]
    elif kind in _FIELDS or (dataclasses.is_dataclass(value) and not isinstance(value, type)):
        if kind not in _FIELDS:
            _FIELDS[kind] = tuple(f.name for f in dataclasses.fields(value))
        value = [getattr(value, name) for name in _FIELDS[kind]]
    elif isinstance(value, str):
        return len(value)
    elif kind not in (list, tuple) and not isinstance(value, Collection):
        return 24  # a function, a loop, an undefined value: short as text
    total = 2
    for item in value:
        total += (len(item) if type(item) is str else size(item, cap, depth + 1)) + 2
        if total > cap:
            break
    return total


_FIELDS: dict[type, tuple[str, ...]] = {}  # a dataclass's field names, by class


def render(template: jinja2.Template, data: dict[str, Any]) -> str:
    """`template` rendered with `data`, within the bounds."""
    budget = _Budget(lambda: size(data), deadline=time.monotonic() + MAX_SECONDS)
    outer, _local.budget = getattr(_local, "budget", None), budget
    try:
        return template.render(data)
    finally:
        _local.budget = outer


def _range(*args: int) -> range:
    found = range(*args)
    if len(found) > MAX_RANGE:
        raise BoundError(f"range() of more than {MAX_RANGE:,} numbers")
    return found


def _loop(items: Iterable[Any], text: int) -> Iterator[Any]:
    """A loop's items, each turn counted with the literal text its body writes."""
    budget = _budget()
    for item in items:
        budget.step()
        budget.add(text)
        yield item


def _concat(parts: tuple[Any, ...]) -> str:
    budget = _budget()
    budget.check(sum(size(p, budget.limit) for p in parts))
    joined = (
        markup_join(parts)
        if any(hasattr(p, "__html__") for p in parts)
        else ("".join(map(str, parts)))
    )
    budget.add(len(joined))
    return joined


def _finalize(value: Any) -> Any:
    budget = _budget()
    kind = type(value)
    n = len(value) if kind is str else 24 if kind in _SHORT else size(value, budget.limit)
    budget.check(n)
    budget.add(n)
    return value


_FIELD = re.compile(r"%(?:\([^)]*\))?[^a-zA-Z%]*[a-zA-Z%]|\{[^{}]*\}")


def _format_size(fmt: str, args: Iterable[Any], cap: int) -> int:
    """An upper bound on a %-format's or str.format's text: the fields' widths (a width
    taken from the arguments, `%*d` or `{:{}}`, counts every number given), and each field
    as long as the longest argument."""
    args = list(args)
    fields = _FIELD.findall(fmt)
    widths = sum(min(int(n[:13]), 10**12) for f in fields for n in re.findall(r"\d+", f))
    if "*" in "".join(fields) or re.search(r"\{[^{}]*\{", fmt):
        widths += sum(a for a in args if type(a) is int and a > 0)
    longest = max((size(a, cap) for a in args), default=0)
    return len(fmt) + widths + len(fields) * longest


def _str_method_size(method: str, text: str, args: tuple[Any, ...], cap: int) -> int | None:
    """The size of a string method's result, for the methods that can make long text."""
    if method in ("center", "ljust", "rjust", "zfill"):
        return max(len(text), *(a for a in args[:1] if isinstance(a, int)))
    if method == "replace" and len(args) >= 2:
        old, new = str(args[0]), str(args[1])
        times = text.count(old) if old else len(text) + 1
        if len(args) > 2 and isinstance(args[2], int) and args[2] >= 0:
            times = min(times, args[2])
        return len(text) + times * len(new)
    if method == "join" and args and isinstance(args[0], Collection):
        return sum(size(i, cap) for i in args[0]) + len(args[0]) * len(text)
    if method == "expandtabs":
        tab = args[0] if args and isinstance(args[0], int) else 8
        return len(text) + text.count("\t") * max(tab, 0)
    if method in ("format", "format_map"):
        values = [*args, *(args[0].values() if method == "format_map" and args else [])]
        return _format_size(text, values, cap)
    if method == "translate":
        return len(text) * (1 + max((size(v, cap) for v in _values(args)), default=0))
    return None


def _values(args: tuple[Any, ...]) -> list[Any]:
    return list(args[0].values()) if args and isinstance(args[0], Mapping) else []


def _filter_size(name: str, args: tuple[Any, ...], kwargs: dict[str, Any], cap: int) -> int:
    """The size of a built-in filter's result, for the filters that can make long text."""
    value = args[0] if args else ""
    text = value if isinstance(value, str) else ""

    def arg(i: int, key: str, default: Any) -> Any:
        return args[i] if len(args) > i else kwargs.get(key, default)

    if name == "center":
        width = arg(1, "width", 80)
        return max(len(text), width if isinstance(width, int) else 0)
    if name == "indent":
        width = arg(1, "width", 4)
        per = width if isinstance(width, int) else size(width, cap)
        return len(text) + (text.count("\n") + 1) * max(per, 0)
    if name == "wordwrap":
        wrap = arg(3, "wrapstring", None) or "\n"
        return len(text) * (1 + size(wrap, cap))
    if name == "replace":
        return _str_method_size("replace", text, args[1:], cap) or 0
    if name == "join":
        glue = size(arg(1, "d", ""), cap)
        items = value if isinstance(value, Collection) else ()
        return sum(size(i, cap) for i in items) + len(items) * glue
    if name == "format":
        return _format_size(text, [*args[1:], *kwargs.values()], cap)
    return 0


# The filters whose text can be far longer than what they are given.
_MAKERS = ("center", "indent", "wordwrap", "replace", "join", "format")


def _bounded_filter(name: str, func: Callable[..., Any]) -> Callable[..., Any]:
    """A built-in filter that refuses arguments or a result past the bounds."""
    passes = getattr(func, "jinja_pass_arg", None)

    @functools.wraps(func)
    def bounded(*args: Any, **kwargs: Any) -> Any:
        budget = _budget()
        budget.step()
        own = args[1:] if passes is not None else args  # past the context Jinja passes
        if name == "join" and own and not isinstance(own[0], Collection):
            own = (list(own[0]), *own[1:])  # a generator, counted before it is joined
            args = (*args[: len(args) - len(own)], *own)
        for value in (*own, *kwargs.values()):
            if type(value) is int and value > MAX_EXTRA and value > budget.limit:
                raise BoundError(f"filter {name} is given the number {value}, too large")
        if name in _MAKERS:
            budget.check(_filter_size(name, own, kwargs, budget.limit))
        result = func(*args, **kwargs)
        if isinstance(result, str):
            budget.add(len(result))
        return result

    return bounded


class _Weave(NodeTransformer):
    """Counts every loop turn (with its body's literal text) and checks every `~`
    concatenation's size before it is made; refuses recursive loops, whose inner turns
    would go uncounted."""

    def visit_For(self, node: nodes.For) -> nodes.Node:
        if node.recursive:
            raise BoundError("recursive loops are not supported")
        self.generic_visit(node)
        text = sum(
            len(n.data) for body in node.body for n in body.find_all(nodes.TemplateData)
        ) + sum(len(str(n.value)) for body in node.body for n in body.find_all(nodes.Const))
        node.iter = nodes.Filter(
            node.iter, _LOOP, [nodes.Const(text)], [], None, None, lineno=node.lineno
        )
        return node

    def visit_Concat(self, node: nodes.Concat) -> nodes.Node:
        self.generic_visit(node)
        parts = nodes.Tuple(node.nodes, "load", lineno=node.lineno)
        return nodes.Filter(parts, _CONCAT, [], [], None, None, lineno=node.lineno)


class Sandbox(ImmutableSandboxedEnvironment):
    """Jinja's immutable sandbox with the bounds above. Globals: a bounded range only."""

    intercepted_binops = frozenset({"*", "**", "%", "+"})

    def __init__(self) -> None:
        super().__init__(
            undefined=jinja2.StrictUndefined,
            autoescape=False,
            trim_blocks=True,
            lstrip_blocks=True,
            finalize=_finalize,
        )
        self.globals.clear()
        self.globals["range"] = _range
        self.filters = {name: _bounded_filter(name, f) for name, f in self.filters.items()}
        self.filters[_LOOP] = _loop
        self.filters[_CONCAT] = _concat

    def compile_checked(self, tree: nodes.Template) -> jinja2.Template:
        """A parsed template compiled with its loops and concatenations bounded."""
        woven = _Weave().visit(tree)
        woven.set_environment(self)
        return self.from_string(woven)

    def is_safe_attribute(self, obj: Any, attr: str, value: Any) -> bool:
        # Jinja's checks depend on the object's type and the name only: asked once each.
        return _safe_attribute(self, type(obj), obj, attr, value)

    def getattr(self, obj: Any, attribute: str) -> Any:
        _budget().step()
        try:  # a plain value (a response's text): as Jinja decides, without its other checks
            value = getattr(obj, attribute)
        except AttributeError:
            pass
        else:
            if type(value) in _PLAIN and self.is_safe_attribute(obj, attribute, value):
                return value
        return super().getattr(obj, attribute)

    def getitem(self, obj: Any, argument: Any) -> Any:
        _budget().step()
        return super().getitem(obj, argument)

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        budget = _budget()
        budget.step()
        sized = (str, list, tuple)
        if operator == "*":
            for seq, n in ((left, right), (right, left)):
                if isinstance(seq, sized) and isinstance(n, int):
                    budget.check(size(seq, budget.limit) * max(n, 0))
            _check_int(left, right, lambda a, b: a.bit_length() + b.bit_length())
        elif operator == "**":
            _check_int(left, right, lambda a, b: a.bit_length() * max(b, 0))
        elif operator == "%" and isinstance(left, str):
            values = right if isinstance(right, tuple) else [right]
            values = list(right.values()) if isinstance(right, Mapping) else values
            budget.check(_format_size(left, values, budget.limit))
        elif operator == "+" and isinstance(left, sized) and isinstance(right, sized):
            budget.check(size(left, budget.limit) + size(right, budget.limit))
        result = super().call_binop(context, operator, left, right)
        if isinstance(result, str):
            budget.add(len(result))
        return result

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:
        budget = _budget()
        budget.step()
        owner = getattr(getattr(__obj, "__wrapped__", __obj), "__self__", None)
        if isinstance(owner, str):  # a string method: some make text far longer
            method = getattr(__obj, "__name__", "")
            made = _str_method_size(method, owner, (*args, *kwargs.values()), budget.limit)
            budget.check(made or 0)
        result = super().call(__context, __obj, *args, **kwargs)
        if isinstance(result, str):
            budget.add(len(result))
        return result


_SAFE: dict[tuple[type, str], bool] = {}


def _safe_attribute(env: Sandbox, kind: type, obj: Any, attr: str, value: Any) -> bool:
    key = (kind, attr)
    if key not in _SAFE:
        if len(_SAFE) > 10_000:
            _SAFE.clear()
        _SAFE[key] = ImmutableSandboxedEnvironment.is_safe_attribute(env, obj, attr, value)
    return _SAFE[key]


def _check_int(left: Any, right: Any, bits: Callable[[int, int], int]) -> None:
    ints = all(isinstance(x, int) and not isinstance(x, bool) for x in (left, right))
    if ints and abs(left) > 1 and bits(abs(left), right) > MAX_INT_BITS:
        raise BoundError(f"it computes a number of more than {MAX_INT_BITS} bits")


SANDBOX = Sandbox()
