"""`mad-eval train`: self-debate RL data from the evaluation's own prompt builders."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from mad_eval import options
from mad_eval.benchmarks import BenchmarkError, load_questions
from mad_eval.store import StoreError
from mad_eval.training import (
    PAIRINGS,
    build_pairs,
    pair_rows,
    pairing_rule,
    prompt_rows,
    read_rollouts,
    write_rows,
)
from mad_eval.ui import console, fail

app = typer.Typer(
    help="Self-debate RL (SDRL) data for verl or TRL: debate pairs built from a model's own "
    "rollouts, and first-turn prompts, as verl Parquet or JSON Lines.",
    no_args_is_help=True,
)
ERRORS = (StoreError, BenchmarkError, ValueError)

Out = Annotated[
    Path, typer.Option(help="File to write: .parquet (verl's format) or .jsonl, the same rows.")
]


@app.command()
def pairs(
    source: Annotated[
        Path,
        typer.Argument(
            metavar="RUN_DIR_OR_JSONL",
            help="A mad-eval run (its round-0 turns are the rollouts, e.g. from `mad-eval "
            "single -k 8`) or a JSON Lines file of prompt_id, question, gold, response.",
        ),
    ],
    out: Out,
    pairing: Annotated[
        str,
        typer.Option(
            metavar="freq|rand",
            help="freq (or frequency): a rollout of the most common answer and one of the "
            "second most common; rand (or random): two distinct rollouts drawn uniformly.",
        ),
    ] = "freq",
    per_prompt: Annotated[int, typer.Option(help="Pairs per prompt, at most.")] = 1,
    seed: Annotated[int, typer.Option(help="Seed of the draws and of each pair's order.")] = 0,
    data_dir: options.DataDir = None,
) -> None:
    """Build debate pairs from rollouts whose correctness disagrees; write them as verl data."""
    try:
        pairing = pairing_rule(pairing)
        rollouts = read_rollouts(source, data_dir)
        found, summary = build_pairs(rollouts.items, pairing, per_prompt, seed, rollouts.kind)
        write_rows(pair_rows(found, rollouts.benchmark, rollouts.kind, PAIRINGS[pairing]), out)
    except ERRORS as exc:
        raise fail(str(exc)) from None
    s = summary
    console.print(
        f"Read {s.rollouts} rollouts of {s.prompts} prompts: {s.mean_distinct:.2f} distinct "
        f"answers per prompt, {s.unparsed} rollouts without an answer.\n"
        f"Dropped {s.all_correct} prompts all correct and {s.all_wrong} all wrong"
        + (f", and {s.one_answer} with one distinct answer" if pairing == "freq" else "")
        + f". Kept {s.kept} prompts: {s.pairs} {PAIRINGS[pairing]} pairs -> {out}"
    )


@app.command()
def prompts(
    benchmark: Annotated[str, typer.Argument(help="Benchmark name, spec .toml or .jsonl file.")],
    out: Out,
    data_dir: options.DataDir = None,
    limit: options.Limit = None,
) -> None:
    """Write a benchmark's first-turn prompts (what round 0 asks) as verl data."""
    try:
        spec, questions = load_questions(benchmark, data_dir, limit)
        write_rows(prompt_rows(questions, spec.name, spec.kind), out)
    except ERRORS as exc:
        raise fail(str(exc)) from None
    console.print(f"Wrote {len(questions)} {spec.name} prompts -> {out}")
