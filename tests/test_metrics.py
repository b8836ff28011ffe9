"""Metrics on a small hand-built debate whose numbers were worked out by hand."""

from __future__ import annotations

import dataclasses
import random

import pytest
from factories import compute_metrics, turn

from mad_eval.measure.formula import mean_std
from mad_eval.measure.scoring import Scoring
from mad_eval.records import Turn
from mad_eval.voting.groups import answer_groups
from mad_eval.voting.rules import plurality

THREE = Scoring(3, 1, (0, 1, 2), kind="math", seed=0)  # three agents, one round

# 3 agents, 1 debate round. Each line: question, round, then the agents' (answer, correct).
CASE = [
    ("q1", 0, [("4", True), ("5", False), ("4", True)]),  # vote 4: right
    ("q1", 1, [("5", False), ("5", False), ("4", True)]),  # vote 5: wrong
    # "\frac{1}{2}" and "1/2" are one answer: 2 votes beat "3" (by string it would be a tie).
    ("q2", 0, [("\\frac{1}{2}", True), ("1/2", True), ("3", False)]),  # right
    ("q2", 1, [(None, False), ("3", False), ("3", False)]),  # unparsed does not vote: wrong
    ("q3", 0, [("6", False), ("8", False), (None, False)]),  # tie of two wrong answers: wrong
    ("q3", 1, [("7", True), "failed", ("7", True)]),  # the failed turn is left out: right
]


def case_turns(run: int = 0) -> list[Turn]:
    out = []
    for question, round_, agents in CASE:
        for agent, cell in enumerate(agents):
            if cell == "failed":
                out.append(turn(question, round_, agent, None, False, run, failed=True))
            else:
                out.append(turn(question, round_, agent, cell[0], cell[1], run))
    return out


def test_hand_computed_case():
    m = compute_metrics(case_turns(), THREE)
    assert m["maj"] == pytest.approx(200 / 3)
    assert m["debate"] == pytest.approx(100 / 3)
    assert m["delta"] == pytest.approx(-100 / 3)
    assert m["maj_std"] is None  # one run: no spread to report
    r0, r1 = m["rounds"]
    assert r0["vote_accuracy"] == pytest.approx(200 / 3)
    assert r0["agent_accuracy"] == pytest.approx(400 / 9)  # 4 right of 9
    assert r1["agent_accuracy"] == pytest.approx(37.5)  # 3 right of 8 (one failed)
    (moves,) = m["transitions"]
    # 8 agents have both turns: 3 went right->wrong, 2 wrong->right.
    assert moves["c2i"] == pytest.approx(37.5)
    assert moves["i2c"] == pytest.approx(25.0)
    assert moves["delta"] == pytest.approx(-12.5)
    assert m["unparsed"] == 2
    assert m["failed_turns"] == 1
    assert m["questions"] == 3 and m["turns"] == 18


def test_runs_are_averaged_with_sample_std():
    second = [dataclasses.replace(t, run=1) for t in case_turns()]
    # In run 1, q1's debate round votes right: Debate 66.7 there, 33.3 in run 0.
    for t in second:
        if t.question == "q1" and t.round == 1 and t.agent == 1:
            t.answer, t.correct = "4", True
    m = compute_metrics(case_turns() + second, THREE)
    assert m["runs"] == 2
    assert m["maj"] == pytest.approx(200 / 3) and m["maj_std"] == pytest.approx(0.0)
    assert m["debate"] == pytest.approx(50.0)
    assert m["debate_std"] == pytest.approx(mean_std([100 / 3, 200 / 3])[1])
    assert [r["debate"] for r in m["per_run"]] == pytest.approx([100 / 3, 200 / 3])


def test_mean_std():
    assert mean_std([50.0, 70.0]) == pytest.approx((60.0, 14.1421356))
    assert mean_std([50.0]) == (50.0, None)
    assert mean_std([None]) == (None, None)


def test_voters_restrict_the_vote():
    turns = case_turns()
    # Only agent 2 votes: q1 right in both rounds, q2 wrong in both, q3 r0 unparsed, r1 right.
    m = compute_metrics(turns, Scoring(3, 1, (2,), kind="math", seed=0))
    assert m["maj"] == pytest.approx(100 / 3)
    assert m["debate"] == pytest.approx(200 / 3)


def test_ties_break_at_random_but_reproducibly():
    ballot = [turn("q", 0, 0, "1", True), turn("q", 0, 1, "2", False)]
    picks = {plurality(answer_groups(ballot), random.Random(s)).answer for s in range(40)}
    assert picks == {"1", "2"}
    again = [plurality(answer_groups(ballot), random.Random(7)).answer for _ in range(5)]
    assert len(set(again)) == 1


def test_hub_accuracy_and_groups_by_hand():
    """Hub = agent 2: right on q1 in round 0 (1 of 3); on q1 and q3 in round 1 (2 of 3).
    Groups {0} and {1, 2}, each voting among its own agents."""
    m = compute_metrics(case_turns(), dataclasses.replace(THREE, hub=2), groups=GROUPS)
    assert [r["hub_accuracy"] for r in m["rounds"]] == pytest.approx([100 / 3, 200 / 3])
    solo, pair = m["groups"]
    assert solo["group"] == "solo" and solo["agents"] == [0]
    # Agent 0 alone: round 0 right on q1, q2; round 1 right on q3 only (q2 unparsed).
    assert solo["maj"] == pytest.approx(200 / 3) and solo["debate"] == pytest.approx(100 / 3)
    assert solo["transitions"][0]["c2i"] == pytest.approx(200 / 3)
    assert solo["transitions"][0]["i2c"] == pytest.approx(100 / 3)
    # Agents 1, 2 in round 1: q1 5 (wrong) and 4 (right), q2 3 and 3 (wrong), q3 failed and
    # 7 (right): 2 right of 5 turns that did not fail.
    assert pair["agents"] == [1, 2]
    assert pair["rounds"][1]["agent_accuracy"] == pytest.approx(200 / 5)
    assert pair["unparsed"] == 1 and pair["failed_turns"] == 1
    # One group only: no breakdown.
    assert "groups" not in compute_metrics(case_turns(), THREE, groups={"all": [0, 1, 2]})


GROUPS = {"solo": [0], "pair": [1, 2]}


def test_prefix_share_is_pooled_token_fraction():
    turns = case_turns()
    for t in turns:  # round 0: 100-token prompts, agents 1 and 2 repeat agent 0's whole prompt
        t.context_tokens = 100 if t.round == 0 else 200
        t.prefix_tokens = (0 if t.agent == 0 else 100) if t.round == 0 else 50 * t.agent
    m = compute_metrics(turns, THREE)
    assert m["rounds"][0]["prefix_share"] == pytest.approx(600 / 900)
    assert m["rounds"][1]["prefix_share"] == pytest.approx(450 / 1800)
    assert m["prefix_share"] == pytest.approx(1050 / 2700)
    turns[0].cut_tokens = 7
    m = compute_metrics(turns, THREE)
    assert (m["context_cut_turns"], m["context_cut_tokens"]) == (1, 7)


def test_serving_counts_come_from_the_turns():
    turns = case_turns()
    turns[0].attempts, turns[1].attempts = 3, 0  # two retries; one never sent
    turns[1].cached = True
    m = compute_metrics(turns, THREE)
    assert m["retried_turns"] == 1
    assert m["requests_sent"] == len(turns) - 1 + 2
    assert m["cached_turns"] == 1


def test_a_failed_hub_turn_is_wrong_in_every_hub_number():
    """Under the hub rule the system's answer is the hub's: its vote accuracy and the hub's
    own accuracy are one number, a failed hub turn wrong in both (4.0 against 4.55 before)."""
    turns = []
    for q in range(4):
        for r in range(2):
            for agent in range(3):
                failed = agent == 0 and q == 0 and r == 1  # the hub's request failed
                turns.append(turn(f"q{q}", r, agent, "1", correct=q < 3, failed=failed))
    scoring = dataclasses.replace(THREE, hub=0, rule="hub")
    m = compute_metrics(turns, scoring)
    for row in m["rounds"]:
        assert row["hub_accuracy"] == pytest.approx(row["vote_accuracy"])
    assert [row["hub_accuracy"] for row in m["rounds"]] == pytest.approx([75.0, 50.0])
    plurality = compute_metrics(turns, dataclasses.replace(THREE, hub=0))
    assert [row["hub_accuracy"] for row in plurality["rounds"]] == pytest.approx([75.0, 50.0])


# 3 agents, round 0 only, 7 questions: three with one agent wrong (each agent once), three
# with two wrong, one all right. Fewer agree than independent agents of the same accuracy
# would (independent: a question all right or all wrong a quarter of the time at p = 1/2).
NEGATIVE = [[True, True, False], [True, False, True], [False, True, True]]
NEGATIVE += [[True, False, False], [False, True, False], [False, False, True], [True] * 3]


def test_negatively_correlated_agents_are_worth_more_than_n():
    """N_eff = N / (1 + (N-1)ρ) exceeds N when ρ < 0; by hand: p = 12/21 = 4/7 right,
    pairs agreeing A = (6 x 1 + 3) / 21 = 3/7, so ρ = 1 - (1 - A) / (2p(1-p)) =
    1 - (4/7) / (24/49) = -1/6 and N_eff = 3 / (1 - 2/6) = 4.5."""
    turns = [
        turn(f"q{i}", 0, agent, "4" if right else "5", right)
        for i, rights in enumerate(NEGATIVE)
        for agent, right in enumerate(rights)
    ]
    (r0,) = compute_metrics(turns, Scoring(3, 0, (0, 1, 2), kind="math", seed=0))["rounds"]
    assert r0["agent_accuracy"] == pytest.approx(400 / 7)
    assert r0["rho"] == pytest.approx(-1 / 6)
    assert r0["n_eff"] == pytest.approx(4.5)
