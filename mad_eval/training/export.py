"""Training rows in verl's RL data format, written as Parquet (what verl reads) or JSON Lines.

A row: `data_source`, `prompt` (chat messages), `ability`, `reward_model` (`style` "rule"
and the `ground_truth` the reward compares with) and `extra_info` (what the reward reads
besides the gold: `kind`, `answer_protocol`, a choice's `options`; the `question` text and
the template, so training.rows rebuilds any pair prompt from a row; where it came from).
"""

from __future__ import annotations

import io
import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from mad_eval.data.benchmarks import load_questions
from mad_eval.debate.prompts import first_prompt, pair_prompt
from mad_eval.records import Question
from mad_eval.settings.templates import Template, load_template
from mad_eval.store.files import refuse_records, write_atomically
from mad_eval.training.errors import TrainingError
from mad_eval.training.pairs import PAIRINGS, Pair, Summary, build_pairs, pairing_rule
from mad_eval.training.rollouts import Rollout, answer_protocol, read_rollouts
from mad_eval.training.rows import Rows, measure, template_info
from mad_eval.words import counted

FORMATS = (".parquet", ".jsonl")


def pair_rows(
    pairs: list[Pair],
    source: str,
    ability: str,
    pairing: str,
    template: Template | str = "debate",
    answer: str | None = None,
) -> list[dict[str, Any]]:
    """One row per debate pair: the round-1 prompt of agent 0 in a two-agent debate, whose
    own round-0 answer is the pair's first rollout and whose partner's is the second; the
    model weighs both and answers. `ability` is the benchmark's kind; `answer` the answer
    protocol (None: the kind's default), which the prompt asks for and the reward reads."""
    template = _template(template)
    protocol = answer_protocol(ability, answer)
    return [
        _row(
            source,
            pair_prompt(
                _question(pair.first, ability, protocol),
                pair.first.response,
                pair.second.response,
                template,
            ),
            ability,
            pair.first.gold,
            {
                **_grading(ability, pair.first.options, protocol, template),
                "question": pair.first.question,
                "index": i,
                "question_id": pair.first.prompt_id,
                "pairing": pairing,
                "answers": [pair.first.answer, pair.second.answer],
                "correct": [pair.first.correct, pair.second.correct],
                "sources": [pair.first.source, pair.second.source],
            },
        )
        for i, pair in enumerate(pairs)
    ]


def prompt_rows(
    questions: list[Question],
    source: str,
    ability: str,
    template: Template | str = "debate",
    answer: str | None = None,
) -> list[dict[str, Any]]:
    """One row per question: the first-turn prompt the evaluation sends in round 0, asking
    for the answer protocol `answer` (None: each question's own)."""
    template = _template(template)
    rows = []
    for i, q in enumerate(questions):
        protocol = answer_protocol(q.kind, answer or q.answer)
        extra = {
            **_grading(q.kind, q.options, protocol, template),
            "question": q.text,
            "index": i,
            "question_id": q.id,
        }
        prompt = first_prompt(replace(q, answer=protocol), template)
        rows.append(_row(source, prompt, ability, q.gold, extra))
    return rows


def _template(template: Template | str) -> Template:
    return template if isinstance(template, Template) else load_template(template)


def _question(rollout: Rollout, kind: str, answer: str) -> Question:
    """The question a rollout answered, as the prompt builder reads it."""
    meta = {"options": list(rollout.options)} if rollout.options else {}
    return Question(rollout.prompt_id, rollout.question, rollout.gold, meta, kind, answer)


def _grading(kind: str, options: Sequence[str], answer: str, template: Template) -> dict[str, Any]:
    """What the reward needs besides the gold to grade a reply: the kind, the answer
    protocol and the options of a choice (a letter beyond them is no answer); and the
    template the prompt was built from."""
    return {
        "kind": kind,
        "answer_protocol": answer,
        **({"options": list(options)} if options else {}),
        **template_info(template),
    }


def _row(
    source: str, prompt: list[dict[str, str]], ability: str, gold: str, extra: dict[str, Any]
) -> dict[str, Any]:
    return {
        "data_source": source,
        "prompt": prompt,
        "ability": ability,
        "reward_model": {"style": "rule", "ground_truth": gold},
        "extra_info": {"split": "train", **extra},
    }


def check_out(out: Path) -> None:
    """Refuse, before any work, an --out that rows cannot be written to."""
    refuse_records(out)
    if out.suffix not in FORMATS:
        raise ValueError(f"--out must end in {' or '.join(FORMATS)}, got '{out.name}'.")


def write_rows(rows: list[dict[str, Any]], out: Path) -> None:
    """Parquet or JSON Lines, by the file's suffix; written whole, then renamed into place."""
    out = Path(out)
    check_out(out)
    if not rows:
        raise ValueError("no rows to write: nothing was kept.")
    out.parent.mkdir(parents=True, exist_ok=True)
    if out.suffix == ".parquet":
        import pandas as pd  # loaded for Parquet only: every command would pay for it

        data = io.BytesIO()
        pd.DataFrame(rows).to_parquet(data, index=False)
        written = data.getvalue()
    else:
        written = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows).encode()
    write_atomically(out, written, "free space or give another --out.")


def write_pairs(
    source: Path,
    out: Path,
    pairing: str = "freq",
    per_prompt: int = 1,
    max_length: int | None = None,
    copies: int = 1,
    seed: int = 0,
    prompt_template: str = "debate",
    answer: str | None = None,
    data_dir: Path | None = None,
    tokenizer: str | None = None,
) -> Summary:
    """Debate pairs from a run's (or a JSON Lines file's) rollouts whose correctness
    disagrees, written to `out` as verl data; what was read, dropped and kept, and the
    prompts' lengths (counted with `tokenizer`, else estimated)."""
    check_out(Path(out))
    pairing = pairing_rule(pairing)
    template = load_template(prompt_template)
    rollouts = read_rollouts(Path(source), data_dir, answer)
    found, summary = build_pairs(
        rollouts.items,
        pairing,
        per_prompt,
        seed,
        kind=rollouts.kind,
        max_length=max_length,
        copies=copies,
    )
    rows = pair_rows(
        found, rollouts.benchmark, rollouts.kind, PAIRINGS[pairing], template, rollouts.answer
    )
    if not rows:
        raise TrainingError(
            f"no pair to write: of {counted(summary.rollouts, 'rollout')} of "
            f"{counted(summary.prompts, 'prompt')} "
            f"({summary.unparsed} without an answer), dropped {summary.dropped(bool(max_length))}"
            f"; nothing was written to {out}."
        )
    summary.lengths = measure(rows, tokenizer, first_turn=False)
    write_rows(rows, out)
    return summary


def write_prompts(
    benchmark: str | Path,
    out: Path,
    data_dir: Path | None = None,
    limit: int | None = None,
    prompt_template: str = "debate",
    answer: str | None = None,
    tokenizer: str | None = None,
) -> Rows:
    """A benchmark's first-turn prompts (what round 0 asks), written to `out` as verl data;
    the rows written (each row's data_source is the benchmark's name) and their lengths, the
    debate turn's included: a template that cannot build it is refused before writing."""
    check_out(Path(out))
    template = load_template(prompt_template)
    spec, questions = load_questions(benchmark, data_dir, limit)
    rows = prompt_rows(questions, spec.name, spec.kind, template, answer)
    lengths = measure(rows, tokenizer, first_turn=True) if rows else None
    write_rows(rows, out)
    return Rows(rows, lengths)  # type: ignore[arg-type]
