"""`mad-eval experiment run|tables FILE`: a whole paper's grid of runs from one file."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.table import Table

from mad_eval import api
from mad_eval.cli import options
from mad_eval.cli.ui import ConsoleListener, alert, console, one_sentence
from mad_eval.errors import for_keywords
from mad_eval.sanitize import outward
from mad_eval.settings.config import run_defaults
from mad_eval.words import counted

if TYPE_CHECKING:
    from mad_eval.experiments.run import Exposure
    from mad_eval.reporting.results import Run

app = typer.Typer(
    help="A paper's evaluation in one file: the models, grids of settings (models x "
    "protocols x N x T x benchmarks x prompt templates x answer protocols), single-agent "
    "runs, and the tables and figures to make. See experiments/ for examples.",
    no_args_is_help=True,
)
FILE = options.argument("file", Path, metavar="FILE", help="An experiment file (.toml).")


@options.command(
    app,
    ["dry_run", "gpus", "ray", "retry_failed", "log"],
    {"dry_run": False, "gpus": None, "ray": None, "retry_failed": False, "log": None},
    own={"retry_failed": options.EXPERIMENT_RETRY, "log": options.EXPERIMENT_LOG},
    arguments=[FILE],
)
def run(
    file: Path,
    dry_run: bool,
    gpus: str | None,
    ray: str | None,
    retry_failed: bool,
    log: list[str] | None,
) -> None:
    """Run (or resume) every run of the experiment at once, sharing each endpoint.

    Each run is an ordinary run folder under the experiment's folder; killing the command
    and starting it again resumes every one of them.
    """
    with one_sentence():
        if dry_run:
            _dry_run(file, gpus, ray, log)
            return
        results = api.experiment(file, ConsoleListener(), gpus, ray, retry_failed, log)
    console.print(runs_table(results))
    for name, result in results.items():  # named as the experiment file's keys
        for sentence in result.alerts:
            alert(f"{name}: {for_keywords(sentence, run_defaults())}")
    console.print(f"Tables: mad-eval experiment tables {file}")


# The summary's numbers: a debate's Maj, Debate and Δ; a single run's mean@K and maj@K.
DEBATE = {"Maj": "maj", "Debate": "debate", "Δ": "delta"}
SINGLE = {"mean@K": "mean_at_k", "maj@K": "maj_at_k"}


def runs_table(results: dict[str, Run]) -> Table:
    """A row per run: its questions and its numbers, Δ signed; a column only where some run
    has a value (an experiment without single runs has no mean@K)."""
    rows = {name: _numbers(result) for name, result in results.items()}
    shown = [c for c in {**DEBATE, **SINGLE} if any(r.get(c) is not None for r in rows.values())]
    table = Table(title="runs", show_lines=False)
    for column in ("run", "questions", *shown):
        table.add_column(column, justify="left" if column == "run" else "right")
    for name, row in rows.items():
        cells = [_pct(row.get(column), signed=column == "Δ") for column in shown]
        table.add_row(name, str(results[name].metrics["questions"]), *cells)
    return table


def _numbers(result: Run) -> dict[str, float | None]:
    picked = SINGLE if result.rounds == 0 else DEBATE
    return {column: result.metrics.get(key) for column, key in picked.items()}


def _pct(value: object, signed: bool = False) -> str:
    if not isinstance(value, int | float):
        return "-"
    return f"{value:+.1f}" if signed else f"{value:.1f}"


# Up to this many runs a dry run prints one line each; more, one line per model.
LISTED = 50


def _dry_run(file: Path, gpus: str | None, ray: str | None, log: list[str] | None) -> None:
    plan = api.experiment_plan(file, gpus, ray, log)
    experiment, states = plan.experiment, plan.states
    title = f"{experiment.name}: {counted(len(states), 'run')} -> {experiment.out}"
    if len(states) <= LISTED:
        table = Table(title=title)
        for column in ("run", "grids", "questions", "turns", "recorded"):
            left = column in ("run", "grids")
            table.add_column(column, justify="left" if left else "right", overflow="fold")
        grids = experiment.memberships()
        for s in states:
            table.add_row(
                s.cell.name,
                ", ".join(grids[s.cell.name]),
                str(s.questions),
                str(s.requests),
                str(s.done),
            )
    else:
        table = Table(title=f"{title}, by model")
        for column in ("model", "runs", "turns", "recorded"):
            table.add_column(column, justify="left" if column == "model" else "right")
        by_model: dict[str, list[int]] = {}
        for s in states:
            sums = by_model.setdefault(str(s.cell.axes["model"]), [0, 0, 0])
            sums[0] += 1
            sums[1] += s.requests
            sums[2] += min(s.done, s.requests)
        for model, (runs, turns, done) in by_model.items():
            table.add_row(model, str(runs), str(turns), str(done))
    console.print(table)
    console.print(
        f"{counted(plan.needed, 'turn')} in all, {plan.held} recorded, "
        f"{plan.needed - plan.held} to ask."
    )
    for line in plan.serving:
        console.print(line, markup=False, highlight=False)
    for line in exposure_lines(plan.exposure, experiment.path.parent):
        console.print(outward(line), markup=False, highlight=False, soft_wrap=True)


def exposure_lines(exposure: Exposure, home: Path) -> list[str]:
    """Where the questions go, the files they come from outside the experiment's folder,
    and the servers it starts: what a file from someone else could send where."""
    lines = []
    if exposure.endpoints:
        lines.append("Questions are sent to:")
        lines += [f"  {url} ({_runs(cells)})" for url, cells in exposure.endpoints.items()]
    if exposure.files:
        lines.append(f"Benchmark files outside the experiment's folder ({home.resolve()}):")
        lines += [f"  {file} (outside; {_runs(cells)})" for file, cells in exposure.files.items()]
    for model, command in exposure.servers.items():
        lines.append(f"Server for {model}: {command}")
    for model in exposure.remote_code:
        lines.append(
            f"Served with --trust-remote-code: {model}'s server runs the Python code that "
            "comes with its checkpoint."
        )
    return lines


def _runs(cells: list[str], shown: int = 3) -> str:
    """'2 runs: a, b', naming a few."""
    names = ", ".join(cells[:shown]) + (", ..." if len(cells) > shown else "")
    return f"{counted(len(cells), 'run')}: {names}"


@options.command(app, ["replicates"], {"replicates": options.REPLICATES}, arguments=[FILE])
def tables(file: Path, **chosen: Any) -> None:
    """Write every table (CSV, LaTeX, Markdown) and figure the experiment declares, and a
    summary.md linking them, into its folder."""
    with one_sentence():
        written = api.experiment_tables(file, **chosen)
    for path in written:
        console.print(f"Wrote {path}")
