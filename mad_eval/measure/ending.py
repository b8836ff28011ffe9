"""Debates a protocol ended before their last round (stops.jsonl): the share that ended early
and the round they ended after, for runs whose protocol may end one (a judge's verdict, a
consensus rule). A stopped debate's later rounds count its last answers in every other family
(counts.scored_rounds), so these numbers say how often that happened, not what it changed."""

from __future__ import annotations

from mad_eval.measure.base import Add, Context, Debate, Family
from mad_eval.measure.formula import Formula, percent, plain
from mad_eval.measure.scoring import Scoring


def keys(scoring: Scoring) -> list[str]:
    """`ended` (debates ended early, over all) and `ended_round` (their last round)."""
    return ["ended", "ended_round"]


def count(debate: Debate, add: Add) -> None:
    stopped = debate.scoring.stopped(debate.run, debate.question)
    add("ended", stopped is not None, 1)
    if stopped is not None:
        add("ended_round", stopped, 1)


def formulas(context: Context) -> dict[str, Formula]:
    """`ended`: the percent of debates ended before the last round; `ended_round`: the mean
    round they ended after."""
    return {"ended": percent("ended"), "ended_round": plain("ended_round")}


FAMILY = Family(
    name="ending",
    formulas=formulas,
    applies=lambda context: context.scoring.ends is not None and context.scoring.rounds > 0,
    keys=keys,
    count=count,
)
