"""Training rows in verl's RL data format, written as Parquet (what verl reads) or JSON Lines.

A row: `data_source`, `prompt` (chat messages), `ability`, `reward_model` (`style` "rule"
and the `ground_truth` the reward compares with) and `extra_info` (where it came from).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from mad_eval.prompts import pair_prompt, question_prompt
from mad_eval.records import Question
from mad_eval.training.pairs import Pair

FORMATS = (".parquet", ".jsonl")


def pair_rows(pairs: list[Pair], source: str, ability: str, pairing: str) -> list[dict[str, Any]]:
    """One row per debate pair: the model is asked to weigh both rollouts and answer.
    `ability` is the benchmark's kind, which also picks the answer format."""
    return [
        _row(
            source,
            pair_prompt(pair.first.question, pair.first.response, pair.second.response, ability),
            ability,
            pair.first.gold,
            {
                **_grading(ability, pair.first.options),
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


def prompt_rows(questions: list[Question], source: str, ability: str) -> list[dict[str, Any]]:
    """One row per question: the first-turn prompt the evaluation sends in round 0."""
    return [
        _row(
            source,
            question_prompt(q.text, kind=q.kind),
            ability,
            q.gold,
            {**_grading(q.kind, q.options), "index": i, "question_id": q.id},
        )
        for i, q in enumerate(questions)
    ]


def _grading(kind: str, options: Sequence[str]) -> dict[str, Any]:
    """What the reward needs besides the gold to grade a reply: the kind, and the options
    of a choice (a letter beyond them is no answer)."""
    return {"kind": kind, **({"options": list(options)} if options else {})}


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


def write_rows(rows: list[dict[str, Any]], out: Path) -> None:
    """Parquet or JSON Lines, by the file's suffix; written whole, then renamed into place."""
    out = Path(out)
    if out.suffix not in FORMATS:
        raise ValueError(f"--out must end in {' or '.join(FORMATS)}, got '{out.name}'.")
    if not rows:
        raise ValueError("no rows to write: nothing was kept.")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    if out.suffix == ".parquet":
        pd.DataFrame(rows).to_parquet(tmp, index=False)
    else:
        tmp.write_text(
            "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8"
        )
    tmp.replace(out)
