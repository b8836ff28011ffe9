"""One prompt's on-policy self-debate step (training.onpolicy), as both trainers' hooks call it:
grade once, pair by correctness (never the penalised reward), build the debate-turn rows with
the evaluation's own prompt builder from the first-turn row alone."""

from __future__ import annotations

import random
from collections import Counter

import numpy as np
import pytest

from mad_eval.records import Question
from mad_eval.training import Overlong, TrainingError, prompt_rows, row_pair_prompt
from mad_eval.training.onpolicy import SelfDebate

FIVES_AND_A_SEVEN = ["\\boxed{5}", "Add them: \\boxed{5}", "so \\boxed{5}", "\\boxed{7}"]


def _row(template: str = "debate", gold: str = "5", kind: str = "math", options=None) -> dict:
    meta = {"options": options} if options else {}
    question = Question("q1", "What is 2 + 3?", gold, meta, kind, None)
    (row,) = prompt_rows([question], "toy", kind, template)
    return row


def test_the_issue_case_pairs_the_two_most_common_answers_by_correctness():
    """Answers [5, 5, 5, 7] with penalised rewards [1, 1, 0.8, -1]: 5 with 7, in either
    order, never 5 with 5; the debate row is agent 0's round-1 prompt for that pair."""
    debate = SelfDebate(rule="freq", overlong=Overlong(max_length=100, buffer=50))
    row, rng = _row(), random.Random(0)
    owns = Counter()
    for _ in range(100):
        group = debate.step(row, FIVES_AND_A_SEVEN, lengths=[10, 10, 60, 10], rng=rng)
        assert group.rewards == [1.0, 1.0, 0.8, -1.0]
        ((own, partner),) = group.pairs
        assert {group.scored[own].answer, group.scored[partner].answer} == {"5", "7"}
        owns[group.scored[own].answer] += 1
        (debate_row,) = group.debates
        assert debate_row["prompt"] == row_pair_prompt(
            row, FIVES_AND_A_SEVEN[own], FIVES_AND_A_SEVEN[partner]
        )
        info = debate_row["extra_info"]
        assert info["turn"] == "debate" and info["pairing"] == "frequency"
        assert info["correct"] == [group.scored[own].correct, group.scored[partner].correct]
        assert debate_row["reward_model"]["ground_truth"] == "5"
    assert min(owns.values()) > 25  # the order is randomised, so position carries no signal


@pytest.mark.parametrize("rule", ["freq", "rand"])
def test_all_right_or_all_wrong_groups_give_no_debate_whatever_their_penalties(rule):
    debate = SelfDebate(rule=rule, overlong=Overlong(max_length=100, buffer=50))
    right = debate.step(_row(), ["\\boxed{5}"] * 3, lengths=[10, 60, 90])
    assert len(set(right.rewards)) == 3 and right.debates == []
    assert right.pairs.dropped == "all-right"
    wrong = debate.step(_row(), ["\\boxed{6}", "\\boxed{7}"], lengths=[10, 90])
    assert wrong.debates == [] and wrong.pairs.dropped == "all-wrong"


def test_truncated_replies_are_not_paired():
    """A reply at the length limit was cut off: it is no answer to debate."""
    group = SelfDebate(max_length=99).step(_row(), FIVES_AND_A_SEVEN, lengths=[10, 10, 10, 100])
    assert group.debates == [] and group.pairs.dropped == "all-right"
    assert group.scored[3].correct is False  # still graded and rewarded as usual


def test_random_pairing_makes_up_to_per_prompt_distinct_contexts():
    group = SelfDebate(rule="random", per_prompt=3).step(_row(), FIVES_AND_A_SEVEN)
    assert len(group.debates) == 3 and len(set(group.pairs)) == 3


def test_a_conversation_template_and_a_choice_question_build_their_own_debate_turn():
    row = _row("conversation", gold="B", kind="choice", options=["4", "5", "6", "7"])
    texts = ["The answer is (B).", "The answer is (B).", "The answer is (D)."]
    group = SelfDebate().step(row, texts)
    ((own, partner),) = group.pairs
    assert group.debates[0]["prompt"] == row_pair_prompt(row, texts[own], texts[partner])
    assert [m["role"] for m in group.debates[0]["prompt"]][-3:] == ["user", "assistant", "user"]
    assert group.debates[0]["extra_info"]["options"] == ["4", "5", "6", "7"]


def test_each_step_draws_afresh_from_the_generator_the_trainer_keeps():
    debate, row = SelfDebate(rule="rand"), _row()
    texts = ["\\boxed{5}", "\\boxed{6}", "\\boxed{7}", "\\boxed{5}", "\\boxed{8}"]
    rng = debate.rng()
    drawn = {tuple(debate.step(row, texts, rng=rng).pairs) for _ in range(30)}
    assert len(drawn) > 1
    first, second = debate.rng(), debate.rng()  # the same seed gives the same draws
    assert [debate.step(row, texts, rng=first).pairs for _ in range(5)] == [
        debate.step(row, texts, rng=second).pairs for _ in range(5)
    ]


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: SelfDebate().step(_row(), ["\\boxed{5}"]), "group of at least 2 first-turn"),
        (lambda: SelfDebate().step({"extra_info": {}}, ["a", "b"]), "extra_info lacks question"),
        (lambda: SelfDebate().step(_row(gold=""), ["a", "b"]), "needs the gold answer"),
        (lambda: SelfDebate().step(_row(), ["a", "b"], lengths=[1]), "one item per completion"),
        (lambda: SelfDebate(rule="best"), "--pairing must be one of"),
        (lambda: SelfDebate(per_prompt=0), "per_prompt must be at least 1"),
        (lambda: SelfDebate(max_length=0), "max_length must be at least 1"),
    ],
)
def test_bad_input_is_one_sentence(call, message):
    with pytest.raises(TrainingError, match=message):
        call()


def test_a_model_that_never_answers_is_warned_of_once_then_stopped():
    debate = SelfDebate(stop_unparsed=3)
    watch, row = debate.watch(), _row()
    silent = debate.step(row, ["no idea", "still thinking"])
    answered = debate.step(row, ["\\boxed{5}", "hmm"])
    warning = watch.step([silent, silent])
    assert warning and "(4 replies)" in warning and "after 3 such steps" in warning
    assert watch.step([silent]) is None  # warned once per streak
    assert watch.step([silent, answered]) is None and watch.steps == 0  # one answer resets it
    assert watch.step([silent]) and watch.step([silent]) is None
    with pytest.raises(TrainingError, match=r"of the last 3 steps gave an answer") as stopped:
        watch.step([silent])
    assert "\n" not in str(stopped.value)
    with pytest.raises(TrainingError, match="stop_unparsed must be at least 1"):
        SelfDebate(stop_unparsed=0)


def _dapo_row(gold: str) -> dict:
    (row,) = prompt_rows([Question("q1", "Which number?", gold)], "toy", "math", "sdrl", "dapo")
    return row


def test_the_authors_setting_pairs_unparsed_replies_as_an_answer():
    """5 x `5` and 3 unparsed: mad-eval leaves unparsed replies out and finds one answer;
    the authors count "[INVALID]" as one, and pair a 5 with it."""
    replies = ["Answer: 5"] * 5 + ["no answer line"] * 3
    ours = SelfDebate().step(_dapo_row("5"), replies)
    assert ours.debates == [] and ours.pairs.dropped == "one-answer"
    theirs = SelfDebate(authors=True).step(_dapo_row("5"), replies)
    ((own, partner),) = theirs.pairs
    assert {own < 5, partner < 5} == {True, False}
    assert theirs.trained and len(theirs.debates) == 1


def test_the_authors_setting_compares_answers_as_text_with_first_seen_ties():
    """`0.5` x 2, `1/2` x 2, `4` x 3: mad-eval groups 0.5 with 1/2 (4 replies) and pairs it
    with 4; the authors pair 4 (3) with 0.5, the first seen of the tied texts."""
    replies = ["Answer: 0.5", "Answer: 1/2", "Answer: 4", "Answer: 0.5", "Answer: 4",
               "Answer: 1/2", "Answer: 4"]  # fmt: skip
    for seed in range(20):
        group = SelfDebate(authors=True).step(
            _dapo_row("4"), replies, rng=np.random.RandomState(seed)
        )
        ((own, partner),) = group.pairs
        assert {replies[own], replies[partner]} == {"Answer: 4", "Answer: 0.5"}
    ours = SelfDebate().step(_dapo_row("4"), replies)
    ((own, partner),) = ours.pairs
    assert {ours.scored[own].correct, ours.scored[partner].correct} == {True, False}


def test_the_authors_setting_drops_all_right_groups_from_training_whatever_their_penalties():
    debate = SelfDebate(authors=True, overlong=Overlong(max_length=100, buffer=50))
    group = debate.step(_dapo_row("5"), ["Answer: 5"] * 3, lengths=[10, 60, 90])
    assert len(set(group.rewards)) == 3  # the penalty alone would give them advantages
    assert not group.trained and group.pairs.dropped == "all-right" and group.debates == []
    # validation keeps every group and never flips the pair: the majority's reply is own
    check = debate.step(_dapo_row("5"), ["Answer: 5", "Answer: 7", "Answer: 5"], validate=True)
    ((own, partner),) = check.pairs
    assert check.trained and check.scored[own].answer == "5" and check.scored[partner].answer == "7"
    with pytest.raises(TrainingError, match="per_prompt must be 1"):
        SelfDebate(authors=True, per_prompt=2)
