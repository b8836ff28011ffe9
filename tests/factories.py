"""Builders shared by the tests: records made by hand, with only what a test looks at given."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mad_eval import api
from mad_eval.records import Turn


def turn(
    question: str,
    round_: int,
    agent: int,
    answer: str | None,
    correct: bool,
    run: int = 0,
    failed: bool = False,
) -> Turn:
    """One agent's turn of a debate, graded as given; `failed`: the request failed."""
    return Turn(
        run=run,
        question=question,
        round=round_,
        agent=agent,
        model="test",
        seed=0,
        temperature=1.0,
        top_p=0.9,
        max_tokens=64,
        messages_hash="",
        sees=[],
        text=None if failed else f"\\boxed{{{answer}}}",
        answer=None if failed else answer,
        correct=None if failed else correct,
        finish_reason="stop",
        prompt_tokens=1,
        completion_tokens=1,
        latency=0.0,
        error="APIError: boom" if failed else None,
    )


def sim_run(out: Path, model: str = "sim:p0=0.5", limit: int = 12, **settings: Any) -> Path:
    """A simulated debate on the built-in arith questions, run in-process into `out`."""
    api.run(model=model, benchmark="arith", limit=limit, out=out, **settings)
    return out


def write_jsonl(path: Path, rows: list) -> Path:
    """`rows` as a JSON Lines file at `path`."""
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path
