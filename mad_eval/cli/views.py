"""`mad-eval table` and `plot`: finished runs as paper tables and figures (mad_eval.table,
mad_eval.plot)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mad_eval import api
from mad_eval.cli import options
from mad_eval.cli.app import app
from mad_eval.cli.ui import console, one_sentence
from mad_eval.words import counted

RUN_DIRS = options.argument(
    "run_dirs",
    list[Path],
    metavar="RUN",
    help="Run directories, any number, or folders holding them (results/, an "
    "experiment's folder): every run folder below is read.",
)
TABLE = ["layout", "format", "label", "baseline", "error", "replicates", "out", "prices"]


@options.command(
    app,
    TABLE,
    {**options.defaults_of(api.table), "replicates": options.REPLICATES},
    options.TABLE,
    [RUN_DIRS],
)
def table(run_dirs: list[Path], **chosen: Any) -> None:
    """Print a paper table of several runs, grouped by benchmark and method."""
    with one_sentence(ValueError):
        text = api.table(run_dirs, **chosen)
    out = chosen["out"]
    if out is None:
        print(text, end="")
    else:
        import warnings

        from mad_eval.errors import SkippedRun
        from mad_eval.reporting.paper import run_folders

        with warnings.catch_warnings():  # each skipped folder was said as the table was made
            warnings.simplefilter("ignore", SkippedRun)
            found = run_folders(run_dirs, judged=chosen["layout"] == "critique")
        runs = counted(len(found), "run folder")
        console.print(f"Wrote {out} ({chosen['layout']} layout, {runs}).")


@options.command(
    app,
    ["out", "label", "replicates", "style"],
    {**options.defaults_of(api.plot), "replicates": options.REPLICATES},
    options.PLOT,
    [RUN_DIRS],
)
def plot(run_dirs: list[Path], **chosen: Any) -> None:
    """Draw accuracy by round, transitions, diversity (N_eff), Δ by round-0 margin, drift
    and early stopping as PNG files.

    Where a debate run is given with a `mad-eval single` run of its model and benchmark,
    also accuracy against tokens per question (budget.png): the debate after each round,
    the single run's maj@m, and the Pareto front.
    """
    with one_sentence(ValueError):
        written = api.plot(run_dirs, **chosen)
    for path in written:
        console.print(f"Wrote {path}")
