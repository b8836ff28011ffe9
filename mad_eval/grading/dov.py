"""Debate-or-Vote's math readers (Choi et al., 2025), in our own words: a value read as a float
and rounded to one decimal, None where the reader reads none.

`dov-math` is the paper's own reader (github.com/deeplearning-wisc/debate-or-vote at 82c929e,
the code the paper cites), as the cases in conformance/debate_or_vote/ record it:
- the answer is the last `{...}` group, groups found left to right, each from a `{` to the
  first `}` after it on the same line (so `{final answer: 8} (since 2^{3} = 8)` reads 3, and
  `{final answer: {8}}` reads `final answer: {8`, which is no number);
- every `final answer:` in it (exactly so written) is removed, and what is left must be a
  number as Python's float() reads one (spacing around it, `1e3`, `1_000`, `inf` included);
- the value is rounded half to even at one decimal, as numpy's round does.

`dov-math-fork` is the reader of a later fork (github.com/dreaming-madao/debate-or-vote at
8efe803, whose commits of 2026 rewrite it), as conformance/debate_or_vote_fork/ records it:
- the last `{final answer: N}` holding one plain number: the group may sit behind one
  backslash, spell the key `final answer` or `final_answer` in any case (quoted or not), and
  hold a sign, digits and one decimal point, spaced freely;
- with no such group, the last box counts: any number of backslashes, then `boxed`, then the
  text up to the first `}` after its `{` (so `\\frac{1}{2}` reads `\\frac{1`, which is no
  number); backslashes and braces are dropped, `final answer:` removed, and what is left must
  be a number as float() reads one;
- rounded as the paper's.

Every scan here is linear in the reply: a quadratic regex of the references (a long digit
run, a line of `{` never closed, a box opened and never closed) costs one pass.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal


def _float(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def round_one(value: float) -> float:
    """`value` rounded to one decimal as numpy's round does it: times ten, to the nearest
    integer (halves to even), divided by ten, so a huge value overflows to infinity too."""
    scaled = value * 10.0
    if math.isfinite(scaled) and abs(scaled) < 2.0**52:
        scaled = math.copysign(float(round(scaled)), scaled)
    return scaled / 10.0


def as_text(value: float) -> str | None:
    """A rounded value as plain decimal text (no exponent), which every kind reads back to
    the same number; None for infinity or NaN, which no gold is."""
    if not math.isfinite(value):
        return None
    text = repr(value)
    return format(Decimal(text), "f") if "e" in text or "E" in text else text


# ---- the paper's reader (82c929e) ------------------------------------------------------


def _last_group(text: str) -> str | None:
    """The text of the paper's last `{...}` group: groups are found left to right, each from
    a `{` to the first `}` after it on its line; a `{` whose line has no `}` after it opens
    none, and neither does any later `{` of that line."""
    found, at, line_end = None, 0, -1
    while (opener := text.find("{", at)) >= 0:
        if opener > line_end:
            line_end = text.find("\n", opener)
            line_end = len(text) if line_end < 0 else line_end
        close = text.find("}", opener + 1, line_end)
        if close < 0:
            at = line_end + 1
            continue
        found, at = text[opener + 1 : close], close + 1
    return found


def read_value(reply: str) -> float | None:
    """The value the paper's math reader reads from `reply`, rounded to one decimal; None
    where it reads none (its empty answer)."""
    group = _last_group(reply)
    if group is None:
        return None
    value = _float(group.replace("final answer:", "").strip())
    return None if value is None else round_one(value)


# ---- the fork's reader (8efe803) -------------------------------------------------------

# What follows a "{" in a braces group, up to the number: spacing, a quote, the key.
_KEY = re.compile(r"""\s*['"]?final[_ ]answer['"]?\s*:\s*""", re.IGNORECASE)
# What follows "boxed" in a box opener (after at least one backslash): spacing, then "{".
_OPEN = re.compile(r"\s*\{")
_SPACE = re.compile(r"\s*")
_DIGITS = re.compile(r"\d*")


def _number_at(text: str, at: int) -> tuple[str, int] | None:
    """The number starting at `at` (a sign, digits, at most one point with digits after it)
    and where it ends; None when there is none."""
    start = at
    if at < len(text) and text[at] in "+-":
        at += 1
    whole = _DIGITS.match(text, at).end()  # type: ignore[union-attr]
    end = whole
    if whole < len(text) and text[whole] == ".":
        end = _DIGITS.match(text, whole + 1).end()  # type: ignore[union-attr]
        if end == whole + 1:  # a point with no digit after it ends no number
            return None
    elif whole == at:
        return None
    return text[start:end], end


def _braces_value(text: str) -> str | None:
    """The number of the last `{final answer: N}` group, as written; None if there is none."""
    at = text.rfind("{")
    while at >= 0:
        key = _KEY.match(text, at + 1)
        if key is not None and (found := _number_at(text, key.end())) is not None:
            number, end = found
            end = _SPACE.match(text, end).end()  # type: ignore[union-attr]
            if text.startswith("}", end) or text.startswith("\\}", end):
                return number
        at = text.rfind("{", 0, at)
    return None


def _box_text(text: str) -> str | None:
    """The text of the last box: from its "{" to the first "}" after it, spacing at both
    ends dropped; a box never closed counts for nothing, and a box inside the text of an
    earlier one is not a box of its own (the reference's scan resumes after each "}")."""
    found, at = None, 0
    while (name := text.find("boxed", at)) >= 0:
        opener = _OPEN.match(text, name + len("boxed"))
        if name - 1 < at or text[name - 1] != "\\" or opener is None:
            at = name + 1
            continue
        close = text.find("}", opener.end())
        if close < 0:
            break  # no box after this one can close either
        found, at = text[opener.end() : close].strip(), close + 1
    return found


def read_fork_value(reply: str) -> float | None:
    """The value the fork's math reader reads from `reply`, rounded to one decimal; None
    where it reads none (its empty answer)."""
    number = _braces_value(reply)
    if number is None:
        box = _box_text(reply)
        if box is None:
            return None
        number = box.replace("\\", "").replace("{", "").replace("}", "").strip()
        if "final answer:" in number:
            number = number.replace("final answer:", "").strip()
    value = _float(number)
    return None if value is None else round_one(value)


# ---- the answer protocols' searches ---------------------------------------------------


def _found(value: float | None) -> tuple[str | None, bool]:
    return (None if value is None else as_text(value)), False


def dov_math(reply: str) -> tuple[str | None, bool]:
    """The dov-math answer protocol's search: the value as decimal text (never timed out)."""
    return _found(read_value(reply))


def dov_math_fork(reply: str) -> tuple[str | None, bool]:
    """The dov-math-fork answer protocol's search, as dov_math's."""
    return _found(read_fork_value(reply))
