"""mad_eval.table, plot, train_pairs and train_prompts: each call makes the files its command
makes (the command only parses options, calls it and prints)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from cli_helpers import mad_eval as command

import mad_eval
from mad_eval.reporting.paper import TableError
from mad_eval.store.files import StoreError

GOLDEN = Path(__file__).parent / "golden" / "tables"
ROLLOUTS = [
    {"id": "a", "question": "1+1?", "gold": "2", "response": "so \\boxed{2}"},
    {"id": "a", "question": "1+1?", "gold": "2", "response": "it is \\boxed{3}"},
    {"id": "a", "question": "1+1?", "gold": "2", "response": "maybe \\boxed{3}"},
    {"id": "b", "question": "2+2?", "gold": "4", "response": "\\boxed{4}"},
]


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    for name in ("alpha", "beta"):
        shutil.copytree(GOLDEN / name, tmp_path / name)
    return tmp_path


@pytest.mark.slow
def test_table_is_the_commands_table_and_writes_the_same_file(runs):
    text = mad_eval.table([runs / "alpha", runs / "beta"], format="md")
    assert text == (GOLDEN / "debate.md").read_text()
    written = mad_eval.table(
        [runs / "alpha", runs / "beta"], "rounds", format="csv", out=runs / "api.csv",
        label={str(runs / "beta"): "B"}, replicates=200,
    )  # fmt: skip
    assert (runs / "api.csv").read_text() == written and "B," in written
    args = ("table", "alpha", "beta", "--layout", "rounds", "--format", "csv", "--out", "cli.csv")
    done = command(*args, "--label", "beta=B", "--replicates", "200", cwd=runs)
    assert done.returncode == 0, done.stderr
    # The same table; the run_dir column holds each folder as it was given.
    assert written.replace(f"{runs}/", "") == (runs / "cli.csv").read_text()


def test_table_options_are_checked_in_the_library(runs):
    # Named as the call's keywords: the command line's options are not what a program passes.
    with pytest.raises(TableError, match=r"^layout must be one of debate,"):
        mad_eval.table([runs / "alpha"], "ablation")
    with pytest.raises(TableError, match=r"^replicates must be at least 100, got 5"):
        mad_eval.table([runs / "alpha"], replicates=5)
    with pytest.raises(StoreError, match=r"^label 'alpha' must look like RUN_DIR=NAME"):
        mad_eval.table([runs / "alpha"], label=["alpha"])


@pytest.mark.slow
def test_plot_writes_the_commands_figures(runs):
    written = mad_eval.plot([runs / "alpha", runs / "beta"], runs / "api", replicates=200)
    done = command("plot", "alpha", "beta", "--out", "cli", "--replicates", "200", cwd=runs)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in written) == sorted(p.name for p in (runs / "cli").iterdir())
    assert {"rounds.png", "transitions.png", "diversity.png"} <= {p.name for p in written}


def test_train_pairs_writes_the_commands_rows_and_returns_its_counts(tmp_path):
    (tmp_path / "r.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROLLOUTS))
    summary = mad_eval.train_pairs(tmp_path / "r.jsonl", tmp_path / "api.jsonl", copies=2)
    assert (summary.rule, summary.prompts, summary.rollouts) == ("freq", 2, 4)
    assert (summary.kept, summary.pairs, summary.all_correct) == (1, 2, 1)
    done = command("train", "pairs", "r.jsonl", "--copies", "2", "--out", "cli.jsonl", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "Kept 1 prompts: 2 frequency pairs (1 distinct, each 2 times)" in done.stdout
    assert (tmp_path / "api.jsonl").read_bytes() == (tmp_path / "cli.jsonl").read_bytes()
    with pytest.raises(ValueError, match=r"^pairing must be one of rand, freq, got 'best'"):
        mad_eval.train_pairs(tmp_path / "r.jsonl", tmp_path / "x.jsonl", pairing="best")
    assert not (tmp_path / "x.jsonl").exists()


def test_train_prompts_writes_the_commands_rows_and_returns_them(tmp_path):
    rows = mad_eval.train_prompts("arith", tmp_path / "api.jsonl", limit=3)
    assert [row["data_source"] for row in rows] == ["arith"] * 3
    done = command("train", "prompts", "arith", "--limit", "3", "--out", "cli.jsonl", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "Wrote 3 arith prompts -> cli.jsonl" in done.stdout
    written = (tmp_path / "api.jsonl").read_text().splitlines()
    assert [json.loads(line) for line in written] == rows
    assert (tmp_path / "api.jsonl").read_bytes() == (tmp_path / "cli.jsonl").read_bytes()
