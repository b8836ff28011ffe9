"""The perf scripts still run, and the soak finds nothing lost on a short stint."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
PERF = Path(__file__).resolve().parents[1] / "perf"


def test_a_short_soak_loses_duplicates_and_fails_nothing(tmp_path):
    figures_file = tmp_path / "soak.json"
    subprocess.run(
        [sys.executable, str(PERF / "soak.py"), "--seconds", "10", "--questions", "6",
         "--fault-rate", "0.3", "--seed", "3", "--json", str(figures_file)],
        check=True, capture_output=True, timeout=300, cwd=tmp_path,
    )  # fmt: skip
    figures = json.loads(figures_file.read_text())
    assert figures["runs_finished"] >= 1 and figures["turns_per_run"] == 6 * 3 * 3
    for name in ("lost", "duplicated", "spurious_failures", "different", "orphaned_workers"):
        assert figures[name] == 0, (name, figures)
    assert figures["rss_mb_by_minute"] and figures["rss_mb_by_minute"][0]["peak"] > 0


def test_the_prompt_bench_times_every_shipped_template():
    result = subprocess.run(
        [sys.executable, str(PERF / "prompts.py"), "--calls", "5"],
        check=True, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    timed = [line.split()[0] for line in result.stdout.splitlines()[1:]]
    assert {"debate", "conversation", "own-apart", "anonymous"} <= set(timed)
    assert all(line.rstrip().endswith("µs") for line in result.stdout.splitlines()[1:])


def test_the_client_bench_replays_what_the_run_sent_and_prints_a_ratio():
    result = subprocess.run(
        [sys.executable, str(PERF / "client.py"), "--turns", "100", "--repeat", "1"],
        check=True, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    rows = [line for line in result.stdout.splitlines() if line.startswith("| 100 |")]
    assert [row.split("|")[2].strip() for row in rows] == ["mad-eval", "minimal"]
    assert "mad-eval / minimal client, whole processes, 100 turns:" in result.stdout


def test_the_minimal_client_keeps_a_debate_s_rounds_in_order(tmp_path):
    sys.path.insert(0, str(PERF))
    from instant import debates

    bodies = [{"messages": [{"role": "user", "content": f"Question {q}: x"}], "seed": i}
              for i, q in enumerate([1, 2, 1, 1, 2, 2, 1])]  # fmt: skip
    grouped = debates(bodies, agents=2)
    assert [[[b["seed"] for b in r] for r in rounds] for rounds in grouped] == [
        [[0, 2], [3, 6]],
        [[1, 4], [5]],
    ]


def test_the_prefix_bench_compares_both_routings():
    result = subprocess.run(
        [sys.executable, str(PERF / "prefix.py"), "--questions", "6", "--rounds", "1",
         "--delay", "0", "--prefill-us", "0"],
        check=True, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert "| least busy |" in result.stdout and "| by question |" in result.stdout
    assert "by question vs least busy, 3 replicas: reused" in result.stdout


def test_the_experiment_bench_is_no_slower_than_its_cells_in_turn():
    result = subprocess.run(
        [sys.executable, str(PERF / "experiment.py"), "--quick", "--repeat", "3"],
        check=True, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    rows = {line.split("|")[1].split()[0]: line for line in result.stdout.splitlines()
            if line.startswith("| ")}  # fmt: skip
    assert {"ideal:", "experiment", "sequential"} <= set(rows)
    ratio = next(line for line in result.stdout.splitlines() if line.startswith("experiment /"))
    # 0.50-0.53 in 20 of 21 runs on 2 cores (the experiment fills the server, each run in
    # turn idles at its tail); the 21st stalled 2 s under outside load, so the median of
    # three pairs is checked, with room for noise.
    assert float(ratio.split()[3]) <= 1.1, result.stdout


def test_the_dry_run_bench_times_the_grid_and_sees_both_hostile_files_refused():
    result = subprocess.run(
        [sys.executable, str(PERF / "experiment_dryrun.py"), "--cells", "200",
         "--repeats", "1", "--give-up", "120"],
        check=True, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert "this tree:" in result.stdout and "12600 turns in all" in result.stdout
    assert result.stdout.count("is more than [experiment] max_agents = 64") == 2, result.stdout
