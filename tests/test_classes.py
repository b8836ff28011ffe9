"""Answers' equivalence classes, recorded when a turn is graded, so votes and reports never
compare answers again."""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from types import SimpleNamespace

import pytest
from cli_helpers import mad_eval, turns_of
from factories import compute_metrics

from mad_eval.grading.grader import equivalent
from mad_eval.measure.scoring import Scoring
from mad_eval.records import Turn
from mad_eval.voting.groups import AnswerClasses, answer_groups

FIVE = Scoring(5, 2, range(5), kind="math", seed=0)


def graded(answer: str | None, correct: bool = False, timed_out: bool = False) -> SimpleNamespace:
    return SimpleNamespace(answer=answer, correct=correct, grade_timed_out=timed_out)


def test_classes_number_right_answers_zero_and_each_distinct_wrong_answer_in_turn():
    classes = AnswerClasses(equivalent)
    assert classes.assign(graded("3", correct=True)) == 0
    assert classes.assign(graded(None)) is None
    assert classes.assign(graded("1/2")) == 1
    assert classes.assign(graded("7")) == 2
    assert classes.assign(graded("\\frac{1}{2}")) == 1  # written otherwise, the same answer
    assert classes.assign(graded("0.5")) == 1
    # math-verify could not decide on it: matched by its text alone.
    assert classes.assign(graded("x^{9^{9}}", timed_out=True)) == 3
    assert classes.assign(graded("x^{9^{9}}")) == 3
    assert classes.assign(graded(" x^{9^{9}} ")) == 3


def test_a_resumed_debate_goes_on_numbering_where_its_records_left_off():
    classes = AnswerClasses(equivalent)
    classes.seen(graded("7"), 2)
    classes.seen(graded("1/2"), 1)
    classes.seen(graded("3", correct=True), 0)
    assert classes.assign(graded("0.5")) == 1
    assert classes.assign(graded("7")) == 2
    assert classes.assign(graded("11")) == 3


def turn(agent: int, answer: str | None, correct: bool, answer_class: int | None) -> Turn:
    return Turn(0, "q", 0, agent, "m", 1, 1.0, 1.0, 8, "h", [], answer, answer, correct,
                "stop", 1, 1, 0.0, answer_class=answer_class)  # fmt: skip


def test_turns_with_classes_are_grouped_without_comparing_any_answers():
    turns = [
        turn(0, "1/2", False, 1),
        turn(1, "3", True, 0),
        turn(2, None, False, None),
        turn(3, "\\frac{1}{2}", False, 1),
        turn(4, "7", False, 2),
    ]

    def never(a: str, b: str) -> bool:
        raise AssertionError("compared")

    by_class = answer_groups(turns, never)
    by_pairs = answer_groups([dataclasses.replace(t, answer_class=None) for t in turns])
    assert [[t.agent for t in g] for g in by_class] == [[0, 3], [1], [4]]
    assert [[t.agent for t in g] for g in by_pairs] == [[0, 3], [1], [4]]
    # One turn recorded before classes existed: the round is compared pair by pair.
    mixed = [*turns[:4], dataclasses.replace(turns[4], answer_class=None)]
    assert [[t.agent for t in g] for g in answer_groups(mixed)] == [[0, 3], [1], [4]]


@pytest.mark.slow
def test_a_run_records_classes_and_its_numbers_are_those_of_pairwise_comparison(tmp_path):
    result = mad_eval("run", "--agents", "5", "--rounds", "2", "--limit", "12", "--out", "r",
                      cwd=tmp_path)  # fmt: skip
    assert result.returncode == 0, result.stderr
    records = turns_of(tmp_path / "r")
    by_debate = defaultdict(dict)
    for t in records:
        if t["answer"] is None:
            assert t["answer_class"] is None
            continue
        assert (t["answer_class"] == 0) == bool(t["correct"])
        # One class per distinct answer within a debate (the simulator writes integers).
        assert (
            by_debate[t["question"]].setdefault(t["answer"], t["answer_class"]) == t["answer_class"]
        )
    for classes in by_debate.values():
        assert len(set(classes.values())) == len(classes)
    turns = [Turn(**t) for t in records]
    plain = [dataclasses.replace(t, answer_class=None) for t in turns]
    assert compute_metrics(turns, FIVE) == compute_metrics(plain, FIVE)
