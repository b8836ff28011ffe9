"""How long the text of an operator's, a filter's or a text method's result can be, worked
out from its inputs before it is made, for those that can make far more than they are
given (a width, a count, a fill, an escape). Each bound is given `measure`, which sizes a
value as text (mad_eval.settings.bounds.size); a result no longer than its inputs together is
counted after it is made instead.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any

from markupsafe import Markup

Measure = Callable[..., int]
Bound = Callable[[Measure], int]

ESCAPE = 5  # what escaping makes of one character at most: & -> &amp;, " -> &#34;
_FIELD = re.compile(r"%(?:\([^)]*\))?[^a-zA-Z%]*[a-zA-Z%]|\{[^{}]*\}")
_REPR = re.compile(r"![ra]|^%.*[ra]$")  # a field that writes its value's repr
_TEXTS = (str, bytes)


def format_size(fmt: str | bytes, args: Iterable[Any], measure: Measure) -> int:
    """An upper bound on a %-format's or str.format's text: the fields' widths (a width
    taken from the arguments, `%*d` or `{:{}}`, counts every number given), and each field
    as long as the longest argument (as its repr, where a field asks for that: %r, {!a})."""
    text = fmt if isinstance(fmt, str) else fmt.decode("latin-1")
    args = list(args)
    fields = _FIELD.findall(text)
    widths = sum(min(int(n[:13]), 10**12) for f in fields for n in re.findall(r"\d+", f))
    if "*" in "".join(fields) or re.search(r"\{[^{}]*\{", text):
        widths += sum(a for a in args if type(a) is int and a > 0)
    quoted = any(_REPR.search(f) for f in fields)
    longest = max((measure([a]) if quoted else measure(a) for a in args), default=0)
    return len(text) + widths + len(fields) * longest


def _width(value: Any) -> int:
    return value if isinstance(value, int) else 0


def method_bound(text: str | bytes, method: str, args: tuple[Any, ...]) -> Bound | None:
    """The bound of a text method's result, for the methods that can make a longer text;
    a Markup's arguments are escaped first."""
    n = len(text)

    def escaped(measure: Measure) -> Measure:
        return (lambda v, **kw: ESCAPE * measure(v, **kw)) if isinstance(text, Markup) else measure

    if method in ("center", "ljust", "rjust", "zfill"):
        return lambda measure: max([n, *(_width(a) for a in args[:1])])
    if method == "replace" and len(args) >= 2:
        old, new = args[0], args[1]
        # A str in bytes (or bytes in a str) raises TypeError here, as replace() itself would.
        times = text.count(old) if isinstance(old, _TEXTS) and old else n + 1  # type: ignore[arg-type]
        if len(args) > 2 and isinstance(args[2], int) and args[2] >= 0:
            times = min(times, args[2])
        return lambda measure: n + times * escaped(measure)(new)
    if method == "join" and args and isinstance(args[0], Collection):
        items = args[0]
        return lambda measure: sum(map(escaped(measure), items)) + len(items) * n
    if method == "expandtabs":
        tab = args[0] if args and isinstance(args[0], int) else 8
        tabs = text.count("\t") if isinstance(text, str) else text.count(b"\t")
        return lambda measure: n + tabs * tab
    if method in ("format", "format_map"):
        values = [*args, *(args[0].values() if args and isinstance(args[0], Mapping) else ())]
        return lambda measure: format_size(text, values, escaped(measure))
    if method == "translate":
        table = list(args[0].values()) if args and isinstance(args[0], Mapping) else []
        return lambda measure: n * (1 + max(map(measure, table), default=0))
    if method == "encode" and isinstance(text, str) and text.isascii() and len(args) < 1:
        return lambda measure: n  # UTF-8
    if method in ("encode", "hex"):  # \U0001f600 for one character; 'ab' for a byte, a sep
        return lambda measure: 10 * n + 8
    if method in ("upper", "lower", "title", "capitalize", "swapcase", "casefold"):
        return lambda measure: 3 * n  # ß -> SS, ﬃ -> FFI
    return None


def binop_bound(operator: str, left: Any, right: Any) -> Bound | None:
    """The bound of `left operator right` for text, bytes and lists; numbers are bounded
    by their bits apart (mad_eval.settings.sandbox)."""
    sequences = (str, bytes, list, tuple)
    if operator == "*":
        for seq, times in ((left, right), (right, left)):
            if isinstance(seq, sequences) and isinstance(times, int):
                return lambda measure: measure(seq) * max(times, 0)
    elif operator == "+" and isinstance(left, sequences) and isinstance(right, sequences):
        grow = ESCAPE if isinstance(left, Markup) or isinstance(right, Markup) else 1
        return lambda measure: grow * (measure(left) + measure(right))
    elif operator == "%" and isinstance(left, _TEXTS):
        values = right if isinstance(right, tuple) else [right]
        values = list(right.values()) if isinstance(right, Mapping) else values
        grow = ESCAPE if isinstance(left, Markup) else 1
        return lambda measure: format_size(left, values, lambda v: grow * measure(v))
    return None


# The filters filter_bound() has a bound for.
SIZED_FILTERS = frozenset(
    {"center", "replace", "format", "indent", "wordwrap", "join", "string", "safe", "escape",
     "e", "forceescape", "xmlattr", "upper", "lower", "title", "capitalize", "urlencode",
     "urlize", "pprint", "tojson", "batch", "slice"}
)  # fmt: skip


def filter_bound(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Bound | None:
    """The bound of a built-in filter's result (`args`: the value, then the filter's own
    arguments, past any context), for the filters whose result can be longer than their
    inputs together."""
    value = args[0] if args else ""

    def arg(i: int, key: str, default: Any) -> Any:
        return args[i] if len(args) > i else kwargs.get(key, default)

    if name == "center":
        return lambda measure: max(measure(value), _width(arg(1, "width", 80)))
    if name in ("replace", "format", "indent", "wordwrap") and not isinstance(value, str):
        return None  # replace and format are given their value as text; the others fail
    if name == "replace":
        return method_bound(value, "replace", args[1:])
    if name == "format":
        return lambda measure: format_size(value, (*args[1:], *kwargs.values()), measure)
    if name == "indent":
        width, lines = arg(1, "width", 4), value.count("\n") + 1
        return lambda measure: (
            len(value) + lines * (width if isinstance(width, int) else measure(width))
        )
    if name == "wordwrap":
        wrap = arg(3, "wrapstring", None) or "\n"
        return lambda measure: len(value) * (1 + measure(wrap))
    if name == "join":
        glue = arg(1, "d", "")
        items = value if isinstance(value, Collection) else ()
        return lambda measure: sum(map(measure, items)) + len(items) * measure(glue)
    if name in ("string", "safe"):
        return lambda measure: measure(value)
    if name in ("escape", "e", "forceescape", "xmlattr"):
        return lambda measure: ESCAPE * measure(value) + 8
    if name in ("upper", "lower", "title", "capitalize"):
        return lambda measure: 3 * measure(value)
    if name == "urlencode":  # a character: up to four bytes, each %XX
        return lambda measure: 12 * measure(value) + 8
    if name == "urlize":  # each word a link, its text escaped twice, its attributes added
        extra = (arg(3, "target", None), arg(4, "rel", None))
        return lambda measure: measure(value) * (20 + sum(map(measure, extra)) // 4) + 64
    if name == "pprint":  # the repr it makes first; its own text is stopped as it grows
        return lambda measure: measure([value])
    if name == "tojson":
        indent = arg(1, "indent", None)
        step = indent if isinstance(indent, int) else len(indent) if isinstance(indent, str) else 0
        return lambda measure: measure([value], indent=max(step, 0)) + 64
    # batch and slice are given their value as a list
    if name == "batch":
        count, fill = _width(arg(1, "linecount", 1)), arg(2, "fill_with", None)
        fills = 0 if fill is None else count
        return lambda measure: measure(value) + 4 * len(value) + fills * (measure(fill) + 2)
    if name == "slice":
        count, fill = _width(arg(1, "slices", 1)), arg(2, "fill_with", None)
        return lambda measure: measure(value) + count * (6 + (fill is not None) * measure(fill))
    return None
