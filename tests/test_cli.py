"""End to end: the real `mad-eval` command on the simulated backend and a local server."""

from __future__ import annotations

import json
import signal
from collections import Counter

import pytest
from cli_helpers import mad_eval, small_run, start, turns_of, wait_for_lines, without_timing
from factories import compute_metrics
from stub_server import StubServer

from mad_eval.measure.scoring import Scoring
from mad_eval.records import Turn, derive_seed


@pytest.mark.slow
def test_default_run_is_offline_and_reports_everything(tmp_path):
    result = mad_eval(
        "run",
        "--protocol",
        "decentralized",
        "--agents",
        "5",
        "--rounds",
        "3",
        "--limit",
        "12",
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert "simulated agents" in result.stdout
    for word in ("Maj", "Debate", "Δ", "correct→incorrect", "incorrect→correct"):
        assert word in result.stdout
    run_dir = tmp_path / "results" / "arith-decentralized-n5-t3-sim-l12"
    turns = turns_of(run_dir)
    assert len(turns) == 12 * 5 * 4
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert {"maj", "debate", "delta", "rounds", "transitions", "unparsed", "failed_turns"} <= set(
        metrics
    )
    assert len(metrics["rounds"]) == 4 and len(metrics["transitions"]) == 3
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["config"]["agents"] == 5 and manifest["config"]["model"] == "sim"
    assert len(manifest["benchmark"]["questions"]) == 12
    # Decentralized: every debate turn saw all five agents.
    assert all(t["sees"] == ([] if t["round"] == 0 else [0, 1, 2, 3, 4]) for t in turns)

    # The printed numbers are the ones on disk, and both follow from turns.jsonl alone.
    assert f"{metrics['maj']:.1f}" in result.stdout
    recomputed = compute_metrics(
        [Turn(**t) for t in turns], Scoring(5, 3, range(5), kind="math", seed=0)
    )
    assert recomputed == metrics

    # The same command again finds the run finished: nothing asked, nothing duplicated.
    again = mad_eval("run", "--agents", "5", "--rounds", "3", "--limit", "12", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert "resuming: 240 turns already recorded" in again.stdout
    assert turns_of(run_dir) == turns


@pytest.mark.slow
def test_seeded_runs_repeat_exactly(tmp_path):
    args = ("run", "--agents", "3", "--rounds", "2", "--limit", "8", "--runs", "2")
    assert mad_eval(*args, "--out", "a", cwd=tmp_path).returncode == 0
    assert mad_eval(*args, "--out", "b", cwd=tmp_path).returncode == 0
    assert without_timing(turns_of(tmp_path / "a")) == without_timing(turns_of(tmp_path / "b"))
    metrics = json.loads((tmp_path / "a" / "metrics.json").read_text())
    assert metrics["runs"] == 2 and metrics["maj_std"] is not None


@pytest.mark.slow
def test_killed_run_resumes_to_the_same_records(tmp_path):
    """SIGKILL mid-run, rerun the command: every turn exactly once, as if never killed."""
    args = [
        "run",
        "--model",
        "sim:delay=0.01",
        "--agents",
        "3",
        "--rounds",
        "2",
        "--limit",
        "20",
        "--concurrency",
        "2",
    ]
    total = 20 * 3 * 3
    proc = start([*args, "--out", "killed"], tmp_path)
    turns_file = tmp_path / "killed" / "turns.jsonl"
    wait_for_lines(turns_file, 40)
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    written = turns_file.read_text().count("\n")
    assert 40 <= written < total, "the kill must land mid-run"

    resumed = mad_eval(*args, "--out", "killed", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert "resuming" in resumed.stdout
    assert mad_eval(*args, "--out", "whole", cwd=tmp_path).returncode == 0

    killed, whole = turns_of(tmp_path / "killed"), turns_of(tmp_path / "whole")
    keys = [(t["run"], t["question"], t["round"], t["agent"]) for t in killed]
    assert len(keys) == len(set(keys)) == total
    assert without_timing(killed) == without_timing(whole)


def test_a_partial_last_line_is_repaired(tmp_path):
    small_run(tmp_path)
    turns_file = tmp_path / "r" / "turns.jsonl"
    whole = turns_of(tmp_path / "r")
    lines = turns_file.read_text().splitlines(keepends=True)
    turns_file.write_text("".join(lines[:-1]) + lines[-1][:25])  # as if killed mid-write
    small_run(tmp_path)
    assert turns_file.read_text().startswith("".join(lines[:-1]))
    assert without_timing(turns_of(tmp_path / "r")) == without_timing(whole)


def test_a_corrupt_record_is_named_not_skipped(tmp_path):
    small_run(tmp_path)
    turns_file = tmp_path / "r" / "turns.jsonl"
    lines = turns_file.read_text().splitlines(keepends=True)
    turns_file.write_text("".join(lines[:2]) + "{not json\n" + "".join(lines[2:]))
    for args in (
        ["report", "r"],
        ["run", "--agents", "2", "--rounds", "1", "--limit", "3", "--out", "r"],
    ):
        result = mad_eval(*args, cwd=tmp_path)
        assert result.returncode == 2
        assert "turns.jsonl line 3 is not a turn record" in result.stderr


@pytest.mark.slow
def test_openai_compatible_server_end_to_end(tmp_path):
    # Every request whose seed is a multiple of 7 fails with HTTP 500, even after retries.
    with StubServer(fail_if=lambda body: body["seed"] % 7 == 0) as server:
        result = mad_eval(
            "run",
            "--model",
            "openai:stub-model",
            "--base-url",
            server.base_url,
            "--agents",
            "3",
            "--rounds",
            "1",
            "--limit",
            "5",
            "--max-tokens",
            "77",
            "--temperature",
            "0.7",
            "--top-p",
            "0.8",
            "--seed",
            "5",
            "--retries",
            "2",
            "--backoff",
            "0.01",
            "--out",
            "served",
            cwd=tmp_path,
            env={"OPENAI_API_KEY": "sk-secret-test-key"},
        )
        assert result.returncode == 0, result.stderr
        requests = list(server.requests)

    run_dir = tmp_path / "served"
    turns = turns_of(run_dir)
    assert len(turns) == 5 * 3 * 2
    by_seed = {r["seed"]: r for r in requests}
    for t in turns:
        assert t["seed"] == derive_seed(5, t["run"], t["question"], t["round"], t["agent"])
        sent = by_seed[t["seed"]]
        assert sent["model"] == "stub-model"
        assert (sent["temperature"], sent["top_p"], sent["max_tokens"]) == (0.7, 0.8, 77)
        assert t["model"] == "openai:stub-model"
        if t["seed"] % 7 == 0:  # a failure is recorded as such, never graded
            assert t["error"].startswith("InternalServerError: HTTP 500: injected failure")
            assert t["error"].endswith("(gave up after 3 attempts)") and t["attempts"] == 3
            assert t["answer"] is None and t["correct"] is None
        else:
            assert t["error"] is None
            assert t["answer"] == str(t["seed"] % 3)
            assert t["finish_reason"] == "stop"
            assert t["prompt_tokens"] > 0 and t["completion_tokens"] > 0
            assert t["latency"] > 0
    failed = sum(1 for t in turns if t["error"])
    assert 0 < failed < len(turns)
    # Each success was answered once; each failure was asked once plus its two retries.
    asked = Counter(r["seed"] for r in requests)
    assert all(asked[t["seed"]] == (3 if t["error"] else 1) for t in turns)
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["failed_turns"] == failed
    assert (
        compute_metrics([Turn(**t) for t in turns], Scoring(3, 1, (0, 1, 2), kind="math", seed=5))
        == metrics
    )
    # A debate turn saw exactly the agents whose round-0 turns succeeded.
    round0 = {(t["question"], t["agent"]): t for t in turns if t["round"] == 0}
    for t in turns:
        if t["round"] == 1:
            assert t["sees"] == [a for a in range(3) if not round0[(t["question"], a)]["error"]]
    assert "sk-secret-test-key" not in "".join(p.read_text() for p in run_dir.iterdir())


def test_report_recomputes_metrics_from_turns(tmp_path):
    small_run(tmp_path)
    metrics_file = tmp_path / "r" / "metrics.json"
    original = metrics_file.read_text()
    metrics_file.unlink()
    result = mad_eval("report", "r", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert metrics_file.read_text() == original


@pytest.mark.slow
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--agents", "0"], "--agents must be at least 1, got 0."),
        (["--rounds", "-1"], "--rounds must be 0 or more, got -1."),
        (
            ["--protocol", "ring"],
            "unknown protocol 'ring'; available: centralized, centralized_hub,",
        ),
        (["--benchmark", "nope"], "unknown benchmark 'nope'"),
        (["--model", "gpt4"], "unknown model spec 'gpt4'"),
        (["--model", "sim:p0=2"], "p0 must lie in [0, 1]"),
        (
            ["--model", "openai:m", "--base-url", "localhost:8000/v1"],
            "--base-url 'localhost:8000/v1' needs a scheme, e.g. http://localhost:8000/v1.",
        ),
        (
            ["--model", "openai:m", "--base-url", "http://127.0.0.1:9/v1"],
            "no OpenAI-compatible server answers at http://127.0.0.1:9/v1 (Connection refused)",
        ),
    ],
)
def test_bad_input_gets_one_clear_sentence(tmp_path, args, message):
    result = mad_eval("run", *args, cwd=tmp_path, env={"OPENAI_API_KEY": ""})
    assert result.returncode == 2
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "results").exists() or not any((tmp_path / "results").iterdir())


def test_malformed_benchmark_row_names_line_and_field(tmp_path):
    (tmp_path / "mine.jsonl").write_text(
        '{"id": "a", "question": "1+1?", "answer": "2"}\n{"id": "b", "question": "2+2?"}\n'
    )
    result = mad_eval("run", "--benchmark", "mine.jsonl", cwd=tmp_path)
    assert result.returncode == 2
    assert "line 2" in result.stderr and "answer" in result.stderr


def test_a_changed_config_is_refused(tmp_path):
    small_run(tmp_path)
    result = mad_eval(
        "run", "--agents", "3", "--rounds", "1", "--limit", "3", "--out", "r", cwd=tmp_path
    )
    assert result.returncode == 2
    assert "agents is 2 there, 3 here" in result.stderr


def test_report_on_a_folder_that_is_no_run(tmp_path):
    result = mad_eval("report", "nowhere", cwd=tmp_path)
    assert result.returncode == 2
    assert "nowhere is not a run directory (no manifest.json)." in result.stderr
