"""Grading's cheap decisions against Math-Verify: on every stored pair of plain numbers
(conformance/quick_compare, Math-Verify's verdicts kept as data), quick_compare either leaves
the pair to math-verify or gives its verdict, so deciding without a worker changes none."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from mad_eval.grading.kinds.math import _integer_key, quick_compare, rational

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
    assert len(CASES) == meta["cases"] >= 4000
    assert set(meta["packages"]) == {"math-verify", "latex2sympy2_extended", "sympy"}
    equal = sum(case["math_verify"] for case in CASES)
    assert equal == meta["equal"] and 1000 < equal < len(CASES) - 1000


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
