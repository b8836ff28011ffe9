"""`mad-eval table` and `plot`: finished runs as paper tables and figures."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from mad_eval.cli.app import app
from mad_eval.cli.ui import console, fail
from mad_eval.measure.bootstrap import REPLICATES
from mad_eval.reporting.layouts import ERRORS, FORMATS, LAYOUTS, PAIRED


@app.command()
def table(
    run_dirs: Annotated[
        list[Path], typer.Argument(metavar="RUN", help="Run directories, any number.")
    ],
    layout: Annotated[
        str,
        typer.Option(
            metavar="|".join(LAYOUTS),
            help="debate: Maj, Debate, Δ per benchmark; single: mean@K, maj@K (exact); "
            "single-bootstrap: maj@K as verl estimates it (1000 seeded resamples); rounds: vote "
            "accuracy after each round; transitions: C→I, I→C per round; lengths: tokens of "
            "correct and incorrect answers per round; diversity: unanimous share, answer "
            "entropy, ρ and N_eff per round; critique: the judge's scores; rouge: the consensus "
            "summary's ROUGE-1/2/L per round (summary benchmarks); cost: calls, requests, "
            "tokens, latency and money per question, per round and for the judge; margin: Δ "
            "split by how many voters were right in round 0, and the oracle gap; drift: change "
            "in mean agent accuracy per round, Δ = drift + aggregation; conformity: agents "
            "adopting the previous round's plurality, right or wrong; stopping: the vote and "
            "cost had the debate stopped after round r or at unanimity; budget: Maj, Debate, "
            "and self-consistency given the debate's compute, maj@G (G = N(T+1)) and the vote "
            "of the m samples its tokens buy, each debate run paired with a `mad-eval single` "
            "run of its model and benchmark among the runs given.",
        ),
    ] = "debate",
    fmt: Annotated[
        str,
        typer.Option(
            "--format",
            metavar="|".join(FORMATS),
            help="csv: tidy, a row per method, benchmark and number, with std, 95% bootstrap "
            "interval and p-value; latex: booktabs, best values bold; md: Markdown.",
        ),
    ] = "md",
    label: Annotated[
        list[str] | None,
        typer.Option(
            metavar="RUN=NAME",
            help="Name a run's method (repeatable); by default the settings that differ "
            "between the runs name them.",
        ),
    ] = None,
    baseline: Annotated[
        str | None,
        typer.Option(help="The method others are tested against (default: the first)."),
    ] = None,
    error: Annotated[
        str,
        typer.Option(
            metavar="|".join(ERRORS),
            help="Error bars in latex and md: std over seeded runs, half the 95% bootstrap "
            "interval over questions, or none.",
        ),
    ] = "std",
    replicates: Annotated[
        int, typer.Option(help="Bootstrap resamples of the questions.")
    ] = REPLICATES,
    out: Annotated[
        Path | None, typer.Option(help="Write the table here, not to the screen.")
    ] = None,
    prices: Annotated[
        Path | None,
        typer.Option(
            metavar="FILE",
            help="A TOML file of dollars per 1M input, cached input and output tokens "
            "(README: Cost): the cost layout adds money.",
        ),
    ] = None,
) -> None:
    """Print a paper table of several runs, grouped by benchmark and method."""
    from mad_eval.measure.prices import read_prices
    from mad_eval.reporting.results import load_runs, parse_labels
    from mad_eval.reporting.tables import render, tidy
    from mad_eval.store.files import refuse_records
    from mad_eval.store.folder import StoreError

    for value, allowed, name in (
        (layout, LAYOUTS, "--layout"),
        (fmt, FORMATS, "--format"),
        (error, ERRORS, "--error"),
    ):
        if value not in allowed:
            raise fail(f"{name} must be one of {', '.join(allowed)}, got '{value}'.")
    if replicates < 100:
        raise fail(f"--replicates must be at least 100, got {replicates}.")
    try:
        if out is not None:
            refuse_records(out)
        if layout in PAIRED:
            from mad_eval.reporting.pairing import load_paired

            runs = load_paired(run_dirs, parse_labels(label or []), replicates, read_prices(prices))
        else:
            runs = load_runs(run_dirs, parse_labels(label or []), prices=read_prices(prices))
        text = render(tidy(runs, layout, baseline, replicates), fmt, error)
    except (StoreError, ValueError) as exc:
        raise fail(str(exc)) from None
    if out is None:
        print(text, end="")
        return
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    console.print(f"Wrote {out} ({layout} layout, {len(runs)} runs).")


@app.command()
def plot(
    run_dirs: Annotated[
        list[Path], typer.Argument(metavar="RUN", help="Run directories, any number.")
    ],
    out: Annotated[Path, typer.Option(help="Folder the PNG files are written to.")] = Path(
        "results/plots"
    ),
    label: Annotated[
        list[str] | None,
        typer.Option(metavar="RUN=NAME", help="Name a run's method (repeatable), as in table."),
    ] = None,
    replicates: Annotated[
        int, typer.Option(help="Bootstrap resamples for the 95% intervals drawn.")
    ] = REPLICATES,
) -> None:
    """Draw accuracy by round, transitions, diversity (N_eff), Δ by round-0 margin, drift
    and early stopping as PNG files.

    Where a debate run is given with a `mad-eval single` run of its model and benchmark,
    also accuracy against tokens per question (budget.png): the debate after each round,
    the single run's maj@m, and the Pareto front.
    """
    from mad_eval.reporting.plots import draw  # matplotlib loads only when plotting
    from mad_eval.reporting.results import load_runs, parse_labels
    from mad_eval.store.files import refuse_records
    from mad_eval.store.folder import StoreError

    try:
        refuse_records(out)
        runs = load_runs(run_dirs, parse_labels(label or []))
        written = draw(runs, out, replicates)
    except (StoreError, ValueError) as exc:
        raise fail(str(exc)) from None
    for path in written:
        console.print(f"Wrote {path}")
