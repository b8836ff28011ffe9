"""Debate-or-Vote's math reader (Choi et al., 2025; its evaluator at commit 8efe803), in our own
words: the last `{final answer: N}` holding one plain number, else the last `\\boxed{...}`'s text
up to its first closing brace, read as a float and rounded to one decimal.

Its rules, as the conformance cases in conformance/debate_or_vote/ record them:
- a braces group may sit behind one backslash, spell the key `final answer` or `final_answer`
  in any case (quoted or not), and hold a sign, digits and one decimal point, spaced freely;
- with no such group, the last box counts: any number of backslashes, then `boxed`, then the
  text up to the first `}` after its `{` (so `\\frac{1}{2}` reads `\\frac{1`, which is no
  number); backslashes and braces are dropped, `final answer:` removed, and what is left must
  be a number as Python's float() reads one (`1e3`, `1_000`, `inf` included);
- the value is rounded half to even at one decimal, as numpy's round does.

Every scan here is linear in the reply: a quadratic regex of the reference (a long digit run,
or a box opened and never closed) costs one pass.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal

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


def read_value(reply: str) -> float | None:
    """The value Debate-or-Vote's math reader reads from `reply`, rounded to one decimal;
    None where it reads none (its empty answer)."""
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


def as_text(value: float) -> str | None:
    """A rounded value as plain decimal text (no exponent), which every kind reads back to
    the same number; None for infinity or NaN, which no gold is."""
    if not math.isfinite(value):
        return None
    text = repr(value)
    return format(Decimal(text), "f") if "e" in text or "E" in text else text


def dov_math(reply: str) -> tuple[str | None, bool]:
    """The dov-math answer protocol's search: the value as decimal text (never timed out)."""
    value = read_value(reply)
    return (None if value is None else as_text(value)), False
