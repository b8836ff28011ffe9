"""Counts are said as a sentence says them: "1 round", never "1 rounds"."""

from __future__ import annotations

import json

from cli_helpers import mad_eval

from mad_eval.words import counted


def test_counted_says_one_in_the_singular():
    assert counted(1, "round") == "1 round"
    assert counted(0, "round") == "0 rounds"
    assert counted(3, "debate turn") == "3 debate turns"
    assert counted(2, "reply", "replies") == "2 replies"


def test_a_run_of_one_question_one_round_says_so(tmp_path):
    args = ("--model", "sim", "--benchmark", "arith", "--limit", "1", "--runs", "1")
    result = mad_eval("run", *args, "--agents", "2", "--rounds", "1", "--out", "r", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    said = " ".join(result.stdout.split())
    assert "1 question x 1 run, 2 agents (sim), 1 round," in said
    assert "1 question, 2 agents, 4 turns;" in said
    metrics = json.loads((tmp_path / "r" / "metrics.json").read_text())
    assert metrics["questions"] == 1
    single = mad_eval("single", *args, "-k", "1", "--out", "s", cwd=tmp_path)
    assert single.returncode == 0, single.stderr
    assert "1 independent sample (sim), no debate" in " ".join(single.stdout.split())
