"""The Jinja environment prompt templates render in. A template file, or the template text a
shared run folder's manifest carries, may come from anyone: it renders in Jinja's immutable
sandbox (no attribute or call reaches Python's internals, nothing is changed in place), may
call only its own macros and the methods that read texts, lists and tables, and works
within the bounds of mad_eval.settings.bounds: every loop turn and call is a step, every text,
bytes, list and table it makes is sized from its inputs before it is made (mad_eval.settings.
growth), long filters look at the clock, so a hostile template is refused in one sentence
and never runs code, hangs or fills memory.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import jinja2
from jinja2 import meta, nodes
from jinja2.exceptions import SecurityError
from jinja2.runtime import BlockReference, LoopContext, Macro, Undefined, markup_join
from jinja2.sandbox import ImmutableSandboxedEnvironment
from jinja2.visitor import NodeTransformer

from mad_eval.settings.bounds import (
    MAX_INT_BITS,
    MAX_RANGE,
    MAX_SECONDS,
    MAX_STEPS,
    MAX_TOKENS,
    BoundError,
    Budget,
    budget,
    deadline,
    inputs,
    paced,
    sharing,
    spending,
    written,
)
from mad_eval.settings.filters import bounded_filters, iterable
from mad_eval.settings.growth import ESCAPE, binop_bound, method_bound

__all__ = ["MAX_STEPS", "PLAIN", "SANDBOX", "BoundError", "Sandbox", "render", "sharing"]

# Names a template's source cannot spell (a space), for the checks woven into its loops,
# concatenations and the lists and tables it writes.
_LOOP, _CONCAT, _HOLD = "mad-eval loop", "mad-eval concat", "mad-eval hold"


def render(template: jinja2.Template, data: dict[str, Any]) -> str:
    """`template` rendered with `data`, within the bounds."""
    spent = Budget(lambda: inputs(data), deadline=deadline())
    with spending(spent):
        return template.render(data)


def _range(*args: int) -> range:
    found = range(*args)
    if len(found) > MAX_RANGE:
        raise BoundError(f"range() of more than {MAX_RANGE:,} numbers")
    return found


def _loop(items: Iterable[Any], text: int) -> Iterator[Any]:
    """A loop's items, each turn counted with the literal text its body writes."""
    turn = budget().turn
    for item in items:
        turn(text)
        yield item


def _concat(parts: tuple[Any, ...]) -> str:
    spent = budget()
    markup = any(hasattr(p, "__html__") for p in parts)
    if markup:  # the other parts are escaped
        spent.fits(lambda m: sum(m(p) * (1 if hasattr(p, "__html__") else ESCAPE) for p in parts))
        joined: str = markup_join(parts)
    else:
        spent.fits(lambda measure: sum(map(measure, parts)))
        joined = "".join(map(str, parts))
    spent.hold(joined)
    return joined


def _hold(value: Any) -> Any:
    """A list, tuple or table the template writes, counted and sized."""
    return budget().hold(value)


def _finalize(value: Any) -> Any:
    """A value written out, counted (a text is already made: only its copy into the
    message is to come)."""
    kind = type(value)
    if kind is str:
        written(len(value))
    elif kind is int or kind is bool or kind is float or value is None:
        written(24)
    else:
        spent = budget()
        spent.fits(lambda measure: measure(value))
        spent.add(24)
    return value


class _Weave(NodeTransformer):
    """Counts every loop turn (with its body's literal text), sizes every `~`
    concatenation before it is made and every list or table the template writes; refuses
    recursive loops, whose inner turns would go uncounted."""

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

    def visit_List(self, node: nodes.List) -> nodes.Node:
        return self._held(node, node.items)

    def visit_Tuple(self, node: nodes.Tuple) -> nodes.Node:
        return self._held(node, node.items) if node.ctx == "load" else self.generic_visit(node)

    def visit_Dict(self, node: nodes.Dict) -> nodes.Node:
        return self._held(node, [n for pair in node.items for n in (pair.key, pair.value)])

    def _held(self, node: nodes.Expr, items: Sequence[nodes.Node]) -> nodes.Node:
        self.generic_visit(node)
        if all(isinstance(item, nodes.Const) for item in items):
            return node  # written out in the source, which is bounded
        return nodes.Filter(node, _HOLD, [], [], None, None, lineno=node.lineno)


# The methods of lists, tables and numbers a template may call: those that only read.
_READS: dict[type, frozenset[str]] = {
    dict: frozenset({"get", "keys", "values", "items", "copy"}),
    list: frozenset({"count", "index", "copy"}),
    tuple: frozenset({"count", "index"}),
    range: frozenset({"count", "index"}),
}


def _callable(obj: Any) -> bool:
    """Whether a template may call `obj`: its macros and blocks, its loop's helpers, range,
    a text's methods, and the reading methods above."""
    if isinstance(obj, (Macro, BlockReference, LoopContext, Undefined)) or obj is _range:
        return True
    owner = getattr(getattr(obj, "__wrapped__", obj), "__self__", None)
    if isinstance(owner, (str, bytes, LoopContext)):
        return True
    return getattr(obj, "__name__", None) in _READS.get(type(owner), ())


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
            optimized=False,  # Jinja would work out constant parts while compiling, unbounded
        )
        self.globals.clear()
        self.globals["range"] = _range
        self.filters = bounded_filters(self.filters)
        self.filters[_LOOP] = _loop
        self.filters[_CONCAT] = _concat
        self.filters[_HOLD] = _hold

    def read(self, source: str) -> tuple[nodes.Template, set[str]]:
        """A template's tree and the variables it reads. Reading takes time in proportion to
        its tokens, which are counted first; Jinja's analysis works out constant parts
        (calls filters on constants) while it reads, bounded here as a render is."""
        if sum(1 for _ in itertools.islice(self.lex(source), MAX_TOKENS + 1)) > MAX_TOKENS:
            raise BoundError(f"it holds more than {MAX_TOKENS:,} Jinja tokens")
        with spending(Budget(deadline=time.monotonic() + MAX_SECONDS)):
            tree = self.parse(source)
            return tree, meta.find_undeclared_variables(tree)

    def compile_checked(self, tree: nodes.Template) -> jinja2.Template:
        """A parsed template compiled with its loops, concatenations and written lists
        bounded."""
        woven = _Weave().visit(tree)
        woven.set_environment(self)
        return self.from_string(woven)

    def is_safe_attribute(self, obj: Any, attr: str, value: Any) -> bool:
        # Jinja's checks depend on the object's type and the name only: asked once each.
        return _safe_attribute(self, type(obj), obj, attr, value)

    def getattr(self, obj: Any, attribute: str) -> Any:
        # Not a step: a read does nothing long, and a loop's reads are its turns'.
        try:  # a plain value (a response's text): as Jinja decides, without its other checks
            value = getattr(obj, attribute)
        except AttributeError:
            pass
        else:
            if type(value) in _PLAIN:
                safe = _SAFE.get((type(obj), attribute))
                if safe is None:
                    safe = self.is_safe_attribute(obj, attribute, value)
                if safe:
                    return value
        return super().getattr(obj, attribute)

    def getitem(self, obj: Any, argument: Any) -> Any:
        found = super().getitem(obj, argument)
        if type(argument) is slice and isinstance(found, (str, bytes, list, tuple)):
            budget().add(len(found))  # a copy
        return found

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        spent = budget()
        spent.step()
        if operator == "*":
            _check_int(left, right, lambda a, b: a.bit_length() + b.bit_length())
        elif operator == "**":
            _check_int(left, right, lambda a, b: a.bit_length() * max(b, 0))
        bound = binop_bound(operator, left, right)
        if bound is not None:
            spent.fits(bound)
        result = super().call_binop(context, operator, left, right)
        if isinstance(result, (str, bytes, list, tuple)):
            spent.add(len(result))
        return result

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:
        spent = budget()
        spent.step()
        if not _callable(__obj):
            raise SecurityError(f"a template cannot call {_name(__obj)}")
        owner = getattr(getattr(__obj, "__wrapped__", __obj), "__self__", None)
        if isinstance(owner, (str, bytes)):  # a text's method: some make far longer text
            method = getattr(__obj, "__name__", "")
            if method == "join" and args and iterable(args[0]):
                args = (list(paced(args[0])), *args[1:])
            bound = method_bound(owner, method, (*args, *kwargs.values()))
            if bound is not None:
                spent.fits(bound)
        return spent.hold(super().call(__context, __obj, *args, **kwargs))


def _name(obj: Any) -> str:
    owner = getattr(obj, "__self__", None)
    name = getattr(obj, "__name__", type(obj).__name__)
    if owner is None:
        return f"{name}()"
    kind = owner.__name__ if isinstance(owner, type) else type(owner).__name__
    return f"{kind}.{name}()"


# Attribute values whose reads need none of Jinja's other checks (str.format's wrapping).
_PLAIN = {str, int, float, bool, type(None), list, tuple, dict}
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
# The project's own templates: the same options, no sandbox (mad_eval.settings.templates._ours).
PLAIN = jinja2.Environment(
    undefined=jinja2.StrictUndefined, autoescape=False, trim_blocks=True, lstrip_blocks=True
)
