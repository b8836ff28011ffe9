"""Cost and the Debate-or-Vote diagnostics on a hand-built debate whose numbers were worked
out by hand (the comments show the sums), and the drift test on simulated agents."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from factories import compute_metrics, turn

import mad_eval
from mad_eval.grading.rubric import JUDGE_CRITERIA as CRITERIA
from mad_eval.measure.compute import Measuring
from mad_eval.measure.counts import tally, tally_verdicts
from mad_eval.measure.prices import Price, load_prices
from mad_eval.measure.scoring import Scoring
from mad_eval.records import Turn, Verdict

THREE = Scoring(3, 2, (0, 1, 2), kind="math", seed=0)  # three agents, two rounds

X, Y, A = ("x", False), ("y", False), ("a", False)
R = ("4", True)
# 3 agents, 2 debate rounds; per question its rounds, each the agents' (answer, correct).
CASE = {
    # 1 voter right in round 0; the wrong plurality x wins over agent 0, unanimous at round 1.
    "q1": [[R, X, X], [X, X, X], [X, X, X]],
    # 2 right; agent 2 adopts the right plurality, then leaves it again in round 2.
    "q2": [[R, R, Y], [R, R, R], [R, R, Y]],
    # 1 right under a wrong plurality a; agent 2 keeps its answer, the others come to it.
    "q3": [[A, A, R], [R, R, R], [R, R, R]],
}


def case_turns() -> list[Turn]:
    out = []
    for question, rounds in CASE.items():
        for r, agents in enumerate(rounds):
            for agent, (answer, correct) in enumerate(agents):
                t = turn(question, r, agent, answer, correct)
                prompt = 10 * (r + 1)  # 10, 20, 30 by round; 5 shared with agent 0's prompt
                t = dataclasses.replace(
                    t,
                    prompt_tokens=prompt,
                    completion_tokens=5,
                    context_tokens=prompt,
                    prefix_tokens=5 if agent else 0,
                    latency=1.0 + 0.5 * agent,  # 1, 1.5, 2: a round sums 4.5 and waits 2
                    answer_class=None if answer is None else (0 if correct else ord(answer)),
                )
                if (question, r, agent) == ("q1", 0, 0):
                    t = dataclasses.replace(t, attempts=2)  # one retry
                out.append(t)
    return out


@pytest.fixture(scope="module")
def metrics() -> dict:
    return compute_metrics(case_turns(), Scoring(3, 2, (0, 1, 2), kind="math", seed=0))


def test_votes_of_the_case(metrics: dict) -> None:
    assert metrics["maj"] == pytest.approx(100 / 3)  # q2
    assert metrics["debate"] == pytest.approx(200 / 3)  # q2, q3
    assert [r["agent_accuracy"] for r in metrics["rounds"]] == pytest.approx(
        [400 / 9, 600 / 9, 500 / 9]
    )


def test_margins_split_delta_by_how_many_were_right_before_debate(metrics: dict) -> None:
    rows = {row["right_in_round0"]: row for row in metrics["margins"]}
    assert sorted(rows) == [0, 1, 2, 3]
    assert [rows[k]["questions"] for k in range(4)] == [0, 2, 1, 0]
    assert rows[1]["share"] == pytest.approx(200 / 3)
    assert (rows[1]["maj"], rows[1]["debate"], rows[1]["delta"]) == pytest.approx((0, 50, 50))
    assert (rows[2]["maj"], rows[2]["debate"], rows[2]["delta"]) == pytest.approx((100, 100, 0))
    assert rows[0]["maj"] is None  # no question had 0 right
    # Each k's part of Delta: q3's gain is one question of three; the parts sum to Delta.
    assert rows[1]["delta_part"] == pytest.approx(100 / 3)
    assert sum(rows[k]["delta_part"] for k in range(4)) == pytest.approx(metrics["delta"])


def test_drift_and_aggregation_decompose_delta(metrics: dict) -> None:
    assert metrics["drift"] == pytest.approx(100 / 9)  # 55.6 - 44.4
    # The vote over the mean agent: 33.3 - 44.4 before, 66.7 - 55.6 after.
    assert metrics["aggregation"] == pytest.approx(200 / 9)
    assert metrics["drift"] + metrics["aggregation"] == pytest.approx(metrics["delta"])
    moves = metrics["transitions"]
    assert [m["drift"] for m in moves] == pytest.approx([200 / 9, -100 / 9])
    low, high = metrics["drift_ci"]
    assert low <= metrics["drift"] <= high
    assert 0 < metrics["drift_p"] <= 1
    assert "drift_ci" in moves[0] and "drift_p" in moves[0]


def test_oracle_gap_counts_right_answers_the_vote_lost(metrics: dict) -> None:
    assert metrics["oracle_gap"] == pytest.approx(100 / 3)  # q1: agent 0 right in round 0


def test_conformity(metrics: dict) -> None:
    first, second = metrics["transitions"]
    assert first["adopt_right"] == pytest.approx(100)  # q2's agent 2
    assert first["adopt_wrong"] == pytest.approx(50)  # q1's agent 0 did, q3's agent 2 not
    assert first["c2i_wrong"] == pytest.approx(50)  # the same two, right before
    assert first["c2i_right"] == pytest.approx(0)  # q2's agents 0 and 1 stayed right
    assert second["adopt_right"] is None  # every agent held round 1's plurality
    assert second["c2i_right"] == pytest.approx(100 / 6)  # q2's agent 2, of 6 right agents
    whole = metrics["conformity"]
    assert (whole["adopt_right"], whole["adopt_wrong"]) == pytest.approx((100, 50))
    assert (whole["c2i_right"], whole["c2i_wrong"]) == pytest.approx((12.5, 50))


def test_stopping_replayed(metrics: dict) -> None:
    stops = metrics["stopping"]
    assert [s["accuracy"] for s in stops] == pytest.approx([100 / 3, 200 / 3, 200 / 3])
    assert [s["tokens"] for s in stops] == pytest.approx([45, 120, 225])
    assert [s["generations"] for s in stops] == pytest.approx([3, 6, 9])
    unanimous = metrics["stop_unanimous"]
    assert unanimous["accuracy"] == pytest.approx(200 / 3)  # every question stops at round 1
    assert unanimous["round"] == pytest.approx(1)
    assert unanimous["tokens"] == pytest.approx(120)
    assert unanimous["generations"] == pytest.approx(6)
    assert unanimous["tokens_saved"] == pytest.approx(100 * (1 - 120 / 225))
    assert unanimous["delta"] == pytest.approx(0)


def test_cost_per_question(metrics: dict) -> None:
    cost = metrics["cost"]
    assert cost["generations"] == pytest.approx(9)
    assert cost["requests"] == pytest.approx(28 / 3)  # one retry on one question of three
    assert cost["prompt_tokens"] == pytest.approx(180)  # 3 x (10 + 20 + 30)
    assert cost["completion_tokens"] == pytest.approx(45)
    assert cost["tokens"] == pytest.approx(225)
    assert cost["reasoning_tokens"] is None  # the server counted none
    assert cost["cached_tokens"] == pytest.approx(30)  # 5 for each of agents 1 and 2
    assert cost["prefix_share"] == pytest.approx(100 * 30 / 180)
    assert cost["latency"] == pytest.approx(13.5)
    assert cost["wall_latency"] == pytest.approx(6)  # each round waits for agent 2
    by_round = metrics["cost_by_round"]
    assert [r["prompt_tokens"] for r in by_round] == pytest.approx([30, 60, 90])
    assert [r["prefix_share"] for r in by_round] == pytest.approx([100 / 3, 50 / 3, 100 / 9])
    assert "usd_per_1k" not in cost  # no prices given


def test_cost_in_money() -> None:
    price = Price(input=1.0, output=2.0, cached_input=0.5)
    measuring = Measuring([0], ["q1", "q2", "q3"], THREE, price=price)
    for question in CASE:
        measuring.add([t for t in case_turns() if t.question == question])
    cost = measuring.metrics()["cost"]
    # (150 fresh x $1 + 30 cached x $0.5 + 45 out x $2) per 1M tokens, for 1,000 questions.
    assert cost["usd_per_1k"] == pytest.approx(0.255)


def test_judge_cost_is_apart_from_the_agents() -> None:
    turns = case_turns()
    setting = {"judge": "sim_judge:x"}

    def verdict(question: str, agent: int) -> Verdict:
        scores = dict.fromkeys(CRITERIA, 1)
        return Verdict(
            0, question, 1, agent, setting, "", ["ok"], scores, 4, None, None, 1, 100, 20, 2.0
        )

    verdicts = [verdict("q1", 0), verdict("q1", 1), verdict("q2", 0)]
    found = tally_verdicts(verdicts, tally(turns, THREE), THREE)
    rates = found.rates()
    assert rates["judge_ptok"][0] == pytest.approx(150)  # 200 on q1, 100 on q2
    assert rates["judge_gen"][0] == pytest.approx(1.5)
    assert rates["ptok"][0] == pytest.approx(180)  # the agents' own, untouched


def test_prices_file(tmp_path: Path) -> None:
    path = tmp_path / "prices.toml"
    path.write_text(
        'input = 0.1\noutput = 0.4\n[models."openai:big"]\ninput = 1\noutput = 4\n'
        "cached_input = 0.25\n"
    )
    prices = load_prices(path)
    assert prices.of(["sim:p0=0.5"]) == Price(0.1, 0.4, 0.1)  # cached at the input price
    assert prices.of(["openai:big"]) == Price(1, 4, 0.25)
    with pytest.raises(ValueError, match="one price"):
        prices.of(["openai:big", "sim:p0=0.5"])
    path.write_text("input = 0.1\noutptu = 3\n")
    with pytest.raises(ValueError, match="outptu"):
        load_prices(path)
    with pytest.raises(ValueError, match="does not exist"):
        load_prices(tmp_path / "nope.toml")


@pytest.mark.slow
@pytest.mark.parametrize(("skill", "drifts"), [(0.0, False), (0.7, True)])
def test_drift_is_zero_for_a_martingale_and_positive_with_skill(
    tmp_path: Path, skill: float, drifts: bool
) -> None:
    """The theory: without critique skill, debate is a martingale in mean agent accuracy;
    with it, agents drift towards the gold. 400 debates (100 questions, 4 seeded runs) tell
    them apart."""
    run = mad_eval.run(
        model=f"sim:p0=0.5,skill={skill}",
        benchmark="arith",
        runs=4,
        agents=5,
        rounds=2,
        out=tmp_path / "run",
    )
    low, high = run.metrics["drift_ci"]
    if drifts:
        assert low > 0 and run.metrics["drift_p"] < 0.01
    else:
        assert low < 0 < high and run.metrics["drift_p"] > 0.05


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    root = tmp_path_factory.mktemp("runs")
    for skill in (0.0, 0.7):
        mad_eval.run(
            model=f"sim:p0=0.5,skill={skill}",
            benchmark="arith",
            limit=30,
            runs=2,
            agents=3,
            rounds=2,
            out=root / f"skill{skill}",
        )
    return [root / "skill0.0", root / "skill0.7"]


@pytest.mark.slow
@pytest.mark.parametrize("layout", ["cost", "margin", "drift", "conformity", "stopping"])
def test_every_layout_value_is_a_number_of_metrics_json(two_runs: list[Path], layout: str) -> None:
    from mad_eval.measure.schema import lookup
    from mad_eval.reporting.tables import render, tidy

    runs = mad_eval.load_runs(two_runs)
    frame = tidy(runs, layout, replicates=200)
    assert not frame.empty
    for _, row in frame.iterrows():
        run = next(r for r in runs if str(r.root) == row["run_dir"])
        value = lookup(run.metrics, row["key"])[0]
        assert (value is None and row["value"] != row["value"]) or row["value"] == pytest.approx(
            value
        ), (layout, row["key"])
    markdown = render(frame, "md")
    header = markdown.splitlines()[0]
    assert header.count("|") == len(frame["metric"].unique()) + 2  # no header breaks a column


def test_drift_row_is_tested_as_metrics_json_tests_it(two_runs: list[Path]) -> None:
    from mad_eval.reporting.tables import tidy

    runs = mad_eval.load_runs(two_runs)
    frame = tidy(runs, "drift")
    row = frame[(frame["key"] == "drift") & (frame["run_dir"] == str(runs[1].root))].iloc[0]
    assert row["p_value"] == pytest.approx(runs[1].metrics["drift_p"])
    assert row["p_test"] == "round2.agent_accuracy vs round0.agent_accuracy"
    assert [row["ci_low"], row["ci_high"]] == pytest.approx(runs[1].metrics["drift_ci"])


@pytest.mark.slow
def test_money_only_with_prices(two_runs: list[Path], tmp_path: Path) -> None:
    from mad_eval.reporting.tables import tidy

    assert "$ / 1k q" not in set(tidy(mad_eval.load_runs(two_runs), "cost")["metric"])
    prices = tmp_path / "prices.toml"
    prices.write_text("input = 1.0\noutput = 2.0\n")
    runs = mad_eval.load_runs(two_runs, prices=prices)
    frame = tidy(runs, "cost", replicates=200)
    money = frame[(frame["metric"] == "$ / 1k q") & (frame["part"] == "all")]
    cost = runs[0].metrics["cost"]
    # No cached price given: every prompt token at the input price.
    expected = (cost["prompt_tokens"] * 1.0 + cost["completion_tokens"] * 2.0) / 1000
    assert money["value"].iloc[0] == pytest.approx(expected)


@pytest.mark.slow
def test_figures_of_the_diagnostics(two_runs: list[Path], tmp_path: Path) -> None:
    from mad_eval.reporting.plots import draw

    written = {p.name for p in draw(mad_eval.load_runs(two_runs), tmp_path, replicates=200)}
    assert {"margin.png", "drift.png", "stopping.png"} <= written


def test_a_judged_run_shows_the_judges_cost_apart(tmp_path: Path) -> None:
    from mad_eval.reporting.tables import tidy

    folder = tmp_path / "run"
    mad_eval.run(model="sim:p0=0.5", benchmark="arith", limit=6, agents=3, rounds=1, out=folder)
    judged = mad_eval.judge(folder, "sim-judge")
    cost = judged.metrics["judge_cost"]
    assert cost["generations"] == pytest.approx(3)  # one verdict per round-1 turn
    frame = tidy([judged], "cost", replicates=200)
    judge = frame[frame["part"] == "judge"].set_index("metric")["value"]
    assert judge["calls"] == pytest.approx(3)
    assert judge["tokens"] == pytest.approx(cost["tokens"])
    agents = frame[frame["part"] == "all"].set_index("metric")["value"]
    assert agents["calls"] == pytest.approx(6)  # the agents' own, without the judge's


def test_a_tied_round_has_no_plurality_to_conform_to() -> None:
    """Round 0 splits 1-1 (and one unparsed): nobody can adopt or be talked out of a
    plurality in round 1, so conformity has nothing to count."""
    rows = [[R, X, (None, False)], [X, X, X]]
    turns = [
        dataclasses.replace(
            turn("q", r, a, answer, correct),
            answer_class=None if answer is None else (0 if correct else 1),
        )
        for r, agents in enumerate(rows)
        for a, (answer, correct) in enumerate(agents)
    ]
    m = compute_metrics(turns, Scoring(3, 1, (0, 1, 2), kind="math", seed=0))
    assert m["conformity"]["adopt_right"] is None and m["conformity"]["adopt_wrong"] is None
    assert m["conformity"]["c2i_wrong"] is None and m["conformity"]["c2i_right"] is None
    # The margins still count it: one voter right, and the debate lost nothing it had.
    assert m["margins"][1]["questions"] == 1
