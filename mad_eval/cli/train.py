"""`mad-eval train`: self-debate RL data from the evaluation's own prompt builders."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from mad_eval.cli import options
from mad_eval.cli.ui import console, fail
from mad_eval.errors import UserError

app = typer.Typer(
    help="Self-debate RL (SDRL) data for verl or TRL: debate pairs built from a model's own "
    "rollouts, and first-turn prompts, as verl Parquet or JSON Lines.",
    no_args_is_help=True,
)
ERRORS = (UserError, ValueError)  # a bad file, option or benchmark: one sentence

DataDir = options.annotated("data_dir")
Limit = options.annotated("limit")
Out = Annotated[
    Path, typer.Option(help="File to write: .parquet (verl's format) or .jsonl, the same rows.")
]
PromptTemplate = Annotated[
    str,
    typer.Option(
        metavar="NAME|FILE",
        help="Prompt template, as in evaluation: debate (the own rollout quoted as agent 0's), "
        "conversation (the own rollout an assistant turn), another built-in one or a .toml file.",
    ),
]


def _answer_protocol(default: str) -> Any:
    return typer.Option(
        metavar="NAME",
        help="How the prompts ask for the final answer and the reward reads it: boxed, "
        f"answer-line, math-verify, braces (default: {default}).",
    )


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
    max_length: Annotated[
        int | None,
        typer.Option(
            help="Leave out rollouts longer than this many characters (e.g. truncated ones)."
        ),
    ] = None,
    repeats: Annotated[
        int, typer.Option(help="Rows per pair: second-turn replies sampled per debate context.")
    ] = 1,
    seed: Annotated[int, typer.Option(help="Seed of the draws and of each pair's order.")] = 0,
    prompt_template: PromptTemplate = "debate",
    answer_protocol: Annotated[
        str | None,
        _answer_protocol("the run's, else boxed; the rollouts are graded with it"),
    ] = None,
    data_dir: DataDir = None,
) -> None:
    """Build debate pairs from rollouts whose correctness disagrees; write them as verl data."""
    from mad_eval.setup.templates import load_template
    from mad_eval.training import (
        PAIRINGS,
        build_pairs,
        pair_rows,
        pairing_rule,
        read_rollouts,
        write_rows,
    )

    try:
        pairing = pairing_rule(pairing)
        template = load_template(prompt_template)
        rollouts = read_rollouts(source, data_dir, answer_protocol)
        found, summary = build_pairs(
            rollouts.items,
            pairing,
            per_prompt,
            seed,
            kind=rollouts.kind,
            max_length=max_length,
            repeats=repeats,
        )
        rows = pair_rows(
            found, rollouts.benchmark, rollouts.kind, PAIRINGS[pairing], template, rollouts.answer
        )
        write_rows(rows, out)
    except ERRORS as exc:
        raise fail(str(exc)) from None
    s = summary
    dropped = [f"{s.all_correct} prompts all correct", f"{s.all_wrong} all wrong"]
    dropped += [f"{s.one_answer} with one distinct answer"] if pairing == "freq" else []
    dropped += [f"{s.all_too_long} with every rollout too long"] if max_length else []
    console.print(
        f"Read {s.rollouts} rollouts of {s.prompts} prompts: {s.mean_distinct:.2f} distinct "
        f"answers per prompt, {s.unparsed} rollouts without an answer"
        + (f", {s.too_long} longer than {max_length} characters" if max_length else "")
        + f".\nDropped {', '.join(dropped[:-1])} and {dropped[-1]}. "
        f"Kept {s.kept} prompts: {s.pairs} {PAIRINGS[pairing]} pairs"
        + (f" ({s.pairs // repeats} distinct, each {repeats} times)" if repeats > 1 else "")
        + f" -> {out}"
    )


@app.command()
def prompts(
    benchmark: Annotated[str, typer.Argument(help="Benchmark name, spec .toml or .jsonl file.")],
    out: Out,
    data_dir: DataDir = None,
    limit: Limit = None,
    prompt_template: Annotated[
        str,
        typer.Option(
            metavar="NAME|FILE",
            help="Prompt template whose round-0 messages are written: debate, conversation, "
            "another built-in one or a .toml file.",
        ),
    ] = "debate",
    answer_protocol: Annotated[str | None, _answer_protocol("the benchmark's")] = None,
) -> None:
    """Write a benchmark's first-turn prompts (what round 0 asks) as verl data."""
    from mad_eval.data.benchmarks import load_questions
    from mad_eval.setup.templates import load_template
    from mad_eval.training import prompt_rows, write_rows

    try:
        template = load_template(prompt_template)
        spec, questions = load_questions(benchmark, data_dir, limit)
        write_rows(prompt_rows(questions, spec.name, spec.kind, template, answer_protocol), out)
    except ERRORS as exc:
        raise fail(str(exc)) from None
    console.print(f"Wrote {len(questions)} {spec.name} prompts -> {out}")
