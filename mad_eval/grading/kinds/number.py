"""The number kind (GSM8K): one number, compared exactly as a fraction."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from mad_eval.grading.answers import MAX_ANSWER_CHARS
from mad_eval.grading.kinds import Kind, RowReader
from mad_eval.grading.kinds.math import numbers_near
from mad_eval.records import Question

# A number as written: thousands separators, a decimal part, a fraction "a/b"; digits glued to
# a letter or a dot ("x2", "v1.2") are not numbers of their own.
_NUMBER = re.compile(
    r"(?<![\w.])[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:/\d+)?(?![\w.]\d)|(?<![\w.])[-+]?\.\d+"
)
_LATEX_FRACTION = re.compile(r"\\[dt]?frac\s*\{\s*(\d+)\s*\}\s*\{\s*(\d+)\s*\}")


def number_key(text: str) -> str | None:
    """The one number `text` states, exactly ("1,080.00 dollars" -> "1080", "0.75" -> "3/4");
    None when it states none or several different ones: picking one would be a guess."""
    text = _LATEX_FRACTION.sub(r"\1/\2", text.replace("\u2212", "-").replace("{,}", ","))
    values = set()
    for match in _NUMBER.findall(text):
        numerator, _, denominator = match.replace(",", "").partition("/")
        if denominator and int(denominator) == 0:
            return None
        values.add(Fraction(numerator) / Fraction(denominator or 1))
    return str(values.pop()) if len(values) == 1 else None


def gsm8k_tail(text: str) -> str | None:
    """The text after the last `####`, GSM8K's own answer marker, up to the line's end."""
    _, marker, tail = text.rpartition("####")
    return tail.split("\n", 1)[0].strip() if marker else None


def number_gold(raw: str) -> str | None:
    """A GSM8K gold answer (the worked solution, then `#### 72`) as its number's key."""
    tail = gsm8k_tail(raw)
    return number_key(raw if tail is None else tail)


@dataclass(frozen=True)
class NumberKind(Kind):
    """One number: the found text's only number, else (boxed) the number after `####`."""

    def read(self, found: str | None, text: str | None, options: Sequence[str]) -> str | None:
        if found is None and text is not None:
            found = gsm8k_tail(text)
        if not found or len(found) > MAX_ANSWER_CHARS:
            return None
        return number_key(found)

    def gold(self, raw: str, options: Sequence[str]) -> str | None:
        return number_gold(raw)

    def question(self, row: RowReader) -> tuple[str, str, dict[str, Any]]:
        """The gold is the number the answer ends in; the whole answer (GSM8K's worked
        solution) is recorded beside it."""
        text, raw, _ = super().question(row)
        gold = number_gold(raw)
        if gold is None:
            row.fail(f"answer {raw!r} does not end in one number")
        return text, gold, {"answer_text": raw}

    def candidates(self, question: Question, k: int) -> tuple[str, ...]:
        return numbers_near(question.id, question.gold, k)


NUMBER = NumberKind(
    "number",
    "your final answer as a single number",
    answers=("boxed", "answer-line", "braces", "dov-math", "dov-math-fork", "debate-answer"),
)
