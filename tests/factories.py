"""Builders shared by the tests: records made by hand, with only what a test looks at given."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mad_eval import api
from mad_eval.measure.compute import Measuring
from mad_eval.measure.counts import Tallies, by_debate
from mad_eval.measure.scoring import Scoring
from mad_eval.records import Turn, Verdict


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


def compute_metrics(
    turns: list[Turn],
    scoring: Scoring,
    groups: dict[str, list[int]] | None = None,
    tallies: Tallies | None = None,
    verdicts: list[Verdict] | None = None,
) -> dict[str, Any]:
    """metrics.json from a list of turns (see Measuring, which reads them a debate at a
    time). `tallies` are the turns' (and verdicts') own, when the caller has counted them
    already."""
    if not turns:
        raise ValueError("no turns recorded yet: nothing to measure.")
    runs = sorted({t.run for t in turns})
    questions = sorted({t.question for t in turns})
    measuring = Measuring(runs, questions, scoring, groups, count=tallies is None)
    for debate in by_debate(turns):
        measuring.add(debate)
    if tallies is None:
        tallies = measuring.tallies(verdicts)
    return measuring.metrics(tallies, verdicts)
