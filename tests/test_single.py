"""`mad-eval single`: K independent samples per question through the same engine and store,
reported as mean@K and maj@K."""

from __future__ import annotations

import json
from collections import defaultdict

import pytest
from cli_helpers import mad_eval, turns_of, without_timing

from mad_eval.records import derive_seed


def test_single_samples_k_answers_and_reports_mean_and_maj_at_k(tmp_path):
    result = mad_eval(
        "single", "-k", "4", "--limit", "6", "--runs", "2", "--out", "s", cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    assert "4 independent samples (sim), no debate" in result.stdout
    assert "mean@4" in result.stdout and "maj@4" in result.stdout
    turns = turns_of(tmp_path / "s")
    assert len(turns) == 2 * 6 * 4
    assert {t["round"] for t in turns} == {0} and {t["agent"] for t in turns} == {0, 1, 2, 3}
    assert all(t["seed"] == derive_seed(0, t["run"], t["question"], 0, t["agent"]) for t in turns)
    assert all(t["sees"] == [] for t in turns)

    metrics = json.loads((tmp_path / "s" / "metrics.json").read_text())
    by_run = defaultdict(list)
    for t in turns:
        by_run[t["run"]].append(t["correct"])
    means = [100 * sum(v) / len(v) for v in by_run.values()]
    assert metrics["mean_at_k"] == pytest.approx(sum(means) / 2)
    assert metrics["maj_at_k"] == metrics["maj"] == metrics["rounds"][0]["vote_accuracy"]
    manifest = json.loads((tmp_path / "s" / "manifest.json").read_text())
    assert manifest["protocol"]["name"] == "single"
    assert manifest["config"]["rounds"] == 0 and manifest["config"]["agents"] == 4


def test_single_samples_are_a_debates_round_zero(tmp_path):
    """Same seeds, same prompts: a debate's round 0 is K independent samples, so maj@K of
    `single` equals Maj of a debate with as many agents."""
    assert mad_eval("single", "-k", "3", "--limit", "4", "--out", "s", cwd=tmp_path).returncode == 0
    debate = mad_eval(
        "run", "--agents", "3", "--rounds", "1", "--limit", "4", "--out", "d", cwd=tmp_path
    )
    assert debate.returncode == 0, debate.stderr
    first = [t for t in turns_of(tmp_path / "d") if t["round"] == 0]
    ignore = ("prefix_tokens",)  # the debate's prompts share prefixes among other agents too
    strip = lambda ts: [{k: v for k, v in t.items() if k not in ignore} for t in without_timing(ts)]  # noqa: E731
    assert strip(turns_of(tmp_path / "s")) == strip(first)
    single = json.loads((tmp_path / "s" / "metrics.json").read_text())
    run = json.loads((tmp_path / "d" / "metrics.json").read_text())
    assert single["maj_at_k"] == run["maj"]


def test_single_default_folder_and_bad_samples(tmp_path):
    result = mad_eval("single", "-k", "2", "--limit", "2", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "results" / "arith-single-k2-sim-l2" / "turns.jsonl").is_file()
    bad = mad_eval("single", "-k", "0", cwd=tmp_path)
    assert bad.returncode == 2
    assert "--samples must be at least 1, got 0." in bad.stderr


def test_single_is_one_property_every_reader_agrees_on(tmp_path, monkeypatch):
    """A run is single when its resolved protocol is of the single class and it has no round
    after round 0 (settings.config.is_single): a plan, a loaded run, the folder's name and an
    experiment's cell say the same however the protocol is spelled; once they disagreed on
    `--protocol single:score=plurality --rounds 0` (single to the engine, not to load_runs)."""
    import mad_eval as api
    from mad_eval.debate.plan import make_plan
    from mad_eval.experiments.cells import Cell
    from mad_eval.reporting.pairing import pairing_sinks
    from mad_eval.store.manifest import RunManifest

    monkeypatch.chdir(tmp_path)
    cases = [
        ("single:score=plurality", 0, True),
        ("single", 0, True),
        ("single", 1, False),  # the preset's documented multi-round use: each round afresh
        ("decentralized", 0, False),  # a debate stopped at round 0 is no single run
    ]
    for protocol, rounds, single in cases:
        settings = {"protocol": protocol, "rounds": rounds, "agents": 3, "limit": 2}
        plan = make_plan(settings)
        run = api.run(**settings)  # in its default folder
        manifest = RunManifest.read(run.root / "manifest.json")
        loaded = api.load_runs([run.root])[0]
        cell = Cell("c", {}, settings)
        sinks = {type(sink).__name__ for sink in pairing_sinks(manifest)}
        said = (plan.single, run.single, loaded.single, cell.single, sinks == {"SamplePooling"})
        assert said == (single,) * 5, (protocol, rounds, said)
        assert ("-k3-" in run.root.name) is single, run.root
    assert (tmp_path / "results" / "arith-single-k3-sim-l2").is_dir()  # named as before
