"""Grading's shortcuts against Math-Verify, on every stored pair of conformance/quick_compare
(Math-Verify's own verdicts kept as data): quick_compare either leaves a pair to math-verify or
gives its verdict, so deciding without a worker changes none; and the worker, which spares
sympy's simplifying where two constants are numerically apart, gives its verdict on each."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from mad_eval.grading.kinds.math import _integer_key, quick_compare, rational
from mad_eval.grading.verify_worker import _math_verify

FOLDER = Path(__file__).resolve().parent.parent / "conformance" / "quick_compare"
CASES = [json.loads(line) for line in (FOLDER / "cases.jsonl").open(encoding="utf-8")]


def _rule(answer: str, gold: str) -> str:
    if answer == gold:
        return "text"
    if _integer_key(answer) is not None and _integer_key(gold) is not None:
        return "integers"
    return "rationals"


def test_the_suite_is_large_and_names_its_reference() -> None:
    meta = json.loads((FOLDER / "meta.json").read_text())
    assert len(CASES) == meta["cases"] >= 8000
    assert set(meta["packages"]) == {"math-verify", "latex2sympy2_extended", "sympy"}
    equal = sum(case["math_verify"] for case in CASES)
    assert equal == meta["equal"] and 1500 < equal < len(CASES) - 1500


def test_every_cheap_decision_is_math_verifys() -> None:
    decided: Counter[str] = Counter()
    differ = []
    for case in CASES:
        verdict = quick_compare(case["answer"], case["gold"])
        if verdict is None:
            continue
        decided[_rule(case["answer"], case["gold"])] += 1
        if verdict != case["math_verify"]:
            differ.append(case)
    assert not differ, f"{len(differ)} cheap verdicts differ from math-verify, e.g. {differ[:3]}"
    # Each rule decides many pairs (both ways), and many are left to math-verify.
    assert decided["rationals"] >= 1500 and decided["integers"] >= 500
    assert len(CASES) - sum(decided.values()) >= 1000


def test_rationals_are_read_exactly_or_not_at_all() -> None:
    assert rational(r"\dfrac{-4}{6}") == rational("-2/3") == rational(r"-\tfrac{2}{3}")
    for lookalike in ("0.5", r"50\%", "1,000", r"\frac12", r"\frac {1}{2}", r"\frac{1}{0}", "+3"):
        assert rational(lookalike) is None, lookalike
    assert rational("1" * 31) is None  # a part this long is left to math-verify


@pytest.mark.slow
def test_the_workers_comparison_gives_math_verifys_verdict_on_every_pair(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The worker skips sympy's simplifying where two constants are numerically apart: on
    every stored pair (8,000 and more, golds and answers of real benchmarks among them) its
    verdict is still Math-Verify's own."""
    grader = pytest.importorskip("math_verify.grader")
    monkeypatch.setattr(grader, "sympy_symbolic_eq", grader.sympy_symbolic_eq)  # restored after
    compare, _ = _math_verify()
    differ = [c for c in CASES if compare(c["answer"], c["gold"]) != (c["math_verify"], False)]
    assert not differ, f"{len(differ)} verdicts differ from math-verify, e.g. {differ[:3]}"
    assert sum(c["id"].startswith("expressions-") for c in CASES) >= 4000
