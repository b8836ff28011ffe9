"""Decision protocols beyond plurality: what a reply states besides its answer (a
confidence, approvals, points, a ranking, a judge's verdict), the rules that read it
(ReConcile's confidence-weighted vote, approval, cumulative and Borda voting), consensus
rules that end a debate once reached, and a stopped debate's numbers: its last answers count
in every later round."""

from __future__ import annotations

import dataclasses
import random

import pytest
from cli_helpers import turns_by_key
from factories import compute_metrics, sim_run, turn

from mad_eval.measure.scoring import Scoring
from mad_eval.store.folder import RunStore
from mad_eval.voting.rules import get_rule
from mad_eval.voting.statements import STATEMENTS

# ---- what replies state ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("confidence", 0.85),
        ("approval", ["12", "\\frac{1}{2}", "(1, 2)"]),
        ("ranking", ["B", "A", "C"]),
        ("points", [("12", 6), ("7", 4)]),
        ("verdict", "end"),
        ("verdict", "continue"),
    ],
)
def test_a_statement_reads_back_what_was_written(name, value):
    statement = STATEMENTS.get(name)
    text = f"Some working.\n\\boxed{{12}}\n{statement.write(value)}"
    assert statement.read(text) == pytest.approx(value) if name == "confidence" else value


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("Confidence: 85%", 0.85),
        ("confidence: 90", 0.9),
        ("**Confidence:** 0.7.", 0.7),
        ("Confidence: 1.5%", 0.015),
        ("Confidence: 250", None),
        ("Confidence: very", None),
        ("Confidence: 0.2\nlater\nConfidence: 0.9", 0.9),  # the last line that states it
        ("I have no confidence: none at all", None),  # not at a line's start
        ("", None),
    ],
)
def test_confidence_lines_as_models_write_them(text, value):
    found = STATEMENTS.get("confidence").read(text)
    assert found == pytest.approx(value) if value is not None else found is None


def test_hostile_statements_are_bounded_and_never_trusted():
    verdict, points = STATEMENTS.get("verdict"), STATEMENTS.get("points")
    early = "Verdict: end\n" + "x" * 100_000  # past the tail that is read
    assert verdict.read(early) is None
    assert verdict.read("Verdict: end now, please") is None
    assert points.read("Points: 5 = 11") is None  # more than 10 points
    assert points.read("Points: 5 = 4; 6 = 5") is None  # fewer: MALLM's exactly 10
    assert points.read("Points: 5 = -3") is None
    assert points.read("Points: " + "; ".join(f"{i} = 0" for i in range(30))) is None
    assert STATEMENTS.get("ranking").read("Ranking: " + ";" * 50_000) is None
    assert STATEMENTS.get("ranking").read("Ranking: 1; 2; 3; 4; 5; 6") is None  # at most 5
    assert verdict.read("Verdict:" + " " * 200_000 + "end!") is None  # bounded, no hang


# ---- decision protocols -------------------------------------------------------------------


def voter(agent, answer, correct, statement=""):
    found = turn("q", 1, agent, answer, correct)
    found.text = f"\\boxed{{{answer}}}\n{statement}"
    return found


def pick(rule, live):
    same = lambda a, b: a == b  # noqa: E731
    return get_rule(rule).pick(live, [t.agent for t in live], None, random.Random(0), same)


def test_confidence_weighs_a_sure_minority_over_an_unsure_majority():
    live = [
        voter(0, "5", True, "Confidence: 0.95"),
        voter(1, "6", False, "Confidence: 0.3"),
        voter(2, "6", False, "Confidence: 0.4"),
    ]
    assert pick("confidence", live).answer == "5"
    assert pick("plurality", live).answer == "6"
    unstated = [voter(0, "5", True), voter(1, "6", False), voter(2, "6", False)]
    assert pick("confidence", unstated).answer == "6"  # each counts 0.5: the plurality


def test_approval_cumulative_and_borda_count_what_voters_state():
    approval = [
        voter(0, "5", True, "Approve: 5; 7"),
        voter(1, "6", False, "Approve: 6"),
        voter(2, "7", False, "Approve: 7; 5"),
    ]
    assert sorted(t.answer for t in approval) == ["5", "6", "7"]
    assert pick("approval", approval).answer in ("5", "7")  # two approvals each, 6 has one
    others = [
        voter(0, "5", True, "Approve: 7"),  # not its own: only what it lists
        voter(1, "6", False, "Approve: 6"),
        voter(2, "7", False, "Approve: 7"),
    ]
    assert pick("approval", others).answer == "7"  # 7: two, 6: one, 5: none

    points = [
        voter(0, "5", True, "Points: 5 = 4; 6 = 6"),
        voter(1, "6", False, "Points: 6 = 10"),
        voter(2, "7", False, "Points: 7 = 5; 5 = 5"),
    ]
    assert pick("cumulative", points).answer == "6"  # 16 against 9 and 5
    ranked = [
        voter(0, "5", True, "Ranking: 5; 7; 6"),
        voter(1, "6", False, "Ranking: 6; 7; 5"),
        voter(2, "7", False, "Ranking: 7; 5; 6"),
    ]
    # min(5, 3 voters) = 3 for the first: 5: 3 + 1 + 2 = 6; 6: 1 + 3 + 1 = 5; 7: 2 + 2 + 3 = 7.
    assert pick("borda", ranked).answer == "7"
    unreadable = [voter(0, "5", True, "Points: lots"), voter(1, "6", False, "Points: lots")]
    assert pick("cumulative", unreadable).answer in ("5", "6")  # each its own 10
    stray = [voter(0, "5", True, "Points: 6 = 5; 9 = 5"), voter(1, "6", False, "Points: 5 = 10")]
    assert pick("cumulative", stray).answer == "5"  # 9 is no one's: voter 0's 10 go to 5


def test_borda_ranks_by_position():
    ranked = [
        voter(0, "5", True, "Ranking: 5; 6; 7"),
        voter(1, "6", False, "Ranking: 5; 6; 7"),
        voter(2, "7", False, "Ranking: 7; 5; 6"),
    ]
    assert pick("borda", ranked).answer == "5"  # 3 + 3 + 2 = 8 against 6: 2 + 2 + 1, 7: 1 + 1 + 3


def test_a_consensus_rule_ends_the_debate_once_reached(tmp_path):
    folder = sim_run(
        tmp_path / "r", "sim:p0=0.8", protocol="decentralized:score=unanimity", agents=3, rounds=3
    )
    turns = turns_by_key(folder)
    stops = RunStore(folder).stops()
    assert stops
    for (run, question), stop in stops.items():
        answers = {turns[run, question, stop.round, a]["answer_class"] for a in range(3)}
        assert len(answers) == 1 and None not in answers
        assert stop.why == f"the voters reached unanimity in round {stop.round}"
    for run, question, round_, _ in turns:  # a debate that went on had no unanimity
        if (run, question) not in stops and round_ < 3:
            row = {turns[run, question, round_, a]["answer_class"] for a in range(3)}
            assert len(row) > 1 or None in row


# ---- stopped debates in the numbers --------------------------------------------------------


def test_a_stopped_debates_last_answers_count_in_every_later_round():
    # q1 ends after round 0, all right; q2 goes on and turns wrong in round 1.
    turns = [turn("q1", 0, a, "5", True) for a in range(3)]
    turns += [turn("q2", 0, a, "5", True) for a in range(3)]
    turns += [turn("q2", 1, a, "6", False) for a in range(3)]
    scoring = Scoring(agents=3, rounds=1, voters=(0, 1, 2), kind="math", seed=0)
    stopped = dataclasses.replace(scoring, stops={(0, "q1"): 0})
    kept = compute_metrics(turns, stopped)
    assert kept["maj"] == 100.0 and kept["debate"] == 50.0  # q1 right, q2 wrong
    assert kept["rounds"][1]["agent_accuracy"] == 50.0
    # q2's three agents turned wrong; q1's three stayed: over all six agents, not q2's three.
    assert kept["transitions"][0]["c2i"] == pytest.approx(50.0)
    assert kept["rounds"][1]["unanimous"] == 100.0
    # Cost is what was spent, per question: q1 asked nothing in round 1.
    assert kept["cost_by_round"][1]["generations"] == 1.5
    assert kept["cost"]["generations"] == 4.5
    # Final answers are each debate's last spoken ones: q1's unparsed ones say so.
    unread = [turn("q1", 0, a, None, False) for a in range(3)] + turns[3:]
    alerts = compute_metrics(unread, stopped)["alerts"]
    assert any(a.startswith("3 of 6 final answers were unparsed") for a in alerts), alerts
    dropped = compute_metrics(turns, scoring)  # no stop known: q1 has no round 1
    assert dropped["debate"] == 0.0
