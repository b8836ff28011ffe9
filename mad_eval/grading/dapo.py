"""verl's DAPO reward (`verl/utils/reward_score/math_dapo.py`, `compute_score`), reproduced:
which answer it reads and when it calls it right, so `--answer-protocol dapo` gives the
numbers verl computes for AMC and AIME.

Its rule, as measured on conformance/dapo's cases: the reply's last 300 characters; in them
the last `Answer` `:` (any case, whitespace, newlines included, around the colon) and the
rest of that line; that text and the gold both reduced by the same string rewrites; right
when the two strings are equal. The rewrites are written here in our own code; the strings
they replace are verl's, in verl's order, since the behaviour is the string table.

Model text is hostile input: every step is a bounded string operation on at most 300
characters of reply (a gold may be longer, but comes from the benchmark).
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable

WINDOW = 300
"""verl reads only the reply's last 300 characters."""

# "answer", then a colon with any whitespace (newlines too) around it, then the rest of the
# line; the last such match in the window is the answer.
_CUE = re.compile(r"answer\s*:\s*([^\n]+)", re.IGNORECASE)

# The rewrites, each applied to the whole text in this order: a pair replaces its first
# string by its second; a lone string is deleted.
_REWRITES: tuple[tuple[str, str], ...] = (
    ("an ", ""),
    ("a ", ""),
    (".$", "$"),
    ("\\$", ""),
    ("\\ ", ""),
    (" ", ""),
    ("mbox", "text"),
    (",\\text{and}", ","),
    ("\\text{and}", ","),
    ("\\text{m}", "\\text{}"),
)
_DELETED: tuple[str, ...] = (
    "square",
    "ways",
    "integers",
    "dollars",
    "mph",
    "inches",
    "hours",
    "km",
    "units",
    "\\ldots",
    "sue",
    "points",
    "feet",
    "minutes",
    "digits",
    "cents",
    "degrees",
    "cm",
    "gm",
    "pounds",
    "meters",
    "meals",
    "edges",
    "students",
    "childrentickets",
    "multiples",
    "\\text{s}",
    "\\text{.}",
    "\\text{\ns}",
    "\\text{}^2",
    "\\text{}^3",
    "\\text{\n}",
    "\\text{}",
    "\\mathrm{th}",
    "^\\circ",
    "^{\\circ}",
    "\\;",
    ",\\!",
    "{,}",
    '"',
    "\\dots",
)
# Wrappers opened to their content up to the first closing brace on the same line.
_OPENED = ("\\text{", "\\textbf{", "\\overline{")


def _per_line(text: str, change: Callable[[str], str]) -> str:
    """`change` applied to each line on its own (these rewrites never cross a newline)."""
    return "\n".join(change(line) for line in text.split("\n"))


def _first_math(line: str) -> str:
    """A line holding two `$` or more keeps only `$...$` between its first two."""
    first = line.find("$")
    second = line.find("$", first + 1) if first >= 0 else -1
    return line if second < 0 else "$" + line[first + 1 : second] + "$"


def _open(opener: str) -> Callable[[str], str]:
    """Each `opener` ... `}` (the first `}` after it) replaced by what it encloses, left to
    right, without looking at the text a replacement makes."""

    def change(line: str) -> str:
        out, at = [], 0
        while (start := line.find(opener, at)) >= 0:
            end = line.find("}", start + len(opener))
            if end < 0:
                break
            out += [line[at:start], line[start + len(opener) : end]]
            at = end + 1
        return "".join(out) + line[at:]

    return change


def _unbox(line: str) -> str:
    """The first `\\boxed{` of a line and the line's last `}` after it taken away."""
    start = line.find("\\boxed{")
    end = line.rfind("}")
    if start < 0 or end < start + len("\\boxed{"):
        return line
    return line[:start] + line[start + len("\\boxed{") : end] + line[end + 1 :]


def _braced(text: str, word: str, arguments: int) -> str:
    """`frac` followed by two characters (the first not `{`, the second not a newline)
    written `frac{x}{y}`; `sqrt` followed by one that is not `{` written `sqrt{x}`."""
    out, at, look = [], 0, 0
    width = len(word) + arguments
    while (start := text.find(word, look)) >= 0:
        taken = text[start + len(word) : start + width]
        if len(taken) == arguments and taken[0] != "{" and (arguments == 1 or taken[1] != "\n"):
            out += [text[at:start], word, *("{" + c + "}" for c in taken)]
            at = look = start + width
        else:
            look = start + 1
    return "".join(out) + text[at:]


def normalise(answer: str) -> str:
    """An answer (or a gold) as verl's DAPO reward reduces it before comparing."""
    text = answer.split("=")[-1]
    for before, after in _REWRITES:
        text = text.replace(before, after)
    for gone in _DELETED:
        text = text.replace(gone, "")
    text = _per_line(text, _first_math)
    for opener in _OPENED:
        text = _per_line(text, _open(opener))
    text = _per_line(text, _unbox)
    text = _braced(_braced(text, "frac", 2), "sqrt", 1).replace("$", "")
    if text.replace(",", "").isdigit():
        text = text.replace(",", "")
    return text.strip()


def read(reply: str) -> str | None:
    """The normalised answer verl reads in a reply (its `pred`, "" where nothing is left of
    it, which verl votes on like any other); None where it reads none (verl's "[INVALID]")."""
    last = deque(_CUE.finditer(reply[-WINDOW:]), maxlen=1)
    return normalise(last[0].group(1)) if last else None


def correct(reply: str, gold: str) -> bool:
    """Whether verl's DAPO reward scores the reply right (its `acc`) against this gold."""
    answer = read(reply)
    return answer is not None and answer == normalise(gold)
