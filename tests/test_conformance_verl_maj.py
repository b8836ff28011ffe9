"""mad-eval's maj@K against verl's own process_validation_metrics, on the stored facts of
conformance/verl_maj (K answers per question and verl's maj@K/mean and /std for them; no
verl installed here): equal to the last digit, per question and for whole datasets as
metrics.json reports them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from factories import compute_metrics, turn

from mad_eval.measure.scoring import Scoring
from mad_eval.voting.maj_at_k import bootstrap_maj, bootstrap_maj_std

FOLDER = Path(__file__).resolve().parent.parent / "conformance" / "verl_maj"


def _cases() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    with open(FOLDER / "cases.jsonl", encoding="utf-8") as lines:
        found = [json.loads(line) for line in lines if line.strip()]
    return [c for c in found if "answers" in c], [c for c in found if "questions" in c]


QUESTIONS, SETS = _cases()


def _turns(question: str, answers: list[str | None], correct: list[bool]) -> list:
    pairs = enumerate(zip(answers, correct, strict=True))
    return [turn(question, 0, i, a, c) for i, (a, c) in pairs]


def test_the_suite_is_large_and_pinned() -> None:
    meta = json.loads((FOLDER / "meta.json").read_text())
    assert (len(QUESTIONS), len(SETS)) == (meta["cases"], meta["sets"])
    assert len(QUESTIONS) >= 2000 and len(meta["commit"]) == 40
    assert {c["k"] for c in QUESTIONS} >= {2, 3, 4, 8, 16, 32, 64}
    # Ties, unanimity and unparsed answers all occur, and the estimate is not the plain vote.
    assert any(None in c["answers"] for c in QUESTIONS)
    # An answer written as verl's "[INVALID]" next to no answer: one answer to verl.
    both = [c for c in QUESTIONS if None in c["answers"] and "[INVALID]" in c["answers"]]
    assert len(both) >= 100
    assert {"answers": [None, "[INVALID]", "g"], "mean": 0.238} in [
        {"answers": c["answers"], "mean": c["verl"]["mean"]} for c in both
    ]
    assert any(0 < c["verl"]["mean"] < 1 for c in QUESTIONS)


@pytest.mark.slow
def test_maj_at_k_mean_and_std_equal_verls_on_every_question() -> None:
    differ = []
    for case in QUESTIONS:
        turns = _turns(case["id"], case["answers"], case["correct"])
        ours = (bootstrap_maj(turns), bootstrap_maj_std(turns))
        if ours != (case["verl"]["mean"], case["verl"]["std"]):
            differ.append((case["id"], ours, case["verl"]))
    assert not differ, f"{len(differ)} questions differ, e.g. {differ[:3]}"


def test_mean_at_k_equals_verls() -> None:
    for case in QUESTIONS:
        assert float(np.mean([float(c) for c in case["correct"]])) == case["verl"]["mean@k"]


@pytest.mark.slow
def test_a_single_runs_metrics_report_verls_dataset_number() -> None:
    """metrics.json's maj_at_k_bootstrap for a dataset is verl's maj@K/mean of the data
    source, in percent (the mean over questions, summed in another order: 1e-12 apart)."""
    for case in SETS:
        k = case["k"]
        turns = [
            t
            for i, q in enumerate(case["questions"])
            for t in _turns(f"q{i}", q["answers"], q["correct"])
        ]
        scoring = Scoring(agents=k, rounds=0, voters=tuple(range(k)), kind="math", seed=0)
        reported = compute_metrics(turns, scoring)["maj_at_k_bootstrap"]
        assert abs(reported - 100 * case["verl"]["mean"]) < 1e-12
