"""`mad-eval train`: self-debate RL data from the evaluation's own prompt builders
(mad_eval.train_pairs, mad_eval.train_prompts)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from mad_eval import api
from mad_eval.cli import options
from mad_eval.cli.ui import console, one_sentence
from mad_eval.words import counted

app = typer.Typer(
    help="Self-debate RL (SDRL) data for verl or TRL: debate pairs built from a model's own "
    "rollouts, and first-turn prompts, as verl Parquet or JSON Lines.",
    no_args_is_help=True,
)
SOURCE = options.argument(
    "source",
    Path,
    metavar="RUN_DIR_OR_JSONL",
    help="A mad-eval run (its round-0 turns are the rollouts, e.g. from `mad-eval "
    "single -k 8`) or a JSON Lines file of prompt_id, question, gold, response.",
)
BENCHMARK = options.argument("benchmark", str, help="Benchmark name, spec .toml or .jsonl file.")
PAIRS = [
    *("out", "pairing", "per_prompt", "max_length", "copies", "repeats", "seed", "prompt_template"),
    *("answer_protocol", "data_dir", "tokenizer"),
]
PROMPTS = ["out", "data_dir", "limit", "prompt_template", "answer_protocol", "tokenizer"]


@options.command(
    app,
    PAIRS,
    {**options.defaults_of(api.train_pairs), "repeats": None},
    options.PAIRS,
    [SOURCE],
)
def pairs(source: Path, **chosen: Any) -> None:
    """Build debate pairs from rollouts whose correctness disagrees; write them as verl data."""
    from mad_eval.training.pairs import PAIRINGS

    if chosen.pop("repeats") is not None:
        raise typer.BadParameter(
            "--repeats is now --copies (copies of each pair's row, each its own group in verl and "
            "TRL); for R debate-turn replies per pair keep --copies 1 and set rollout.n or "
            "num_generations to R.",
            param_hint="'--repeats'",
        )
    with one_sentence(ValueError, data_dir=True):  # a bad file, option or benchmark: one sentence
        s = api.train_pairs(source, **chosen)
    out, max_length, copies = chosen["out"], chosen["max_length"], chosen["copies"]
    console.print(
        f"Read {s.rollouts} rollouts of {s.prompts} prompts: {s.mean_distinct:.2f} distinct "
        f"answers per prompt, {s.unparsed} rollouts without an answer"
        + (f", {s.too_long} longer than {max_length} characters" if max_length else "")
        + f".\nDropped {s.dropped(bool(max_length))}. "
        f"Kept {s.kept} prompts: {s.pairs} {PAIRINGS[s.rule]} pairs"
        + (f" ({s.pairs // copies} distinct, each {copies} times)" if copies > 1 else "")
        + f" -> {out}"
    )
    if copies > 1:
        console.print(
            f"Each pair's row is written {copies} times: verl and TRL sample a group per row, "
            "so these are separate groups (for one group, set rollout.n or num_generations)."
        )
    if s.lengths is not None:
        _print_lengths(s.lengths)


@options.command(app, PROMPTS, options.defaults_of(api.train_prompts), options.PROMPTS, [BENCHMARK])
def prompts(benchmark: str, **chosen: Any) -> None:
    """Write a benchmark's first-turn prompts (what round 0 asks) as verl data."""
    with one_sentence(ValueError, data_dir=True):
        rows = api.train_prompts(benchmark, **chosen)
    what = counted(len(rows), f"{rows[0]['data_source']} prompt")
    console.print(f"Wrote {what} -> {chosen['out']}")
    _print_lengths(rows.lengths)  # type: ignore[attr-defined]


def _print_lengths(lengths: Any) -> None:
    """The longest prompt and the max_prompt_length a trainer needs for these rows."""
    from mad_eval.training.rows import ESTIMATE_NOTE, VERL_DEFAULT_PROMPT_LENGTH

    how = "tokens" if lengths.exact else f"tokens ({ESTIMATE_NOTE})"
    line = f"Longest prompt: {lengths.longest} {how}; set max_prompt_length >= {lengths.longest}"
    if lengths.longest > VERL_DEFAULT_PROMPT_LENGTH:
        line += f" (verl's default {VERL_DEFAULT_PROMPT_LENGTH} cuts longer ones from the left)"
    if lengths.pair_base is not None:
        line += (
            f".\nOn-policy debate turns need max_prompt_length >= {lengths.pair_base} + 2 x the "
            f"response length (e.g. {lengths.debate_turn(1024)} for 1024-token replies)"
        )
    console.print(line + ".")
