"""The math kind: a LaTeX answer (MATH500, AIME, AMC), compared with math-verify."""

from __future__ import annotations

import functools
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

from mad_eval.grading.answers import MAX_ANSWER_CHARS, last_group
from mad_eval.grading.kinds import Grade, Kind, stable_int
from mad_eval.grading.verifier import verify
from mad_eval.grading.verify_worker import Comparison
from mad_eval.records import Question

_INTEGER = re.compile(r"[+-]?(?:\d+|\d{1,3}(?:,\d{3})+)")
# A plain rational as math-verify reads it exactly (no decimal point, no percent, no comma):
# an integer, a fraction of two integers in braces, or a/b.
_RATIONAL = re.compile(
    r"(?P<sign>-?)(?:(?P<int>\d+)|\\[dt]?frac\{(?P<num>-?\d+)\}\{(?P<den>-?\d+)\}"
    r"|(?P<n>\d+)/(?P<d>\d+))"
)
_DIGITS = 30  # past this many digits in a part, math-verify decides (sympy's parse, not ours)


def clean_math(found: str | None) -> str | None:
    """A found answer without the wrappers a model adds: a trailing period, `$`, and boxes
    around the whole (`\\boxed{\\boxed{x}}` and `$\\boxed{x}$.` both mean x)."""
    answer = found
    while answer is not None and len(answer) <= MAX_ANSWER_CHARS:
        answer = answer.strip().removesuffix(".").strip().strip("$").strip()
        box = last_group(answer)
        if not box or box[0] != 0 or box[2] != len(answer) - 1:
            break
        answer = answer[box[1] : box[2]]
    if not answer or len(answer) > MAX_ANSWER_CHARS:
        return None
    return answer


def _integer_key(s: str) -> str | None:
    """Canonical digits of a plain integer ("+025", "1,000"), so equal ints compare equal."""
    if not _INTEGER.fullmatch(s):
        return None
    digits = s.lstrip("+-").replace(",", "").lstrip("0") or "0"
    return digits if s[0] != "-" or digits == "0" else "-" + digits


def rational(s: str) -> Fraction | None:
    """The value of a plain rational ("-3", "\\frac{1}{2}", "\\dfrac{-4}{6}", "7/8"), exact;
    None for anything else (a decimal, a percent, a zero denominator, huge parts)."""
    found = _RATIONAL.fullmatch(s)
    if found is None or len(s) > 4 * _DIGITS:
        return None
    parts = found.group("int", "num", "den", "n", "d")
    if any(part is not None and len(part.lstrip("-")) > _DIGITS for part in parts):
        return None
    whole, num, den, n, d = parts
    if whole is not None:
        value = Fraction(int(whole))
    else:
        top, bottom = int(num if num is not None else n), int(den if den is not None else d)
        if bottom == 0:
            return None
        value = Fraction(top, bottom)
    return -value if found["sign"] else value


def quick_compare(answer: str, gold: str) -> bool | None:
    """Whether answer means gold where the text alone decides (the same text, two integers,
    two plain rationals, no answer to compare); None where math-verify must. Two rationals
    compare exactly, as math-verify compares numbers with no decimal point in them
    (conformance/quick_compare holds its verdicts on thousands of such pairs)."""
    if answer == gold and answer.strip():
        return True
    a, g = " ".join(answer.split()), " ".join(gold.split())
    if a == g:
        return True
    a_int, g_int = _integer_key(a), _integer_key(g)
    if a_int is not None and g_int is not None:
        return a_int == g_int
    if not a or len(a) > MAX_ANSWER_CHARS:
        return False
    a_value, g_value = rational(a), rational(g)
    if a_value is not None and g_value is not None:
        return a_value == g_value
    return None


def compare_math(answer: str, gold: str) -> Comparison:
    """Whether answer means gold, and whether math-verify ran out of time deciding: cheap
    checks on the text first, then math-verify (whose verdicts are kept: grading.verdicts)."""
    quick = quick_compare(answer, gold)
    if quick is not None:
        return Comparison(quick, False)
    return verify(" ".join(answer.split()), " ".join(gold.split()))


def equivalent(answer: str, gold: str) -> bool:
    """Whether answer means gold (a timed-out comparison counts as not); compare_math's
    cache serves both."""
    return compare_math(answer, gold).equal


@functools.lru_cache(maxsize=1024)
def numbers_near(question_id: str, gold: str, k: int) -> tuple[str, ...]:
    """The gold answer, then k-1 distinct wrong answers derived deterministically from the id."""
    rng = random.Random(stable_int(question_id))
    gold = gold.strip()
    try:
        base = int(gold)
    except ValueError:
        base = rng.randrange(10, 1000)
    wrong: list[str] = []
    spread = 9
    while len(wrong) < k - 1:
        guess = str(base + rng.choice((-1, 1)) * rng.randint(1, spread))
        spread += 3  # widen slowly so small golds still find enough distinct neighbours
        if guess not in wrong and not equivalent(guess, gold):
            wrong.append(guess)
    return (gold, *wrong)


@dataclass(frozen=True)
class MathKind(Kind):
    """LaTeX answers: read as written, equal when math-verify says they mean the same."""

    def read(self, found: str | None, text: str | None, options: Sequence[str]) -> str | None:
        return clean_math(found)

    def same(self, a: str, b: str) -> bool:
        return equivalent(a, b)

    def decide(self, answer: str, gold: str) -> bool | None:
        return quick_compare(answer, gold)

    def grade(self, answer: str | None, gold: str) -> Grade:
        if answer is None:
            return Grade(None, False)
        comparison = compare_math(answer, gold)
        return Grade(answer, comparison.equal, timed_out=comparison.timed_out)

    def candidates(self, question: Question, k: int) -> tuple[str, ...]:
        return numbers_near(question.id, question.gold, k)


MATH = MathKind(
    "math",
    "your final answer",
    answers=(
        "boxed",
        "answer-line",
        "dapo",
        "math-verify",
        "braces",
        "dov-math",
        "dov-math-fork",
        "debate-answer",
    ),
)
