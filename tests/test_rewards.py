"""The rewards verl and TRL read (issue 33, item 3): compute_score's score/acc/pred, grpo_reward's
golds, grade_group, DAPO's overlong penalty, and pairing that reads correctness, never the
penalised reward."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from factories import turn

import mad_eval.training.rewards as rewards
from mad_eval.errors import UserError
from mad_eval.grading.kinds import Grade
from mad_eval.training import (
    NO_ANSWER,
    Overlong,
    TrainingError,
    compute_score,
    debate_pairs,
    grade_group,
    grpo_reward,
    make_grpo_reward,
)
from mad_eval.voting.maj_at_k import bootstrap_maj

VERL_MAJ = Path(__file__).resolve().parent.parent / "conformance" / "verl_maj" / "cases.jsonl"


# ---- compute_score for verl -----------------------------------------------------------------


def test_compute_score_gives_verl_a_score_a_correctness_and_a_vote():
    assert compute_score("m", "so \\boxed{42}", "42") == {"score": 1.0, "acc": 1.0, "pred": "42"}
    assert compute_score("m", "so \\boxed{48}", "42") == {"score": -1.0, "acc": 0.0, "pred": "48"}
    # No answer is one vote of its own, a string as verl's maj@K needs (None would break it).
    assert compute_score("m", "I am not sure.", "42")["pred"] == NO_ANSWER


def test_compute_score_ignores_the_keywords_verl_adds():
    got = compute_score(
        data_source="m",
        solution_str="\\boxed{42}",
        ground_truth="42",
        extra_info={"kind": "math", "rollout_reward_scores": {}},
        reward_router_address="127.0.0.1:9000",
        reward_model_tokenizer=None,
    )
    assert got["score"] == 1.0


@pytest.mark.slow
def test_verls_mean_and_maj_at_k_on_compute_scores_outputs_are_verls_stored_numbers():
    """Every question of conformance/verl_maj replayed as replies: compute_score's `acc` and
    `pred`, voted as verl votes (the most frequent pred, scored by its acc), give verl's own
    maj@K/mean and mean@K for those answers, to the last digit."""
    cases = [json.loads(line) for line in VERL_MAJ.read_text().splitlines() if line.strip()]
    # Answers written as "[INVALID]" itself have no reply here that writes them.
    questions = [c for c in cases if "answers" in c and "[INVALID]" not in c["answers"]]
    assert len(questions) >= 2400
    numbers = {"g": "7"} | {f"w{i}": str(100 + i) for i in range(1, 65)}
    for case in questions:
        texts = [
            "I cannot tell." if a is None else f"so it is \\boxed{{{numbers[a]}}}"
            for a in case["answers"]
        ]
        scores = [compute_score("gsm8k", t, "7", {"kind": "number"}) for t in texts]
        assert [s["acc"] == 1.0 for s in scores] == case["correct"]
        assert float(np.mean([s["acc"] for s in scores])) == case["verl"]["mean@k"]
        votes = [turn(case["id"], 0, i, s["pred"], s["acc"] == 1.0) for i, s in enumerate(scores)]
        assert bootstrap_maj(votes) == case["verl"]["mean"], case["id"]


# ---- grpo_reward for TRL --------------------------------------------------------------------


def test_grpo_reward_reads_ground_truth_or_verls_reward_model_column():
    texts = ["\\boxed{42}", [{"role": "assistant", "content": "\\boxed{41}"}]]
    assert grpo_reward(texts, ground_truth=["42", "42"]) == [1.0, -1.0]
    rows = [{"style": "rule", "ground_truth": "42"}] * 2
    assert grpo_reward(texts, reward_model=rows) == [1.0, -1.0]
    with pytest.raises(TrainingError, match="`ground_truth` column or verl's `reward_model`"):
        grpo_reward(texts, prompts=["a", "b"])
    with pytest.raises(TrainingError, match="needs the gold answer"):
        grpo_reward(texts, reward_model=[{"style": "rule"}] * 2)
    with pytest.raises(TrainingError, match="2 completions and 1 golds"):
        grpo_reward(texts, ground_truth=["42"])


def test_grpo_reward_with_the_overlong_penalty_counts_trls_completion_tokens():
    reward = make_grpo_reward(Overlong(max_length=20, buffer=4))
    ids = [[0] * 10, [0] * 18, [0] * 20]
    texts = ["\\boxed{42}"] * 2 + ["\\boxed{41}"]
    assert reward(texts, ground_truth=["42"] * 3, completion_ids=ids) == [1.0, 0.5, -2.0]
    assert reward.__name__ == "grpo_reward"  # TRL logs a reward under its function's name
    # Without token ids, characters count: 10 characters fit in 16.
    assert reward(texts[:1], ground_truth=["42"]) == [1.0]


# ---- grade_group and the overlong penalty ---------------------------------------------------


def test_grade_group_grades_each_completion_once(monkeypatch):
    calls = []

    def counted(text, gold, kind, options=(), answer=None, split=True):
        calls.append(text)
        return Grade("5", text.endswith("5}"), timed_out=text == "\\boxed{x5}")

    monkeypatch.setattr(rewards, "grade", counted)
    texts = ["\\boxed{5}", "\\boxed{7}", "\\boxed{x5}"]
    got = grade_group(texts, "5", "math")
    assert calls == texts
    assert [tuple(s) for s in got] == [
        (1.0, "5", True, False),
        (-1.0, "5", False, False),
        (1.0, "5", True, True),
    ]


def test_the_overlong_penalty_is_dapos_linear_ramp_over_the_buffer():
    ramp = Overlong(max_length=20, buffer=4, factor=1.0)
    assert [ramp.penalty(n) for n in (1, 16, 17, 18, 20)] == [0.0, 0.0, -0.25, -0.5, -1.0]
    assert Overlong(20, 4, factor=0.5).penalty(20) == -0.5
    texts = ["\\boxed{5}", "\\boxed{5}", "\\boxed{5}", "\\boxed{7}"]
    got = grade_group(texts, "5", lengths=[3, 16, 18, 20], overlong=ramp)
    assert [s.reward for s in got] == [1.0, 1.0, 0.5, -2.0]
    assert [s.correct for s in got] == [True, True, True, False]  # the grade never changes
    with pytest.raises(TrainingError, match="overlong buffer must be from 1 to the max length"):
        Overlong(max_length=10, buffer=11)
    with pytest.raises(TrainingError, match="penalty factor must be 0 or more"):
        Overlong(max_length=10, buffer=2, factor=-1)


# ---- pairing reads correctness --------------------------------------------------------------


def test_frequency_pairing_reads_correctness_not_the_penalised_reward():
    """The issue's case: answers [5, 5, 5, 7], rewards [1, 1, 0.8, -1] after the penalty."""
    texts = ["\\boxed{5}"] * 3 + ["\\boxed{7}"]
    scored = grade_group(texts, "5", lengths=[10, 10, 60, 10], overlong=Overlong(100, 50))
    assert [s.reward for s in scored] == [1.0, 1.0, 0.8, -1.0]
    answers, correct = [s.answer for s in scored], [s.correct for s in scored]
    orders = Counter()
    for seed in range(200):
        (pair,) = debate_pairs(answers, correct, rule="freq", seed=seed)
        assert sorted(answers[i] for i in pair) == ["5", "7"]  # never 5 with 5
        orders[answers[pair[0]]] += 1
    assert min(orders.values()) > 60  # the order is randomised
    # The reward itself is refused: it is no grade.
    with pytest.raises(TrainingError, match=r"correctness .* not its reward; got 0\.8"):
        debate_pairs(answers, [s.reward for s in scored])


@pytest.mark.parametrize("rule", ["freq", "rand"])
def test_groups_all_right_or_all_wrong_under_different_penalties_make_no_pair(rule):
    ramp = Overlong(100, 50)
    right = grade_group(["\\boxed{5}"] * 3, "5", lengths=[10, 60, 90], overlong=ramp)
    assert len({s.reward for s in right}) == 3
    got = debate_pairs([s.answer for s in right], [s.correct for s in right], rule=rule)
    assert got == [] and got.dropped == "all-right"
    wrong = grade_group(["\\boxed{6}", "\\boxed{7}"], "5", lengths=[10, 90], overlong=ramp)
    got = debate_pairs([s.answer for s in wrong], [s.correct for s in wrong], rule=rule)
    assert got == [] and got.dropped == "all-wrong"


# ---- bad input: one sentence each -----------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: compute_score("m", "\\boxed{1}", None), "needs the gold answer"),
        (lambda: compute_score("m", "\\boxed{1}", " "), "needs the gold answer"),
        (lambda: grade_group(["a"], ""), "needs the gold answer"),
        (lambda: debate_pairs(["5"], [True]), "a group of at least 2 rollouts"),
        (lambda: debate_pairs(["5", "7"], [True]), "answers, correct, lengths and timed_out"),
        (lambda: grade_group(["a", "b"], "5", lengths=[1]), "2 completions and 1 lengths"),
    ],
)
def test_bad_calls_get_one_sentence(call, message):
    with pytest.raises(TrainingError, match=message) as raised:
        call()
    assert isinstance(raised.value, UserError)
    text = str(raised.value)
    assert text.endswith(".") and text.count(". ") == 0 and "\n" not in text
