"""Compute-matched baselines (mad_eval.measure.matched) on hand-built turns whose numbers were
worked out by hand, and end to end through the CLI on simulated agents."""

from __future__ import annotations

import dataclasses
import io
import json
import math
from pathlib import Path

import numpy as np
import pytest
from cli_helpers import mad_eval
from factories import turn as metric_turn

from mad_eval import api
from mad_eval.grading.grader import same_answer
from mad_eval.measure.counts import tally
from mad_eval.measure.matched import (
    SUBSAMPLES,
    Spending,
    match,
    pools,
    samples_for,
    vote_accuracy,
)
from mad_eval.measure.scoring import Scoring
from mad_eval.records import Turn

SAME = same_answer("math")


def turn(
    question: str,
    agent: int,
    answer: str | None,
    cls: int | None,
    *,
    run: int = 0,
    round_: int = 0,
    tokens: tuple[int, int] = (10, 10),
    failed: bool = False,
) -> Turn:
    """A graded turn (test_metrics' builder) with its answer class and token counts."""
    made = metric_turn(question, round_, agent, answer, cls == 0, run, failed)
    return dataclasses.replace(
        made,
        prompt_tokens=tokens[0],
        completion_tokens=tokens[1],
        answer_class=None if failed else cls,
    )


def rng() -> np.random.Generator:
    return np.random.default_rng(0)


def test_maj_at_2_of_four_samples_by_hand():
    """Classes [0, 0, 1, 2], pairs: (0,0) right; (0,1) x2 and (0,2) x2 ties, right half the
    time; (1,2) wrong: (1 + 4/2) / 6 = 1/2, exactly (6 subsets are all enumerated)."""
    classes = np.array([0, 0, 1, 2])
    assert vote_accuracy(classes, 2, rng()) == pytest.approx(0.5)
    # m = 3: {0,0,x} right (2 subsets), {0,1,2} a three-way tie (2 subsets): (2 + 2/3) / 4.
    assert vote_accuracy(classes, 3, rng()) == pytest.approx((2 + 2 / 3) / 4)
    assert vote_accuracy(classes, 4, rng()) == pytest.approx(1.0)  # 2 against 1 and 1
    assert vote_accuracy(classes, 1, rng()) == pytest.approx(0.5)  # mean@1


def test_unparsed_answers_never_win():
    classes = np.array([-1, -1, -1, 0])
    # Pairs: 3 of 6 hold the right answer, which then wins alone; the rest have no vote.
    assert vote_accuracy(classes, 2, rng()) == pytest.approx(0.5)
    assert vote_accuracy(np.array([-1, -1]), 1, rng()) == 0.0


def test_large_pools_are_subsampled_within_noise_and_repeat():
    """K = 20, m = 10: C(20, 10) subsets are too many, so SUBSAMPLES seeded ones are drawn.
    8 right, 6 of one wrong answer, 6 of another: the exact value by enumeration over the
    hypergeometric counts is compared within the draws' noise."""
    classes = np.array([0] * 8 + [1] * 6 + [2] * 6)
    m = 10
    exact = 0.0
    for a in range(0, 9):
        for b in range(0, 7):
            c = m - a - b
            if not 0 <= c <= 6:
                continue
            weight = math.comb(8, a) * math.comb(6, b) * math.comb(6, c) / math.comb(20, m)
            top = max(a, b, c)
            exact += weight * ((a == top) / [a, b, c].count(top))
    found = vote_accuracy(classes, m, np.random.default_rng(1))
    assert abs(found - exact) < 4 * 0.5 / math.sqrt(SUBSAMPLES)
    assert found == vote_accuracy(classes, m, np.random.default_rng(1))


@pytest.mark.parametrize(
    ("tokens", "per_sample", "k", "m"),
    [
        (100, 40, 8, 3),  # 2.5 rounds half up
        (99, 40, 8, 2),  # 2.475
        (10, 40, 8, 1),  # 0.25: at least one sample
        (1000, 40, 8, 8),  # 25: at most K
        (100, 0, 8, 8),  # no tokens counted for the samples: all K
    ],
)
def test_samples_the_tokens_buy(tokens, per_sample, k, m):
    assert samples_for(tokens, per_sample, k) == m


def test_seeded_runs_pool_and_failed_turns_are_no_samples():
    """Run 0 numbers wrong answer "5" class 1, run 1 numbers "7" class 1 and "5" class 2:
    pooled, the two "5"s are one class and "7" another. A failed turn is no sample."""
    turns = [
        turn("q", 0, "4", 0, run=0, tokens=(10, 20)),
        turn("q", 1, "5", 1, run=0, tokens=(10, 40)),
        turn("q", 2, None, None, run=0, failed=True, tokens=(0, 0)),
        turn("q", 0, "7", 1, run=1, tokens=(10, 20)),
        turn("q", 1, "5", 2, run=1, tokens=(10, 20)),
        turn("q", 2, None, None, run=1, tokens=(10, 30)),  # unparsed: a sample, no vote
    ]
    (pool,) = pools(turns, SAME).values()
    assert sorted(pool.classes.tolist()) == [-1, 0, 1, 1, 2]
    # Samples in order of runs, then of classes: run 0's 4, 5; run 1's 7, 5, unparsed.
    assert pool.classes.tolist() == [0, 1, 2, 1, -1]
    assert pool.tokens == pytest.approx((30 + 50 + 30 + 30 + 40) / 5)


def debate_turns() -> list[Turn]:
    """Two agents, one round (G = 4), two seeded runs, questions a and b. Tokens per turn:
    run 0 spends 40 on a and 80 on b (20 per turn on b); run 1 spends 100 on a."""
    turns = []
    for run, question, per_turn in ((0, "a", 10), (0, "b", 20), (1, "a", 25)):
        for r in (0, 1):
            for agent in (0, 1):
                turns.append(turn(question, agent, "1", 0, run=run, round_=r, tokens=(per_turn, 0)))
    return turns


def test_match_by_hand():
    """SamplePool of a: classes [0, 0, 1, 2, 3, 3] at 20 tokens a sample; of b: [1, 1, 1, 0, 0, 0]
    at 40; question c has no debate. maj@4 of a: 15 subsets; maj@4 of b: 15 subsets."""
    single = []
    for agent, (answer, cls) in enumerate(
        [("1", 0), ("1", 0), ("2", 1), ("3", 2), ("4", 3), ("4", 3)]
    ):
        single.append(turn("a", agent, answer, cls, tokens=(10, 10)))
    for agent, (answer, cls) in enumerate([("2", 1)] * 3 + [("1", 0)] * 3):
        single.append(turn("b", agent, answer, cls, tokens=(20, 20)))
    single.append(turn("c", 0, "1", 0))
    found_pools = pools(single, SAME)
    debate = debate_turns()
    spending = Spending(rounds=1)
    for run, q in ((0, "a"), (0, "b"), (1, "a")):
        spending.add([t for t in debate if (t.run, t.question) == (run, q)])
    tallies = tally(debate, Scoring(2, 1, (0, 1), kind="math", seed=0))
    found = match(spending, tallies, found_pools, generations=4)
    t = found.tallies
    assert t.runs == [0, 1] and t.questions == ["a", "b"]
    # Tokens: run 0 a 40 -> m = 2; run 0 b 80 / 40 -> m = 2; run 1 a 100 / 20 -> m = 5.
    assert t.num["samples_at_tokens"].tolist() == [[2, 2], [5, 0]]
    assert t.den["samples_at_tokens"].tolist() == [[1, 1], [1, 0]]
    assert t.num["debate_tokens"].tolist() == [[40, 80], [100, 0]]
    assert t.num["sample_tokens"].tolist() == [[20, 40], [20, 0]]

    def by_hand(classes: list[int], m: int) -> float:
        from itertools import combinations

        total = 0.0
        subsets = list(combinations(classes, m))
        for subset in subsets:
            counts = {c: subset.count(c) for c in set(subset)}
            top = max(counts.values())
            tied = [c for c, n in counts.items() if n == top]
            total += (0 in tied) / len(tied)
        return total / len(subsets)

    a, b = [0, 0, 1, 2, 3, 3], [1, 1, 1, 0, 0, 0]
    assert t.num["maj_at_generations"][0].tolist() == pytest.approx([by_hand(a, 4), by_hand(b, 4)])
    assert t.num["maj_at_generations"][1, 0] == pytest.approx(by_hand(a, 4))
    assert t.num["sc_at_tokens"].ravel().tolist() == pytest.approx(
        [by_hand(a, 2), by_hand(b, 2), by_hand(a, 5), 0]
    )
    # Pairs of a: (0,0) right, eight (0, wrong) ties right half the time, the rest wrong.
    assert by_hand(a, 2) == pytest.approx((1 + 8 / 2) / 15)
    assert found.clipped == 0  # run 1 on a buys 5 of 6 samples: no debate ran out of pool
    rates = t.rates()
    assert rates["generations"].tolist() == [4, 4]
    # The debate's side: every turn right, so 100% after each round; tokens through round 0
    # are half of each debate's: (20 + 40 + 50) / 3, through round 1 (40 + 80 + 100) / 3.
    assert [r["tokens"] for r in found.by_round] == pytest.approx([110 / 3, 220 / 3])
    assert [r["vote_accuracy"] for r in found.by_round] == [100.0, 100.0]
    # maj@m of the single run, m = 1..6 (both pools hold 6), at m x 30 tokens a sample.
    assert [p["samples"] for p in found.curve] == [1, 2, 3, 4, 5, 6]
    assert found.curve[0]["accuracy"] == pytest.approx(100 * (2 / 6 + 3 / 6) / 2)
    assert found.curve[1]["tokens"] == pytest.approx(60)
    # Each m's votes per question, for the curve's intervals: m = 1, a's 2/6 and b's 3/6.
    assert found.curve_votes[0].num["curve"].tolist() == [pytest.approx([2 / 6, 3 / 6])]


# ---- end to end, through the real command ------------------------------------------------

MODEL = "sim:p0=0.5,skill=0.5"
COMMON = ("--model", MODEL, "--benchmark", "arith", "--limit", "40")


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> Path:
    """A debate (N=3, T=2: G=9, two seeded runs) and a single run of K=12, both on arith."""
    where = tmp_path_factory.mktemp("budget")
    debate = ("run", *COMMON, "--agents", "3", "--rounds", "2", "--runs", "2", "--out", "deb")
    for args in (debate, ("single", "-k", "12", *COMMON, "--out", "sgl")):
        done = mad_eval(*args, cwd=where)
        assert done.returncode == 0, done.stderr
    return where


@pytest.mark.slow
def test_report_table_and_plot_agree(folders):
    """report --single writes the matched section; table --layout budget prints the same
    numbers; plot draws budget.png."""
    import pandas as pd

    done = mad_eval("report", "deb", "--single", "sgl", cwd=folders)
    assert done.returncode == 0, done.stderr
    assert "Compute-matched baselines" in done.stdout
    metrics = json.loads((folders / "deb" / "metrics.json").read_text())
    matched = metrics["matched"]
    assert matched["generations"] == 9 and matched["questions"] == 40
    assert matched["samples"] == 12 and matched["single_run"].endswith("sgl")
    for key in ("maj_at_generations", "sc_at_tokens"):
        assert 0 <= matched[key] <= 100
        low, high = matched[f"{key}_ci"]
        assert low <= matched[key] <= high
        assert 0 < matched[f"{key}_p_vs_debate"] <= 1
    assert 1 <= matched["samples_at_tokens"] <= 12
    # A debate's prompts carry its peers' replies: its tokens buy more than 12 samples.
    assert matched["clipped_share"] == 1.0 and matched["samples_at_tokens"] == 12
    assert [r["round"] for r in matched["by_round"]] == [0, 1, 2]
    assert [p["samples"] for p in matched["curve"]] == list(range(1, 13))
    for point in matched["curve"]:  # each maj@m with its 95% interval over questions
        low, high = point["accuracy_ci"]
        assert low <= point["accuracy"] <= high

    text = api.table([folders / "deb", folders / "sgl"], "budget", format="csv")
    frame = pd.read_csv(io.StringIO(text))
    assert len(frame) == 6  # one row per column of the one debate run: the single is a pool
    by_key = frame.set_index("key")
    for key in ("maj", "debate"):
        assert by_key.loc[key, "value"] == pytest.approx(metrics[key])
    for key in ("maj_at_generations", "sc_at_tokens", "samples_at_tokens", "debate_tokens"):
        row = by_key.loc[f"matched.{key}"]
        assert row["value"] == pytest.approx(matched[key])
        assert [row["ci_low"], row["ci_high"]] == pytest.approx(matched[f"{key}_ci"])
    for key in ("maj_at_generations", "sc_at_tokens"):
        row = by_key.loc[f"matched.{key}"]
        assert row["p_test"] == "vs debate"
        assert row["p_value"] == pytest.approx(matched[f"{key}_p_vs_debate"])

    # Recomputed without --single, metrics.json keeps its matched numbers: the single run
    # it names is read again.
    again = mad_eval("report", "deb", cwd=folders)
    assert again.returncode == 0, again.stderr
    kept = json.loads((folders / "deb" / "metrics.json").read_text())["matched"]
    assert kept["maj_at_generations"] == matched["maj_at_generations"]

    written = api.plot([folders / "deb", folders / "sgl"], folders / "plots")
    assert folders / "plots" / "budget.png" in written
    assert (folders / "plots" / "budget.png").stat().st_size > 0


@pytest.mark.slow
def test_pairing_errors_are_one_sentence(folders):
    """No single run, one too small, the runs given the wrong way round, another model."""
    cases = [
        (("table", "deb", "--layout", "budget"), "mad-eval single -k 9"),
        (("report", "sgl", "--single", "deb"), "not a `mad-eval single` run"),
        (("report", "deb", "--single", "deb"), "not a `mad-eval single` run"),
    ]
    small = ("single", "-k", "4", *COMMON, "--out", "small")
    other = ("single", "-k", "12", "--model", "sim:p0=0.6", "--benchmark", "arith")
    for args in (small, (*other, "--limit", "40", "--out", "other")):
        assert mad_eval(*args, cwd=folders).returncode == 0
    cases += [
        (("report", "deb", "--single", "small"), "fewer than the G = N(T+1) = 9"),
        (("table", "deb", "other", "--layout", "budget"), "no single run of"),
    ]
    for args, says in cases:
        done = mad_eval(*args, cwd=folders)
        assert done.returncode != 0
        message = " ".join(done.stderr.split())
        assert says in message, message
        assert "Traceback" not in done.stderr
