"""Experiment files: cells from grids, one engine for all, resume, tables equal to each
cell's metrics.json, and one sentence for every bad file."""

from __future__ import annotations

import json
import os
import signal
import textwrap
from pathlib import Path

import pandas as pd
import pytest
from cli_helpers import closed_port, mad_eval, start, turns_of, wait_for_lines, without_timing

from mad_eval import api
from mad_eval.experiments import ExperimentError, load_experiment
from mad_eval.measure.schema import lookup

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "experiments" / "offline_demo.toml"

SMALL = """
[experiment]
out = "out"

[settings]
limit = 6
runs = 1
rounds = 1

[models]
weak = "sim:p0=0.4"
strong = { model = "sim:p0=0.7,skill=0.8" }

[grids.main]
benchmarks = ["arith"]
agents = [3]

[grids.size]
models = ["strong"]
benchmarks = ["arith"]
agents = [2, 3]

[single]
models = ["weak"]
benchmarks = ["arith"]
samples = 4

[[tables]]
name = "main"
grid = "main"

[[tables]]
name = "size"
grid = "size"
rows = ["agents"]
labels = { "N=2" = "two" }
"""


def write(tmp_path: Path, text: str, name: str = "exp.toml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def test_cells_are_the_grids_product_shared_cells_run_once(tmp_path):
    experiment = load_experiment(write(tmp_path, SMALL))
    names = [cell.name for cell in experiment.cells]
    assert names == [
        "arith-decentralized-n3-t1-weak",
        "arith-decentralized-n3-t1-strong",
        "arith-decentralized-n2-t1-strong",
        "arith-single-k4-weak",
    ]
    shared = experiment.cells[1]
    assert experiment.grids(shared) == ("main", "size")
    assert shared.settings["model"] == "sim:p0=0.7,skill=0.8"
    assert shared.settings["limit"] == 6 and shared.settings["rounds"] == 1
    single = experiment.cells[3]
    assert (single.settings["protocol"], single.settings["agents"]) == ("single", 4)
    size = experiment.tables[1]
    assert [experiment.labels(size)[c.name] for c in experiment.of(size)] == ["two", "N=3"]


BUDGET = """
[[tables]]
name = "budget"
grid = "main"
layout = "budget"
"""


def test_a_budget_table_requests_the_single_cells_it_needs(tmp_path):
    """grids.main: weak and strong, N=3, T=1, so G = 6; [single] has weak at K=4 only."""
    experiment = load_experiment(write(tmp_path, SMALL + BUDGET))
    names = [cell.name for cell in experiment.cells]
    assert names[4:] == ["arith-single-k6-weak", "arith-single-k6-strong"]
    made = experiment.cells[4]
    assert experiment.grids(made) == ("budget table",)
    assert (made.settings["protocol"], made.settings["agents"], made.settings["rounds"]) == (
        "single",
        6,
        0,
    )
    assert made.settings["limit"] == 6 and made.settings["model"] == "sim:p0=0.4"
    # A [single] K of 8 serves weak; strong still needs a cell of its own.
    experiment = load_experiment(
        write(tmp_path, SMALL.replace("samples = 4", "samples = 8") + BUDGET)
    )
    assert [c.name for c in experiment.pool_cells(experiment.tables[-1])] == [
        "arith-single-k8-weak",
        "arith-single-k6-strong",
    ]
    assert experiment.grids(experiment.cells[3]) == ("single", "budget table")
    wrong = SMALL + BUDGET.replace('grid = "main"', 'grid = "single"')
    with pytest.raises(ExperimentError, match="give it a debate grid"):
        load_experiment(write(tmp_path, wrong))


def test_the_demo_plans_its_turns_and_writes_nothing(tmp_path):
    """The dry run docs/how-to/run-an-experiment.md shows first, on the real demo file."""
    dry = mad_eval("experiment", "run", str(DEMO), "--dry-run", cwd=tmp_path)
    assert dry.returncode == 0, dry.stderr
    # 31800 turns of the grids and [single], and 9000 of the budget table's three single
    # cells (K = N(T+1) = 15, 100 questions, 2 runs: [single]'s K = 8 is too few).
    assert "40800 turns in all, 0 recorded, 40800 to ask." in dry.stdout
    assert "arith-single-k15-SDRL" in " ".join(dry.stdout.split())
    assert not (tmp_path / "results").exists()  # a dry run writes nothing


def small_demo(folder: Path, limit: int = 8) -> Path:
    """The demo file with `limit` questions instead of 100: every grid, table, figure and
    price of it, at a twelfth of its turns."""
    text = DEMO.read_text(encoding="utf-8")
    assert "[settings]" in text and "limit =" not in text
    path = folder / DEMO.name
    path.write_text(text.replace("[settings]", f"[settings]\nlimit = {limit}", 1))
    prices = DEMO.parent / "prices.example.toml"
    (folder / prices.name).write_text(prices.read_text(encoding="utf-8"))
    return path


@pytest.mark.slow
def test_demo_runs_and_its_tables_equal_each_cells_metrics(tmp_path, monkeypatch):
    """The demo's run and tables, in-process on a smaller copy: every table's values are
    its cells' metrics.json, and every kind of table and figure is written."""
    demo = small_demo(tmp_path)
    monkeypatch.chdir(tmp_path)
    api.experiment(demo)
    api.experiment_tables(demo, replicates=200)
    out = tmp_path / "results" / "offline_demo"
    experiment = load_experiment(demo)
    for view in experiment.tables:
        for fmt in view.formats:
            ext = {"csv": "csv", "latex": "tex", "md": "md"}[fmt]
            assert (out / "tables" / f"{view.name}.{ext}").is_file()
        frame = pd.read_csv(out / "tables" / f"{view.name}.csv")
        frame = frame[frame["benchmark"] != "Avg"]
        labels = experiment.labels(view)
        cells = experiment.of(view)
        assert set(frame["method"]) == {labels[c.name] for c in cells}
        assert sorted(frame["run_dir"].unique()) == sorted(str(experiment.folder(c)) for c in cells)
        for cell in cells:
            metrics = json.loads((out / cell.name / "metrics.json").read_text())
            rows = frame[frame["run_dir"] == str(experiment.folder(cell))]
            assert set(rows["method"]) == {labels[cell.name]}
            for _, row in rows.iterrows():
                assert row["value"] == pytest.approx(_lookup(metrics, row["key"]), nan_ok=True)
    # The demo prices its tokens, and its cells' metrics.json hold the money too.
    assert "$ / 1k q" in set(pd.read_csv(out / "tables" / "cost.csv")["metric"])
    agents = (out / "tables" / "agents.md").read_text().splitlines()[0]
    assert "Arith N=3 Maj" in agents and "Arith N=7 Δ" in agents  # columns by N
    for name in ("rounds", "transitions", "diversity", "margin", "drift", "stopping"):
        assert (out / "figures" / "main" / f"{name}.png").is_file()
    summary = (out / "summary.md").read_text()
    for view in experiment.tables:
        assert f"## Table: {view.name}" in summary
    # Run folders, each of the demo's two seeded runs: "runs" alone would count either.
    assert f"{len(experiment.cells)} run folders (2 seeded runs each)" in summary
    # m's ceiling K is the single folder's samples pooled over its seeded runs.
    budget = (out / "tables" / "budget.md").read_text()
    assert "_K = 30: " in budget and "15 samples per question x 2 seeded runs, pooled._" in budget
    assert "![rounds](figures/main/rounds.png)" in summary
    assert "![budget](figures/budget/budget.png)" in summary
    assert (out / "figures" / "budget" / "budget.png").is_file()


def _lookup(metrics: dict, key: str) -> float:
    """A number of metrics.json as the CSV writes it (NaN where metrics.json has null)."""
    value = lookup(metrics, key)[0]
    return float("nan") if value is None else value


def test_a_prices_file_that_cannot_be_read_is_one_sentence(tmp_path):
    path = write(tmp_path, SMALL.replace('out = "out"', 'out = "out"\nprices = "nope.toml"'))
    with pytest.raises(ExperimentError, match=r"\[experiment\] prices: prices file .*nope.toml"):
        load_experiment(path)


@pytest.mark.slow
def test_a_killed_experiment_resumes_with_every_turn_exactly_once(tmp_path):
    slow = SMALL.replace('weak = "sim:p0=0.4"', 'weak = "sim:p0=0.4,delay=0.05"')
    path = write(tmp_path, slow)
    proc = start(["experiment", "run", str(path)], cwd=tmp_path)
    first = tmp_path / "out" / "arith-decentralized-n3-t1-weak" / "turns.jsonl"
    try:
        wait_for_lines(first, 5)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    again = mad_eval("experiment", "run", str(path), cwd=tmp_path)
    assert again.returncode == 0, again.stderr

    reference = write(tmp_path, slow.replace('out = "out"', 'out = "reference"'), "ref.toml")
    whole = mad_eval("experiment", "run", str(reference), cwd=tmp_path)
    assert whole.returncode == 0, whole.stderr
    for cell in load_experiment(path).cells:
        resumed = turns_of(tmp_path / "out" / cell.name)
        keys = [(t["run"], t["question"], t["round"], t["agent"]) for t in resumed]
        assert len(keys) == len(set(keys))  # every turn once
        fresh = turns_of(tmp_path / "reference" / cell.name)
        assert without_timing(resumed) == without_timing(fresh)


def test_cells_share_one_limit_per_endpoint(tmp_path):
    """Two cells on one model are planned on one pool: one backend, one request limit."""
    from mad_eval.experiments.run import plan_cells

    path = write(tmp_path, SMALL.replace("runs = 1", "runs = 1\nconcurrency = 3"))
    jobs = plan_cells(load_experiment(path))
    strong = [job for job in jobs if "strong" in job.store.root.name]
    first, second = (next(iter(job.plan.backends.values())) for job in strong)
    assert first is second
    assert len(jobs[0].plan.shared.slots) == 2  # a limit per model, not per cell


BAD = [
    ("[settings]\ntemprature = 0.5\n", "temprature", "did you mean 'temperature'"),
    ("[grids.main]\nbenchmarks = []\n", "grids.main.benchmarks", "empty"),
    ("[grids.main]\nbenchmarks = ['arith']\nmodels = ['nobody']\n", "grids.main.models", "nobody"),
    (
        "[grids.main]\nbenchmarks = ['arith']\n[[tables]]\nname = 't'\ngrid = 'other'\n",
        "tables 't'",
        "grid 'other' is not one of",
    ),
    (
        "[grids.main]\nbenchmarks = ['arith']\n[[tables]]\nname = 't'\nlabels = { ghost = 'G' }\n",
        "tables 't'.labels",
        "'ghost' is not a row",
    ),
    (
        "[grids.a]\nbenchmarks = ['arith']\n[grids.b]\nbenchmarks = ['arith']\nruns = 2\n",
        "grids.a and grids.b",
        "both make folder",
    ),
    ("[grids.main]\nbenchmarks = ['arith']\nconcurrency = 2\n", "grids.main.concurrency", "once"),
    ("[grids.main]\nbenchmarks = ['arith']\nagents = ['five']\n", "grids.main.agents", "int"),
    ("[grids.main]\nbenchmarks = ['arith']\n[[exclude]]\nname = 'x'\nagents = [9]\n", "'x'", "no"),
    ("[grids.main]\nbenchmarks = ['arith']\n[[tables]]\nname = 't'\nlayout = 'x'\n", "layout", "x"),
    ("[grid.main]\nbenchmarks = ['arith']\n", "grid", "did you mean 'grids'"),
    (
        "[grids.g]\nbenchmarks = ['arith']\n[[tables]]\nname = 't'\nrows = ['agents']\n"
        "columns = ['agents']\n",
        "tables 't'",
        "agents cannot be both rows and columns",
    ),
    (
        "[grids.g]\nbenchmarks = ['arith']\nagents = [2, 3]\n[[tables]]\nname = 't'\n"
        "rows = ['models']\n",
        "tables 't'.rows",
        "both row 'm'",
    ),
]


@pytest.mark.parametrize(("body", "where", "says"), BAD)
def test_bad_files_are_one_sentence_naming_file_and_key(tmp_path, body, where, says):
    path = write(tmp_path, '[models]\nm = "sim"\n' + body)
    with pytest.raises(ExperimentError) as caught:
        load_experiment(path)
    message = str(caught.value)
    assert str(path) in message and where in message and says in message, message
    assert message.count("\n") == 0


def test_an_empty_grid_and_a_missing_file(tmp_path):
    with pytest.raises(ExperimentError, match=r"no \[grids.NAME\] table and no \[single\]"):
        load_experiment(write(tmp_path, '[models]\nm = "sim"\n'))
    result = mad_eval("experiment", "run", "nothere.toml", cwd=tmp_path)
    assert result.returncode == 2
    assert "nothere.toml does not exist" in result.stderr


def unreachable(tmp_path: Path, out: str) -> Path:
    """An experiment file of one model whose server refuses connections."""
    url = f"http://127.0.0.1:{closed_port()}/v1"
    body = f'[models]\nm = {{ model = "openai:x", base_url = "{url}" }}\n'
    body += '[settings]\nlimit = 2\nretries = 0\n[grids.main]\nbenchmarks = ["arith"]\n'
    return write(tmp_path, f"[experiment]\nout = '{out}'\n" + body)


@pytest.mark.slow
def test_server_and_folder_problems_stop_before_any_request(tmp_path):
    path = unreachable(tmp_path, "o")
    result = mad_eval("experiment", "run", str(path), cwd=tmp_path)
    assert result.returncode == 2
    assert str(path) in result.stderr and "arith-decentralized-n5-t3-m" in result.stderr
    assert "Connection refused" in result.stderr
    assert not list((tmp_path / "o").glob("*/turns.jsonl"))

    # A cell folder that holds a run of another configuration is named before anything runs.
    small = write(tmp_path, SMALL)
    assert mad_eval("experiment", "run", str(small), cwd=tmp_path).returncode == 0
    changed = write(tmp_path, SMALL.replace("sim:p0=0.4", "sim:p0=0.2"))
    again = mad_eval("experiment", "run", str(changed), cwd=tmp_path)
    assert again.returncode == 2
    assert "cell arith-decentralized-n3-t1-weak" in again.stderr
    assert "different configuration" in again.stderr


@pytest.mark.slow
def test_a_failed_run_leaves_no_copy_of_the_file_and_keeps_an_earlier_one(tmp_path):
    path = unreachable(tmp_path, "results/o")
    result = mad_eval("experiment", "run", str(path), cwd=tmp_path)
    assert result.returncode == 2 and "Connection refused" in result.stderr
    assert not (tmp_path / "results").exists()  # no experiment.json, no empty folders

    small = write(tmp_path, SMALL)
    assert mad_eval("experiment", "run", str(small), cwd=tmp_path).returncode == 0
    copy = (tmp_path / "out" / "experiment.json").read_bytes()
    assert b"sim:p0=0.4" in copy
    changed = write(tmp_path, SMALL.replace("sim:p0=0.4", "sim:p0=0.2"))
    assert mad_eval("experiment", "run", str(changed), cwd=tmp_path).returncode == 2
    assert (tmp_path / "out" / "experiment.json").read_bytes() == copy  # the earlier run's


@pytest.mark.slow
def test_cells_are_ordinary_run_folders(tmp_path):
    path = write(tmp_path, SMALL)
    assert mad_eval("experiment", "run", str(path), cwd=tmp_path).returncode == 0
    folder = tmp_path / "out" / "arith-decentralized-n3-t1-weak"
    report = mad_eval("report", str(folder), cwd=tmp_path)
    assert report.returncode == 0, report.stderr
    rerun = mad_eval(
        "run", "--model", "sim:p0=0.4", "--agents", "3", "--rounds", "1", "--limit", "6",
        "--out", str(folder), cwd=tmp_path,
    )  # fmt: skip
    assert rerun.returncode == 0, rerun.stderr
    assert "resuming: 36 turns already recorded" in " ".join(rerun.stdout.split())


@pytest.mark.slow
def test_retry_failed_asks_every_cells_failed_turns_again(tmp_path):
    path = write(tmp_path, SMALL)
    assert mad_eval("experiment", "run", str(path), cwd=tmp_path).returncode == 0
    turns = tmp_path / "out" / "arith-decentralized-n3-t1-weak" / "turns.jsonl"
    lines = turns.read_text().splitlines()
    first = json.loads(lines[0]) | {"error": "APITimeoutError: gone", "text": "", "answer": None}
    turns.write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n")
    retried = mad_eval("experiment", "run", str(path), "--retry-failed", cwd=tmp_path)
    assert retried.returncode == 0, retried.stderr
    assert "Asking again 1 failed turn and" in " ".join(retried.stdout.split())
    assert not any(json.loads(line)["error"] for line in turns.read_text().splitlines())


@pytest.mark.slow
def test_the_papers_experiment_plans_its_cells_offline(tmp_path, shared_data):
    """The shipped reproduction file: its cells, turns and tables, asking no server."""
    env = {"MAD_EVAL_DATA": str(shared_data), "HF_HUB_OFFLINE": "1", "CUDA_VISIBLE_DEVICES": ""}
    path = ROOT / "experiments" / "sdrl_paper.toml"
    dry = mad_eval("experiment", "run", str(path), "--dry-run", cwd=tmp_path, env=env)
    assert dry.returncode == 0, dry.stderr
    # main: 9 models x 4 benchmarks x 500/40/30/30 questions x 5 runs x 5 agents x 2 rounds
    assert "864000 turns in all, 0 recorded, 864000 to ask." in dry.stdout
    # its nine checkpoints are served by mad-eval: on no GPU, one at a time
    assert "one CPU slot" in dry.stdout and "9 servers to start" in dry.stdout
    experiment = load_experiment(path)
    assert len([c for c in experiment.cells if c.single]) == 9 * 4
    assert [t.name for t in experiment.tables] == [
        "main",
        "agents",
        "frameworks",
        "single",
        "transitions",
    ]


@pytest.mark.slow
def test_a_run_folder_is_open_only_while_its_debates_run(tmp_path):
    """60 cells under a limit of 100 open files: folders are opened as their debates are
    reached and closed after their last, so the window (4 x concurrency 2 = 8 debates)
    bounds the folders open, not the number of cells (2 descriptors each)."""
    import resource
    import subprocess
    import sys

    path = write(
        tmp_path,
        """
        [settings]
        limit = 2
        concurrency = 2
        [models]
        m = "sim"
        [grids.many]
        benchmarks = ["arith"]
        agents = [1, 2, 3, 4, 5, 6]
        rounds = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]
        """,
    )

    def few_files() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (100, 100))

    done = subprocess.run(
        [sys.executable, "-m", "mad_eval", "experiment", "run", str(path)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        preexec_fn=few_files,
    )
    assert done.returncode == 0, done.stderr
    assert len(list((tmp_path / "results" / "exp").glob("*/metrics.json"))) == 60


def test_groups_of_runs_take_turns():
    from mad_eval.debate.engine import interleave

    a, b = iter(["a1", "a2", "a3"]), iter(["b1"])
    assert list(interleave([a, b])) == ["a1", "b1", "a2", "a3"]


def test_tables_before_the_runs_say_which_run_to_make(tmp_path):
    path = write(tmp_path, SMALL)
    result = mad_eval("experiment", "tables", str(path), cwd=tmp_path)
    assert result.returncode == 2
    said = " ".join(result.stderr.split())
    assert "'main' needs cell arith-decentralized-n3-t1-weak and 1 more, which hold no" in said
    assert f"run `mad-eval experiment run {path}` first." in said


def test_a_dry_run_leaves_a_running_cells_records_as_they_are(tmp_path, monkeypatch):
    """A run may be writing a line right now: a dry run counts, never repairs."""
    monkeypatch.chdir(tmp_path)  # the file's out = "out" is the working directory's
    path = write(tmp_path, SMALL)
    api.experiment(path)
    turns = tmp_path / "out" / "arith-decentralized-n3-t1-weak" / "turns.jsonl"
    with turns.open("ab") as f:
        f.write(b'{"run": 0, "question": "half-writ')
    before = turns.read_bytes()
    plan = api.experiment_plan(path)
    assert turns.read_bytes() == before
    assert plan.needed == plan.held > 0  # every cell whole; the half line is no turn
    assert [s.cell.name for s in plan.states] == [c.name for c in plan.experiment.cells]
