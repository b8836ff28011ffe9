"""Mutated prompt template files from a seed, for fuzzing the loader and the renderer: each is
a shipped template (or a small one) with hostile Jinja spliced into a message and sometimes
its TOML broken. The Jinja comes from the building blocks of the bounds' known bypasses:
huge multipliers, chained and nested filters, parts shared by reference, deep nesting,
methods that make or convert, unsafe attributes, odd unicode, broken syntax.

    for text in mutated_templates(seed=41, count=1000): ...
"""

from __future__ import annotations

import json
import random
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

SHIPPED = Path(__file__).resolve().parents[1] / "templates"
SMALL = (
    '[[round0]]\nrole = "user"\ncontent = "{{ question }} {{ answer_format }}"\n\n'
    '[[debate]]\nrole = "user"\ncontent = "{% for r in responses %}{{ r.text }}{% endfor %} '
    '{{ question }}"\n'
)

NAMES = ["question", "answer_format", "agent", "agents", "round", "persona", "role", "values"]
DEBATE_NAMES = ["responses", "peers", "own", "responses[0]", "peers|first"]
NUMBERS = ["0", "1", "-1", "2", "7", "1000", "10000", "100000", "1000000", "10**9", "2**64",
           "10**100", "1.5", "-0.0", "1e308"]  # fmt: skip
TEXTS = ["''", "'x'", "' '", "'\\n'", "'<response>'", "'%s'", "'%999999999d'", "'{:>99999999}'",
         "'{0.__class__}'", "'ß'", "'\U0001f600'", "'\u202e'", "'\\x00'", "'&<>\"'"]  # fmt: skip
FILTERS = ["string", "tojson", "pprint", "list", "join", "sum", "batch", "slice", "map", "select",
           "reject", "sort", "unique", "first", "last", "length", "upper", "title", "center",
           "indent", "wordwrap", "replace", "format", "escape", "forceescape", "urlize",
           "urlencode", "xmlattr", "truncate", "striptags", "reverse", "groupby", "dictsort",
           "items", "min", "max", "int", "float", "abs", "round", "default", "attr", "safe",
           "trim", "wordcount", "filesizeformat", "random", "count"]  # fmt: skip
METHODS = ["format", "encode", "center", "ljust", "zfill", "replace", "join", "split", "upper",
           "expandtabs", "translate", "format_map", "hex", "decode", "to_bytes", "fromkeys",
           "copy", "count", "index", "get", "items", "keys", "escape", "mro", "__class__",
           "__init__", "__globals__", "__subclasses__", "append", "pop", "update"]  # fmt: skip
SUBSCRIPTS = ["0", "-1", "::-1", "1:", "'x'", "999999", "agent"]
UNSAFE = ["__class__", "__mro__", "__globals__", "__init__", "__subclasses__", "__dict__",
          "_TemplateReference__context", "gi_frame", "func_globals", "__builtins__"]  # fmt: skip
BROKEN = ["{{", "}}", "{%", "%}", "{% for x in %}", "{% endfor %}", "{% if %}", "{{ ) }}",
          "{{ 'unclosed }}", "{% set = %}", "{# ", "{% raw %}", "{% macro %}", "{{ a.. }}",
          "{% include 'x.toml' %}", "{% extends 'debate' %}", "{% import 'x' as y %}",
          "{{ [1,2 }}", "{{ {1: }}"]  # fmt: skip


class Mutator:
    """A seeded source of hostile Jinja expressions and statements."""

    def __init__(self, seed: int, debate: bool = False):
        self.rng = random.Random(seed)
        self.names = NAMES + (DEBATE_NAMES if debate else [])
        self.sets: list[str] = []  # names this template has set

    def pick(self, options: list[str]) -> str:
        return self.rng.choice(options)

    def atom(self) -> str:
        kind = self.rng.random()
        if kind < 0.45 or not self.sets:
            return self.pick(self.names)
        if kind < 0.65:
            return self.pick(self.sets)
        if kind < 0.8:
            return self.pick(NUMBERS)
        return self.pick(TEXTS)

    def expr(self, depth: int = 0) -> str:
        """An expression: an atom grown by operators, filters, calls and literals."""
        if depth > 4 or self.rng.random() < 0.25:
            return self.atom()
        inner = self.expr(depth + 1)
        grow = self.rng.randrange(10)
        if grow == 0:
            operator = self.pick(["*", "+", "~", "%", "**", "//", "-"])
            return f"({inner} {operator} {self.expr(depth + 1)})"
        if grow in (1, 2):
            args = ", ".join(self.expr(depth + 2) for _ in range(self.rng.randrange(3)))
            return f"({inner}|{self.pick(FILTERS)}({args}))"
        if grow == 3:
            args = ", ".join(self.expr(depth + 2) for _ in range(self.rng.randrange(3)))
            return f"{inner}.{self.pick(METHODS)}({args})"
        if grow == 4:  # a part shared by reference, several times over
            return "[" + ", ".join([inner] * self.rng.choice([2, 10, 100])) + "]"
        if grow == 5:  # deep nesting
            levels = self.rng.choice([3, 3, 10, 30, 60, 400])
            return "[" * levels + inner + "]" * levels
        if grow == 6:
            return f"{inner}.{self.pick(UNSAFE)}"
        if grow == 7:
            return f"{{{inner}: {self.expr(depth + 1)}}}"
        if grow == 8:
            return f"{inner}[{self.pick(SUBSCRIPTS)}]"
        return f"({inner} if {self.expr(depth + 1)} else {self.expr(depth + 1)})"

    def statement(self, depth: int = 0) -> str:
        """A statement or output holding expressions; sometimes one that breaks the syntax."""
        kind = self.rng.randrange(14)
        body = self.statement(depth + 1) if depth < 2 and self.rng.random() < 0.5 else "x"
        if kind < 4:
            return "{{ " + self.expr() + " }}"
        if kind < 6:
            name, value = f"v{len(self.sets)}", self.expr()
            if depth == 0:  # set where every later statement sees it
                self.sets.append(name)
            return f"{{% set {name} = {value} %}}"
        if kind == 6:
            return f"{{% for i in {self.expr()} %}}{body}{{% endfor %}}"
        if kind == 7:
            return f"{{% if {self.expr()} %}}{body}{{% else %}}{{{{ {self.expr()} }}}}{{% endif %}}"
        if kind == 8:
            return (
                "{% macro f(n) %}{% if n %}{{ f(n - 1) }}{{ f(n - 1) }}{% endif %}{% endmacro %}"
                f"{{{{ f({self.pick(NUMBERS)}) }}}}"
            )
        if kind == 9:
            applied = self.pick(["upper", "center(99999)", "indent(9999)", "wordwrap(1)"])
            return f"{{% filter {applied} %}}{body}{{% endfilter %}}"
        if kind == 10:
            return self.pick([*BROKEN, "{% for x in [[1]] recursive %}{{ loop(x) }}{% endfor %}"])
        if kind == 11:
            return f"{{% block b{depth} %}}{body}{{% endblock %}}{{{{ self.b{depth}() }}}}"
        return "".join(chr(self.rng.choice([0x41, 0xDF, 0x202E, 0xFEFF, 0x1F600, 0x7F, 0x9]))
                       for _ in range(self.rng.randrange(1, 20)))  # fmt: skip


def mutated(seed: int) -> str:
    """One mutated template file's text."""
    rng = random.Random(seed)
    bases = sorted(SHIPPED.glob("*.toml"))
    source = SMALL if rng.random() < 0.3 or not bases else rng.choice(bases).read_text()
    table = tomllib.loads(source)
    section = rng.choice(["round0", "debate"])
    messages = table.setdefault(section, [{"role": "user", "content": "{{ question }}"}])
    message = rng.choice(messages)
    mutator = Mutator(seed, debate=section == "debate")
    spliced = "".join(mutator.statement() for _ in range(rng.randrange(1, 5)))
    content = message["content"]
    at = rng.choice([0, len(content)] * 3 + [rng.randrange(len(content) + 1)])  # in a tag, at times
    message["content"] = content[:at] + spliced + content[at:]
    text = _toml(table)
    return _break_toml(rng, text) if rng.random() < 0.15 else text


def _toml(table: dict[str, Any]) -> str:
    """A template's table as TOML: its keys, then [values], then its messages."""

    def value(v: Any) -> str:
        return json.dumps(v, ensure_ascii=False)  # a JSON string, list or bool is TOML too

    plain = [f"{k} = {value(v)}" for k, v in table.items() if not isinstance(v, (dict, list))]
    plain += [f"{k} = {value(v)}" for k, v in table.items() if k == "quote_tags"]
    tables = [
        f"[{k}]\n" + "".join(f"{name} = {value(v)}\n" for name, v in items.items())
        for k, items in table.items()
        if isinstance(items, dict)
    ]
    messages = [
        f"[[{k}]]\n" + "".join(f"{name} = {value(v)}\n" for name, v in item.items())
        for k, items in table.items()
        if isinstance(items, list) and k != "quote_tags"
        for item in items
    ]
    return "\n".join(["\n".join(plain), *tables, *messages]) + "\n"


def _break_toml(rng: random.Random, text: str) -> str:
    """The file's TOML damaged: cut short, a byte changed, a key's type or name changed."""
    kind = rng.randrange(5)
    if kind == 0:
        return text[: rng.randrange(len(text) + 1)]
    if kind == 1 and text:
        at = rng.randrange(len(text))
        return text[:at] + rng.choice(['"', "[", "]", "=", "\n", "\\", "\x00"]) + text[at + 1 :]
    if kind == 2:
        return text.replace('role = "user"', f'role = "{rng.choice(["", "tool", "USER"])}"', 1)
    if kind == 3:
        return rng.choice(["history = 3\n", "quote_tags = ['<x>']\n", 'base = "debate"\n',
                           "values = 1\n", 'unknown = "x"\n', "[[round0]]\n"]) + text  # fmt: skip
    return text + "\n[values]\n" + "\n".join(f"k{i} = {'[' * i}{']' * i}" for i in range(40))


def mutated_templates(seed: int, count: int) -> Iterator[str]:
    """`count` mutated template files' texts, the same ones for the same seed."""
    for i in range(count):
        yield mutated(seed * 1_000_003 + i)
