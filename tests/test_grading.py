"""Tests for answer extraction and equivalence, including hostile model text."""

import json
import re
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from mad_eval.grading import grader as grading
from mad_eval.grading import verifier
from mad_eval.grading.grader import Grade, equivalent, extract_answer, grade
from mad_eval.grading.verdicts import VERDICTS


def _rows(path: Path) -> list[dict]:
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f]


@pytest.fixture(scope="module")
def math500(shared_data: Path) -> list[dict]:
    return _rows(shared_data / "math500.jsonl")


# ---- benchmark golds -------------------------------------------------------------------------


def test_math500_gold_solutions_grade_correct(math500: list[dict]) -> None:
    assert len(math500) == 500
    wrong = [
        r["id"]
        for r in math500
        if grade(r["solution"], r["answer"], "math") != Grade(r["answer"].strip(), True)
    ]
    assert wrong == []


def _restyle(latex: str) -> str:
    """The gold as a model might also write it: no sizing or spacing macros, \\dfrac, $..$."""
    for old, new in [
        (r"\left", ""),
        (r"\right", ""),
        (r"\!", ""),
        (r"\,", ""),
        (r"\dfrac", r"\frac"),
    ]:
        latex = latex.replace(old, new)
    return "$" + re.sub(r"\s+", "", latex) + "$"  # never string-equal, so math-verify decides


@pytest.mark.slow
def test_math500_golds_match_restyled_golds_via_math_verify(math500: list[dict]) -> None:
    wrong = [
        (r["id"], r["answer"])
        for r in math500
        if not equivalent(_restyle(r["answer"]), r["answer"])
    ]
    assert wrong == []


@pytest.mark.slow
def test_math500_neighbouring_golds_differ(math500: list[dict]) -> None:
    """Guards against a wrapping that makes math-verify accept anything."""
    accepted = [
        r["id"]
        for r, other in zip(math500, math500[1:] + math500[:1], strict=True)
        if r["answer"].strip() != other["answer"].strip()
        and equivalent(other["answer"], r["answer"])
    ]
    assert accepted == ["math500-22"]  # gold 5 vs answer "x=5": math-verify reads the assignment


def test_aime24_zero_padded_golds(shared_data: Path) -> None:
    rows = _rows(shared_data / "aime24.jsonl")
    padded = [r["answer"] for r in rows if r["answer"].startswith("0")]
    assert len(padded) == 7
    for gold in (r["answer"] for r in rows):
        assert grade(f"so the total is $\\boxed{{{int(gold)}}}$.", gold, "math") == Grade(
            str(int(gold)), True
        )
    assert equivalent("25", "025") and equivalent("025", "25")
    assert not equivalent("26", "025")


# ---- extraction -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (r"so $x = \boxed{\frac{1}{2}}$", r"\frac{1}{2}"),
        (r"first \boxed{3}, then on reflection \boxed{4}", "4"),
        (r"\fbox{8}", "8"),
        (r"\boxed {7}", "7"),
        (r"\framebox{204} minutes", "204"),
        (r"\boxed{\{1, 2\}}", r"\{1, 2\}"),
        (r"$\boxed{\boxed{5}}$", "5"),
        (r"\boxed{ $12$. }", "12"),
        (r"\boxed{\text{(C)}}", r"\text{(C)}"),
        (r"\boxed{3} but the answer is 4", "3"),  # a box beats every textual cue
        ("The final answer is $\\frac{1}{2}$.", r"\frac{1}{2}"),
        ("So the answer is 42. Next, we check.", "42"),
        ("the answer is 3, no wait, the answer is 4.", "4"),
        ("The final answer is 5. Someone said the answer is 6", "6"),  # the last cue wins
        ("...the answer is 5, but that is wrong.\nAnswer: 7", "7"),  # whatever its type
        ("**Answer:** 7", "7"),
        ("Answer: $x=3$\nsome more text", "x=3"),
        ("Answer: 3.5.", "3.5"),
        (r"\boxed{}", None),
        (r"\boxed{ $ $ }", None),
        ("Answer:", None),
        ("I computed 17 and 42 along the way.", None),  # no guessing from the last number
        (r"\boxed{unclosed", None),
        ("\\boxed{" + "x" * (grading.MAX_ANSWER_CHARS + 1) + "}", None),
    ],
)
def test_extract_answer(text: str, expected: str | None) -> None:
    assert extract_answer(text) == expected


@pytest.mark.parametrize("text", [None, "", "   "])
def test_grade_empty_text_is_unparsed(text: str | None) -> None:
    assert grade(text, "1", "math") == Grade(None, False)


# ---- equivalence ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("answer", "gold"),
    [
        ("1,000", "1000"),
        ("+7", "7"),
        ("-0", "0"),
        (r"\dfrac{14}{3}", r"\frac{14}{3}"),
        ("4.666667", r"\frac{14}{3}"),
        (r"(3, \pi/2)", r"\left( 3, \frac{\pi}{2} \right)"),
        ("-q+p", "p - q"),
        ("C", r"\text{(C)}"),
        ("0.5", r"\frac12"),
        (r"90^\circ", "90"),
    ],
)
def test_equivalent_answers(answer: str, gold: str) -> None:
    assert equivalent(answer, gold)


@pytest.mark.parametrize(
    ("answer", "gold"),
    [
        ("24", "25"),
        ("-25", "25"),
        ("4.67", r"\frac{14}{3}"),
        ("q - p", "p - q"),
        ("D", r"\text{(C)}"),
        (r"(3, \pi)", r"\left( 3, \frac{\pi}{2} \right)"),
        ("x", "y"),
        ("", "1"),
        ("x" * (grading.MAX_ANSWER_CHARS + 1), "1"),
    ],
)
def test_non_equivalent_answers(answer: str, gold: str) -> None:
    assert not equivalent(answer, gold)


# ---- hostile text -----------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize(
    "text",
    [
        "{" * 1_000_000,
        "}" * 1_000_000,
        "\\" * 1_000_000,
        "\\boxed{" * 100_000,
        "\\boxed{" * 100_000 + "1" + "}" * 100_000,
        "\\boxed" + " " * 1_000_000,
        "the answer is " * 100_000,
    ],
    ids=[
        "open-braces",
        "close-braces",
        "backslashes",
        "unclosed-boxes",
        "nested-boxes",
        "spaces",
        "cues",
    ],
)
def test_hostile_text_is_linear(text: str) -> None:
    start = time.monotonic()
    assert grade(text, "1", "math") == Grade(None, False)
    # Generous: quadratic work on this text would take hours, load slows linear work only
    # by a factor.
    assert time.monotonic() - start < 60


@pytest.mark.slow
def test_pathological_expression_is_cut_off(monkeypatch: pytest.MonkeyPatch) -> None:
    """The parent's bound holds even when sympy would not stop by itself; the pool recovers."""
    monkeypatch.setattr(verifier, "VERIFY_TIMEOUT_S", 2.0)
    VERDICTS.forget()
    grade(r"\boxed{2}", r"\sqrt{4}", "math")  # start the worker outside the timed part
    before = set(verifier.grader_pids())
    tower = "9^{9^{9^{9^{9^{9}}}}}"
    assert grade(rf"\boxed{{{tower}}}", "1", "math") == Grade(tower, False, timed_out=True)
    # Its worker killed: the parent's bound ended the call, not math-verify's own alarm
    # (which leaves the worker running); no clock decides.
    killed = before - set(verifier.grader_pids())
    assert killed and not [pid for pid in killed if Path(f"/proc/{pid}").exists()]
    assert grade(r"\boxed{\frac{1}{2}}", "0.5", "math").correct  # a fresh worker takes over


def test_concurrent_grading_matches_serial() -> None:
    cases = [
        (r"\boxed{\frac{2}{4}}", "0.5"),
        (r"\boxed{\sqrt{2}/2}", r"\frac{\sqrt{2}}{2}"),
        (r"\boxed{(1,2)}", "(1, 2)"),
        (r"\boxed{x^2+2x+1}", "(x+1)^2"),
        (r"\boxed{x^2+2x}", "(x+1)^2"),
        (r"\boxed{025}", "25"),
        ("the answer is 3", "4"),
        ("no answer here", "4"),
        (r"\boxed{\pi}", "3.14159"),
        (r"\boxed{[1, 3)}", r"[1,3)"),
    ] * 4
    VERDICTS.forget()
    with ThreadPoolExecutor(8) as pool:
        concurrent = list(pool.map(lambda c: grade(*c, "math"), cases))
    VERDICTS.forget()
    assert concurrent == [grade(*c, "math") for c in cases]


def test_grade_inline_grades_what_needs_no_worker_and_declines_the_rest():
    from mad_eval.grading.grader import INLINE_CHARS, grade_inline

    assert grade_inline("so \\boxed{3}", "3", "math") == grade("so \\boxed{3}", "3", "math")
    assert grade_inline("so \\boxed{+003}", "3", "math").correct  # equal integers
    assert grade_inline("The answer is (B)", "B", "choice", ["x", "y"]).correct
    assert grade_inline("no answer here", "3", "math") == grade("no answer here", "3", "math")
    # math-verify's work, a long reply and a summary's ROUGE go to a thread instead.
    assert grade_inline("so \\boxed{\\frac{1}{2}}", "0.5", "math") is None
    assert grade_inline("so \\boxed{3}", "3", "math", answer="math-verify") is None
    assert grade_inline("x" * INLINE_CHARS + " \\boxed{3}", "3", "math") is None
    assert grade_inline("Summary: a cat sat.", "A cat sat.", "summary") is None
    # Declining leaves nothing behind: the same comparison in a thread asks math-verify.
    assert grade("so \\boxed{\\frac{1}{2}}", "0.5", "math").correct
