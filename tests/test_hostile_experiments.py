"""Hostile experiment files: a grid or a setting too big for the experiment's limits is
refused in one sentence before any cell is made or planned, a raised limit lets it through
with its turns counted right, and no table, figure, label or file name becomes a path
outside its folder (or two runs' one folder)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import mad_eval
from mad_eval.debate.plan import Shared
from mad_eval.experiments import ExperimentError, load_experiment
from mad_eval.experiments.run import count_turns, dry_run, plan_cells
from mad_eval.settings.config import ConfigError

HEAD = """
[models]
base = "sim"
"""


def write(tmp_path: Path, text: str, name: str = "exp.toml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def refusal(path: Path) -> str:
    """The one sentence loading (and planning) an experiment file ends with."""
    with pytest.raises(ExperimentError) as caught:
        dry_run(load_experiment(path))
    message = str(caught.value)
    assert message.startswith(f"{path}: ") and message.endswith(".")
    assert "\n" not in message and "Traceback" not in message
    return message


def dry_run_command(path: Path, timeout: int) -> subprocess.CompletedProcess:
    """`mad-eval experiment run FILE --dry-run` as a process: a hang fails by the timeout."""
    return subprocess.run(
        [sys.executable, "-m", "mad_eval", "experiment", "run", str(path), "--dry-run"],
        cwd=path.parent,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "COLUMNS": "200"},
    )


# --- grids and settings over the limits --------------------------------------------------


def test_a_100_by_100_grid_is_refused_at_its_first_value_over_a_limit(tmp_path):
    agents, rounds = list(range(1, 101)), list(range(100))
    path = write(
        tmp_path, f"{HEAD}[grids.g]\nbenchmarks = ['arith']\nagents = {agents}\nrounds = {rounds}\n"
    )
    message = refusal(path)
    assert "grids.g.agents: 65 agents is more than [experiment] max_agents = 64" in message


def test_a_grid_of_more_runs_than_max_cells_is_refused_with_its_axes(tmp_path):
    agents, rounds = list(range(1, 51)), list(range(50))  # 2,500 runs, each value allowed
    grid = f"[grids.g]\nbenchmarks = ['arith']\nagents = {agents}\nrounds = {rounds}\n"
    message = refusal(write(tmp_path, HEAD + grid))
    assert (
        "grids.g: it makes 2,500 runs (1 models x 1 protocols x 50 agents x 50 rounds x "
        "1 benchmarks), more than [experiment] max_cells = 1,000 allows" in message
    )

    # Raised, the same grid loads: 2,500 cells, as the axes say.
    raised = write(tmp_path, "[experiment]\nmax_cells = 2500\n" + HEAD + grid, "raised.toml")
    assert len(load_experiment(raised).cells) == 2500


def test_the_runs_of_all_grids_count_together(tmp_path):
    grids = "".join(
        f"[grids.g{i}]\nbenchmarks = ['arith']\nagents = {list(range(1, 21))}\n"
        f"rounds = {list(range(20 * i, 20 * i + 20))}\n"
        for i in range(3)
    )  # three grids of 400 runs: each allowed alone, 1,200 together
    message = refusal(write(tmp_path, "[experiment]\nmax_rounds = 60\n" + HEAD + grids))
    assert "it makes 400 runs" in message and "(1,200 with the other grids)" in message


@pytest.mark.slow
def test_one_cell_of_100000_agents_is_refused_by_the_command_in_one_sentence(tmp_path):
    path = write(tmp_path, f"{HEAD}[grids.g]\nbenchmarks = ['arith']\nagents = [100000]\n")
    done = dry_run_command(path, timeout=60)
    assert done.returncode == 2
    assert "100,000 agents is more than [experiment] max_agents = 64" in done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("setting", "key"),
    [
        ("[settings]\nagents = 100000\n", "[settings] agents: 100,000 agents"),
        ("[settings]\nrounds = 51\n", "[settings] rounds: 51 rounds"),
        ("[single]\nbenchmarks = ['arith']\nsamples = 257\n", "[single].samples: 257 samples"),
        (
            "[single]\nbenchmarks = ['arith']\nsamples = { arith = 100000 }\n",
            "[single].samples: 100,000 samples",
        ),
    ],
)
def test_each_setting_over_its_limit_is_refused_naming_its_key(tmp_path, setting, key):
    grid = "" if "[single]" in setting else "[grids.g]\nbenchmarks = ['arith']\n"
    message = refusal(write(tmp_path, setting + HEAD + grid))
    assert key in message and "raise max_" in message


@pytest.mark.parametrize(
    ("value", "shown"),
    [("0", "0"), ("'lots'", "'lots'"), ("true", "True"), ("1025", "1025"), ("2.5", "2.5")],
)
def test_a_limit_must_be_a_whole_number_within_a_runs_own(tmp_path, value, shown):
    path = write(
        tmp_path, f"[experiment]\nmax_agents = {value}\n{HEAD}[grids.g]\nbenchmarks = ['arith']\n"
    )
    message = refusal(path)
    assert f"[experiment] max_agents: it must be a whole number from 1 to 1,024, got {shown}" in (
        message
    )


def test_a_budget_tables_single_runs_are_held_to_max_samples(tmp_path):
    # N(T+1) = 64 x 51 samples per question for the budget table's single run.
    text = f"""{HEAD}[grids.g]\nbenchmarks = ['arith']\nagents = [64]\nrounds = [50]\n
    [[tables]]\nname = "b"\nlayout = "budget"\n"""
    message = refusal(write(tmp_path, text))
    assert "tables 'b' (its single run K = N(T+1)): 3,264 samples is more than" in message


def test_turns_are_counted_before_planning_and_equal_the_planned_cells(tmp_path):
    text = """
    [settings]
    limit = 3
    runs = 2
    [models]
    a = "sim"
    b = "sim:p0=0.9"
    [grids.g]
    benchmarks = ["arith"]
    agents = [2, 3]
    rounds = [0, 2]
    [single]
    models = ["a"]
    benchmarks = ["arith"]
    samples = 5
    """
    experiment = load_experiment(write(tmp_path, text))
    counted = count_turns(experiment, Shared())
    planned = {job.store.root.name: job.requests for job in plan_cells(experiment, cache=False)}
    assert counted == planned
    # runs x questions x (sum of N) x (sum of T + 1) per model, and the single run's K.
    assert sum(counted.values()) == 2 * (2 * 3 * (2 + 3) * (1 + 3)) + 2 * 3 * 5
    states = dry_run(experiment)
    assert sum(s.requests for s in states) == sum(counted.values())


def test_more_turns_than_max_turns_are_refused_and_a_raised_limit_lets_them_through(tmp_path):
    grid = "[grids.g]\nbenchmarks = ['arith']\nagents = [3]\nrounds = [1]\n"
    head = "[settings]\nlimit = 10\nruns = 2\n" + HEAD + grid  # 2 x 10 x 3 x 2 = 120 turns
    message = refusal(write(tmp_path, "[experiment]\nmax_turns = 119\n" + head))
    assert "its 1 runs need 120 turns" in message and "max_turns = 119" in message
    states = dry_run(load_experiment(write(tmp_path, "[experiment]\nmax_turns = 120\n" + head)))
    assert [s.requests for s in states] == [120]


@pytest.mark.slow
def test_ten_thousand_small_cells_dry_run_under_a_raised_limit(tmp_path):
    models = "".join(f'm{i} = "sim"\n' for i in range(100))
    text = (
        "[experiment]\nmax_cells = 10000\n[settings]\nlimit = 2\n[models]\n"
        + models
        + f"[grids.g]\nbenchmarks = ['arith']\nagents = [1, 2, 3, 4, 5]\n"
        f"rounds = {list(range(20))}\n"
    )
    done = dry_run_command(write(tmp_path, text), timeout=300)
    assert done.returncode == 0, done.stderr
    # 100 runs per model: 2 questions x (1+...+5) agents x (1+...+20) rounds + 1 = 6,300.
    assert "m99" in done.stdout and "6300" in done.stdout
    assert "630000 turns in all, 0 recorded, 630000 to ask." in done.stdout
    assert not (tmp_path / "results").exists()


def test_a_plain_run_is_held_to_a_runs_own_limits():
    # Named as the call's keywords: the command line's options are not what a program passes.
    with pytest.raises(ConfigError, match=r"^agents must be at most 1024, got 100000"):
        mad_eval.run(model="sim", agents=100000, limit=1)
    with pytest.raises(ConfigError, match=r"^rounds must be at most 1000, got 5000"):
        mad_eval.run(model="sim", rounds=5000, limit=1)
    with pytest.raises(ConfigError, match=r"^samples must be at most 1024, got 100000"):
        mad_eval.single(model="sim", samples=100000, limit=1)


# --- names that become paths ------------------------------------------------------------

BAD_NAMES = ["..", ".", "...", ".hidden", "../x", "a/b", "a\\b", "", "a\x00b", "a\nb", "x" * 101]


@pytest.mark.parametrize("name", BAD_NAMES)
@pytest.mark.parametrize("kind", ["tables", "figures"])
def test_a_table_or_figure_name_that_is_no_plain_file_name_is_refused(tmp_path, kind, name):
    text = f"{HEAD}[grids.g]\nbenchmarks = ['arith']\n[[{kind}]]\nname = {json.dumps(name)}\n"
    message = refusal(write(tmp_path, text))
    assert f"{kind}[0].name: {name!r} cannot name a file" in message


def test_two_tables_writing_one_file_are_refused(tmp_path):
    views = '[[tables]]\nname = "main"\n[[tables]]\nname = "Main"\n'
    message = refusal(write(tmp_path, f"{HEAD}[grids.g]\nbenchmarks = ['arith']\n{views}"))
    assert "tables[0] and tables[1]: both write tables/Main" in message


def test_a_budget_tables_figure_and_a_figure_of_its_name_are_refused(tmp_path):
    views = '[[tables]]\nname = "b"\nlayout = "budget"\n[[figures]]\nname = "b"\n'
    message = refusal(write(tmp_path, f"{HEAD}[grids.g]\nbenchmarks = ['arith']\n{views}"))
    assert "tables[0] and figures[0]: both write figures/b" in message


@pytest.mark.parametrize("file_name", ["...toml", "..toml", ".hidden.toml"])
def test_a_file_whose_name_would_make_a_hidden_folder_is_refused(tmp_path, file_name):
    path = write(tmp_path, f"{HEAD}[grids.g]\nbenchmarks = ['arith']\n", file_name)
    message = refusal(path)
    assert "the file name:" in message and "set [experiment] out" in message


@pytest.mark.parametrize("out", ['""', '"a\\u0000b"', "3", '"  "'])
def test_an_out_that_is_no_folder_path_is_refused(tmp_path, out):
    path = write(tmp_path, f"[experiment]\nout = {out}\n{HEAD}[grids.g]\nbenchmarks = ['arith']\n")
    assert "[experiment] out: it must be a folder path" in refusal(path)


@pytest.mark.parametrize(
    ("first", "second", "folder"),
    [("a/b", "a_b", "a_b"), ("Base model", "Base_model", "Base_model"), ("Base", "base", "base")],
)
def test_two_labels_of_one_folder_name_are_refused_naming_both(tmp_path, first, second, folder):
    text = f'[models]\n"{first}" = "sim"\n"{second}" = "sim:p0=0.9"\n[grids.g]\n'
    text += "benchmarks = ['arith']\n"
    message = refusal(write(tmp_path, text))
    assert f"[models]: labels '{first}' and '{second}' both name run folders '...-{folder}'" in (
        message
    )
    assert "rename one of them" in message


def test_two_templates_of_one_file_name_in_one_grid_are_refused_naming_both(tmp_path):
    text = f"""{HEAD}[grids.g]\nbenchmarks = ['arith']
    prompt_templates = ["one/style.toml", "two/style.toml"]\n"""
    message = refusal(write(tmp_path, text))
    # template files are named as read: relative to the experiment file
    assert f"its runs of prompt_templates '{tmp_path}/one/style.toml' and of " in message
    assert f"prompt_templates '{tmp_path}/two/style.toml' would share the folder" in message
    assert "would share the folder arith-decentralized-n5-t3-base-style" in message


def test_a_label_that_would_make_a_folder_name_too_long_is_refused(tmp_path):
    text = f'[models]\n"{"m" * 101}" = "sim"\n[grids.g]\nbenchmarks = ["arith"]\n'
    assert "a label must be 1 to 100 printable characters" in refusal(write(tmp_path, text))
