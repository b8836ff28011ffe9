"""Scoring rules (whose answer is the system's) and verl's bootstrap maj@K, each checked
against a computation done here by hand from turns.jsonl."""

from __future__ import annotations

import dataclasses
import io
import json
import re
from collections import defaultdict
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from cli_helpers import mad_eval, turns_of, without_timing
from factories import compute_metrics, turn

from mad_eval.measure.counts import tally
from mad_eval.measure.scoring import Scoring
from mad_eval.protocols import ProtocolError, check_protocol, resolve
from mad_eval.protocols.decentralized import Decentralized
from mad_eval.records import Turn
from mad_eval.reporting.results import load_run
from mad_eval.store.folder import StoreError
from mad_eval.voting.maj_at_k import bootstrap_draws, bootstrap_maj
from mad_eval.voting.rules import RULES, default_rule, get_rule

HUB_RUN = ("--agents", "3", "--rounds", "2", "--benchmark", "arith", "--limit", "20")


def hub_accuracy(turns: list[dict], hub: int, rounds: int) -> list[float]:
    """Per round, the share of questions whose hub answered right (failed or unparsed: wrong)."""
    out = []
    for r in range(rounds + 1):
        mine = [t for t in turns if t["round"] == r and t["agent"] == hub]
        right = [t["error"] is None and t["answer"] is not None and t["correct"] for t in mine]
        out.append(100 * sum(right) / len(right))
    return out


@pytest.fixture(scope="module")
def hub_runs(tmp_path_factory) -> Path:
    """The same centralized debate scored by its hub and by the default vote."""
    root = tmp_path_factory.mktemp("hub")
    for folder, protocol in (("h", "centralized:score=hub"), ("p", "centralized")):
        result = mad_eval("run", "--protocol", protocol, *HUB_RUN, "--out", folder, cwd=root)
        assert result.returncode == 0, result.stderr
        (root / f"{folder}.out").write_text(result.stdout)
    return root


@pytest.mark.slow
def test_hub_scoring_is_the_hubs_own_accuracy_by_hand(hub_runs):
    turns = turns_of(hub_runs / "h")
    metrics = json.loads((hub_runs / "h" / "metrics.json").read_text())
    manifest = json.loads((hub_runs / "h" / "manifest.json").read_text())
    assert manifest["protocol"]["score"] == "hub" and metrics["score"] == "hub"
    by_hand = hub_accuracy(turns, hub=0, rounds=2)
    assert [row["vote_accuracy"] for row in metrics["rounds"]] == pytest.approx(by_hand)
    assert metrics["maj"] == pytest.approx(by_hand[0])
    assert metrics["debate"] == pytest.approx(by_hand[2])
    assert metrics["delta"] == pytest.approx(by_hand[2] - by_hand[0])
    assert "score=hub" in (hub_runs / "h.out").read_text()  # the console header says so


def test_the_rule_changes_the_scoring_never_the_debate(hub_runs):
    hub, default = turns_of(hub_runs / "h"), turns_of(hub_runs / "p")
    assert without_timing(hub) == without_timing(default)
    scored = json.loads((hub_runs / "h" / "metrics.json").read_text())
    voted = json.loads((hub_runs / "p" / "metrics.json").read_text())
    # A default run is scored as before rules existed: the plurality of all agents.
    assert voted["score"] == "plurality"
    assert voted == compute_metrics(
        [Turn(**t) for t in default], Scoring(3, 2, (0, 1, 2), kind="math", seed=0, hub=0)
    )
    votes = [row["vote_accuracy"] for row in voted["rounds"]]
    hubs = [row["vote_accuracy"] for row in scored["rounds"]]
    assert votes != pytest.approx(hubs)  # on this seed the hub and the vote disagree
    # The hub's own accuracy and the agents' numbers do not depend on the rule.
    for a, b in zip(scored["rounds"], voted["rounds"], strict=True):
        assert a["hub_accuracy"] == b["hub_accuracy"] and a["agent_accuracy"] == b["agent_accuracy"]
    assert scored["transitions"] == voted["transitions"]


def test_tables_name_the_rule_of_a_row_that_is_not_plurality(hub_runs):
    args = ("table", "h", "p", "--label", "h=leader", "--label", "p=vote")
    md = mad_eval(*args, cwd=hub_runs)
    assert md.returncode == 0, md.stderr
    assert "| leader (score=hub) |" in md.stdout and "| vote |" in md.stdout
    assert "_score=hub: the hub's own answer in every round" in md.stdout
    csv = mad_eval(*args, "--format", "csv", "--replicates", "200", cwd=hub_runs)
    frame = pd.read_csv(io.StringIO(csv.stdout)).set_index(["method", "metric"])
    assert frame.loc[("leader", "Maj"), "score"] == "hub"
    assert frame.loc[("vote", "Maj"), "score"] == "plurality"
    scored = json.loads((hub_runs / "h" / "metrics.json").read_text())
    assert frame.loc[("leader", "Debate"), "value"] == pytest.approx(scored["debate"])
    tex = mad_eval(*args, "--format", "latex", cwd=hub_runs).stdout
    assert "leader (score=hub) &" in tex and "% score=hub: the hub's own answer" in tex


def test_a_label_that_names_the_rule_already_says_it_once(hub_runs):
    """The offline demo labels its hub-scored row "centralized (hub scores)"."""
    label = "centralized (hub scores)"
    md = mad_eval("table", "h", "p", "--label", f"h={label}", "--label", "p=vote", cwd=hub_runs)
    assert md.returncode == 0, md.stderr
    assert f"| {label} |" in md.stdout and "(score=hub)" not in md.stdout
    assert "_score=hub: the hub's own answer in every round" in md.stdout  # still explained


def test_hub_rule_counts_a_failed_or_unparsed_hub_as_wrong():
    cases = [  # question, round, agents' (answer, correct) or "failed"; the hub is agent 0
        ("q1", 0, ["failed", ("4", True), ("4", True)]),  # vote right, hub failed: wrong
        ("q2", 0, [(None, False), ("4", True), ("4", True)]),  # hub unparsed: wrong
        ("q3", 0, [("5", False), ("4", True), ("4", True)]),  # hub wrong
        ("q4", 0, [("4", True), ("5", False), ("5", False)]),  # hub right, vote wrong
        ("q5", 0, ["failed", "failed", "failed"]),  # nobody answered: no vote; the hub is wrong
    ]
    turns = [
        turn(q, r, a, None, False, failed=True) if cell == "failed" else turn(q, r, a, *cell)
        for q, r, cells in cases
        for a, cell in enumerate(cells)
    ]
    found = tally(turns, Scoring(3, 0, (0, 1, 2), kind="math", seed=0, hub=0, rule="hub"))
    assert found.num["vote0"].tolist() == [[0, 0, 0, 1, 0]]
    assert found.den["vote0"].tolist() == [[1, 1, 1, 1, 1]]
    voted = tally(turns, Scoring(3, 0, (0, 1, 2), kind="math", seed=0, hub=0))
    assert voted.num["vote0"].tolist() == [[1, 1, 1, 0, 0]]
    assert voted.den["vote0"].tolist() == [[1, 1, 1, 1, 0]]  # plurality skips q5 as before
    m = compute_metrics(turns, Scoring(3, 0, (0, 1, 2), kind="math", seed=0, hub=0, rule="hub"))
    assert m["score"] == "hub" and m["maj"] == pytest.approx(20.0)
    # A failed hub turn is wrong in every hub number: the hub's accuracy is the hub-scored vote.
    assert m["rounds"][0]["hub_accuracy"] == pytest.approx(20.0)


def test_summaries_use_the_consensus_rule_by_default_and_may_use_the_hub():
    def summary(agent: int, text: str, score: float) -> Turn:
        scores = {"rouge1": score, "rouge2": score, "rougeL": score}
        return dataclasses.replace(turn("q", 0, agent, text, False), correct=None, rouge=scores)

    texts = ["ships sail at dawn", "the ships sail at dawn", "ships sail at dawn today"]
    turns = [summary(i, text, 0.1 * (i + 1)) for i, text in enumerate(texts)]
    consensus = tally(turns, Scoring(3, 0, (0, 1, 2), kind="summary", seed=0))
    assert consensus.num["rougeL0"][0, 0] == pytest.approx(0.1)  # agent 0's is central
    hub = tally(turns, Scoring(3, 0, (0, 1, 2), kind="summary", seed=0, hub=2, rule="hub"))
    assert hub.num["rougeL0"][0, 0] == pytest.approx(0.3)
    assert default_rule("summary") == "consensus" and default_rule("choice") == "plurality"


def test_unknown_rules_and_hub_scoring_without_a_hub_are_refused():
    with pytest.raises(
        ValueError, match=re.escape(f"unknown scoring rule 'best'; known: {', '.join(RULES)}.")
    ):
        get_rule("best")
    with pytest.raises(ValueError, match=r"'plurlity' \(did you mean 'plurality'\?\)"):
        get_rule("plurlity")
    assert {"plurality", "hub", "consensus", "unanimity", "borda"} <= set(RULES)
    with pytest.raises(ProtocolError, match="centralized: unknown scoring rule 'best'"):
        check_protocol(resolve("centralized:score=best").protocol, 3)

    class Scored(Decentralized):
        name = "scored"
        score = "hub"

    with pytest.raises(
        ProtocolError,
        match=r"score=hub needs a protocol with a hub, such as centralized; scored has none\.",
    ):
        check_protocol(Scored(), 3)
    check_protocol(resolve("centralized_hub").protocol, 3)
    assert resolve("centralized_hub").protocol.score == "hub"
    assert resolve("centralized").protocol.params() == {"hub": 0}  # manifests as before
    # Every protocol takes score=...; the hub rule only where there is a hub.
    for text in ("sparse:score=hub", "heterogeneous:topology=decentralized,score=hub"):
        with pytest.raises(ProtocolError, match=r"score=hub needs a protocol with a hub"):
            check_protocol(resolve(text).protocol, 3)
    assert resolve("decentralized:score=plurality").protocol.score == "plurality"
    mixed = resolve("heterogeneous:topology=centralized,hub=1,score=hub").protocol
    check_protocol(mixed, 3)
    assert (mixed.score, mixed.hub) == ("hub", 1)


def test_the_cli_refuses_an_unknown_rule_in_one_sentence(tmp_path):
    result = mad_eval("run", "--protocol", "centralized:score=best", "--limit", "2", cwd=tmp_path)
    assert result.returncode == 2
    known = ", ".join(RULES)
    assert f"unknown scoring rule 'best'; known: {known}." in result.stderr
    assert "Traceback" not in result.stderr


def test_the_manifest_names_the_rule_and_old_runs_keep_theirs(tmp_path):
    golden = Path(__file__).parent / "golden" / "tables" / "alpha"
    assert load_run(golden).metrics["score"] == "plurality"  # made before rules existed
    manifest = json.loads((golden / "manifest.json").read_text())
    manifest["protocol"] |= {"hub": 0, "score": "hub"}
    folder = tmp_path / "alpha"
    folder.mkdir()
    (folder / "turns.jsonl").write_text((golden / "turns.jsonl").read_text())
    (folder / "manifest.json").write_text(json.dumps(manifest))
    turns = [Turn(**json.loads(line)) for line in (golden / "turns.jsonl").read_text().splitlines()]
    run = load_run(folder)
    assert run.metrics["score"] == "hub" and run.score == "hub"
    hub0 = [t for t in turns if t.agent == 0 and t.round == 0]
    assert run.metrics["maj"] == pytest.approx(100 * sum(bool(t.correct) for t in hub0) / len(hub0))
    for protocol, message in (
        ({"score": "best"}, f"names scoring rule 'best', not one of: {', '.join(RULES)}."),
        ({"score": "hub", "hub": None}, "names scoring rule 'hub', but its protocol has no hub."),
    ):
        manifest["protocol"] |= protocol
        (folder / "manifest.json").write_text(json.dumps(manifest))
        with pytest.raises(StoreError, match=re.escape(message)):
            load_run(folder)


# ---- maj@K, verl's way ---------------------------------------------------------------------


def verl_maj_at_k(samples: list[tuple[str, float]]) -> float:
    """verl's maj@K/mean for one question, written out as verl writes it: the global seed,
    1000 sequential draws, counts in a dict, the first value of the winning prediction."""
    np.random.seed(42)
    values = []
    for _ in range(1000):
        drawn = [samples[i] for i in np.random.choice(len(samples), size=len(samples))]
        by_prediction: dict[str, list[float]] = defaultdict(list)
        for prediction, value in drawn:
            by_prediction[prediction].append(value)
        counts = {p: len(v) for p, v in by_prediction.items()}
        values.append(by_prediction[max(counts, key=counts.get)][0])
    return float(np.mean(values))


def as_samples(turns: list) -> list[tuple[str, float]]:
    return [("[INVALID]" if t.answer is None else t.answer, float(bool(t.correct))) for t in turns]


@pytest.mark.parametrize("k", [1, 2, 3, 8, 16])
def test_one_draw_of_all_resamples_is_verls_thousand_draws(k):
    np.random.seed(42)
    sequential = np.stack([np.random.choice(k, size=k, replace=True) for _ in range(1000)])
    assert np.array_equal(bootstrap_draws(k), sequential)


@pytest.mark.parametrize(
    "answers",
    [
        [("7", True), ("8", False), ("8", False), ("7", True)],  # a tie in most draws
        [(None, False), (None, False), ("3", True), ("4", False)],  # unparsed: one answer
        [(None, False), ("[INVALID]", False), ("5", True)],  # verl's no-answer text: the same
        [("1", False), ("2", True), ("3", False), ("4", False), ("5", False), ("2", True)],
        [(None, False)] * 3,
        [("x", True)],
    ],
)
def test_bootstrap_maj_is_verls_loop(answers):
    turns = [turn("q", 0, i, a, c) for i, (a, c) in enumerate(answers)]
    assert bootstrap_maj(turns) == pytest.approx(verl_maj_at_k(as_samples(turns)), abs=1e-12)


def test_bootstrap_maj_differs_from_the_exact_vote_on_a_tie():
    # Exact: "7" and "8" tie 2-2 (the seeded tie-break picks one); verl's draws split them.
    turns = [turn("q", 0, i, a, c) for i, (a, c) in enumerate([("7", True), ("8", False)] * 2)]
    assert 0.3 < bootstrap_maj(turns) < 0.7


@pytest.mark.slow
def test_single_run_reports_verls_maj_at_k_next_to_the_exact_one(tmp_path):
    result = mad_eval(
        "single", "-k", "8", "--limit", "20", "--runs", "2", "--out", "s", cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    assert "maj@8 (verl bootstrap)" in result.stdout
    turns = [Turn(**t) for t in turns_of(tmp_path / "s")]
    metrics = json.loads((tmp_path / "s" / "metrics.json").read_text())
    per_run = []
    for run in (0, 1):
        by_question = defaultdict(list)
        for t in sorted(turns, key=lambda t: t.agent):
            if t.run == run:
                by_question[t.question].append(t)
        values = [verl_maj_at_k(as_samples(mine)) for mine in by_question.values()]
        per_run.append(100 * float(np.mean(values)))
    assert metrics["maj_at_k_bootstrap"] == pytest.approx(np.mean(per_run), abs=1e-9)
    assert metrics["maj_at_k_bootstrap"] != pytest.approx(metrics["maj_at_k"])
    assert metrics["maj_at_k"] == metrics["maj"]  # the exact estimator is kept

    # The single layout names its estimator; the bootstrap one is a layout of its own.
    exact = mad_eval("table", "s", "--layout", "single", cwd=tmp_path)
    assert "maj@K is exact: the vote of all K answers" in exact.stdout
    boot = mad_eval("table", "s", "--layout", "single-bootstrap", "--format", "csv", cwd=tmp_path)
    assert boot.returncode == 0, boot.stderr
    frame = pd.read_csv(io.StringIO(boot.stdout)).set_index("metric")
    assert frame.loc["maj@K (bootstrap)", "value"] == pytest.approx(metrics["maj_at_k_bootstrap"])
    assert frame.loc["maj@K (bootstrap)", "ci_low"] <= metrics["maj_at_k_bootstrap"]
    md = mad_eval("table", "s", "--layout", "single-bootstrap", cwd=tmp_path).stdout
    assert "(K=8) maj@K (bootstrap) |" in md.splitlines()[0]
    assert "verl's maj@K/mean" in md


def test_the_bootstrap_layout_refuses_a_debate(tmp_path):
    debate = mad_eval(
        "run", "--agents", "2", "--rounds", "1", "--limit", "2", "--out", "d", cwd=tmp_path
    )
    assert debate.returncode == 0, debate.stderr
    refused = mad_eval("table", "d", "--layout", "single-bootstrap", cwd=tmp_path)
    assert refused.returncode == 2
    assert "verl's bootstrap maj@K is kept for runs without debate" in refused.stderr


def test_resuming_under_another_scoring_rule_is_refused(tmp_path):
    first = mad_eval("run", "--protocol", "centralized", "--agents", "3", "--rounds", "1",
                     "--limit", "2", "--out", "r", cwd=tmp_path)  # fmt: skip
    assert first.returncode == 0, first.stderr
    again = mad_eval("run", "--protocol", "centralized:score=hub", "--agents", "3", "--rounds",
                     "1", "--limit", "2", "--out", "r", cwd=tmp_path)  # fmt: skip
    assert again.returncode == 2
    assert "protocol score is 'plurality' there, 'hub' here" in again.stderr


def test_a_tie_break_draws_what_a_generator_seeded_at_once_would():
    import random

    from mad_eval.records import derive_seed
    from mad_eval.voting.ties import TieBreak

    for seed in range(200):
        for options in (["a"], ["a", "b"], ["a", "b", "c", "d"]):
            parts = (seed, "vote", 0, f"q{seed}", 1)
            assert TieBreak(*parts).choice(options) == random.Random(derive_seed(*parts)).choice(
                options
            )
