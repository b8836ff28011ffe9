"""What a metric family declares: its tally keys and how it counts a debate (or the judge's
verdicts), its formulas, which of its numbers get intervals and paired tests, and its plain
sums over turns. Counting, Measuring, Totals and schema.formulas read every family from the one
list in measure.families."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mad_eval.measure.formula import Formula
from mad_eval.measure.prices import Price
from mad_eval.measure.scoring import Scoring
from mad_eval.measure.tallies import Tallies
from mad_eval.records import Turn, Verdict
from mad_eval.voting.groups import Same

Add = Callable[[str, float, float], None]
# A list of rows in metrics.json that numbered formula names fill: its key, the number of its
# first row, and the fields that name a row (`margin3.x` is margins[3]["x"], its row
# {"right_in_round0": 3}).
Section = tuple[str, int, Callable[[int], dict[str, Any]]]


@dataclass
class ScoredRound:
    """One round of one debate as the tally saw it: its turns that did not fail (by agent),
    their answer groups (a voted kind's only), whether the system's answer was right (None:
    not scored, or a summary), whether the rule scored the round, and the turn it picked.
    `carried`: a round after its protocol ended the debate, the last spoken one's again.
    `tie`: what the rule's seeded draw chose among (answer groups, for the rules here), None
    where no tie needed a draw."""

    live: list[Turn]
    groups: list[list[Turn]]
    vote: bool | None
    scored: bool = False
    picked: Turn | None = None
    carried: bool = False
    tie: list[Any] | None = None

    @property
    def unanimous(self) -> bool:
        return len(self.groups) == 1 and len(self.groups[0]) == len(self.live)


@dataclass
class Debate:
    """One run's turns of one question, with each of its rounds 0..scoring.rounds that has
    turns as the scoring rule scored it: what a family counts."""

    run: int
    question: str
    turns: list[Turn]
    rounds: dict[int, ScoredRound]  # in round order
    scoring: Scoring
    same: Same

    def spoken(self, r: int) -> int:
        """The round whose answers stand for round `r`: `r`, or the last one spoken where
        its protocol ended the debate before `r`."""
        stopped = self.scoring.stopped(self.run, self.question)
        return r if stopped is None else min(r, stopped)


@dataclass
class VerdictCounts:
    """The arrays a family counts the judge's verdicts into: num and den by key, each
    [runs, questions]; `at(verdict)` is the verdict's cell."""

    num: dict[str, np.ndarray]
    den: dict[str, np.ndarray]
    row: dict[int, int]
    col: dict[str, int]

    def at(self, verdict: Verdict) -> tuple[int, int]:
        return self.row[verdict.run], self.col[verdict.question]


@dataclass(frozen=True)
class Context:
    """What decides a family's numbers besides its counts: the run's scoring, whether it
    was judged, and its agents' and judge's prices (prices.Price; None: tokens only)."""

    scoring: Scoring
    judged: bool = False
    price: Price | None = None
    judge_price: Price | None = None


@dataclass(frozen=True)
class Count:
    """A plain count of metrics.json: what one turn adds to it (a whole number; a bool is
    0 or 1), summed over the run's turns."""

    name: str
    of: Callable[[Turn], int]
    shown: bool = True  # False: counted for a Share, or for a reader of Totals, not written


@dataclass(frozen=True)
class Share:
    """One count over another (in percent when `percent`); None where the second is 0."""

    name: str
    part: str
    whole: str
    percent: bool = False

    def of(self, part: int, whole: int) -> float | None:
        if not whole:
            return None
        return 100.0 * part / whole if self.percent else part / whole


def _nothing(_: Any) -> list[str]:
    return []


def _always(_: Context) -> bool:
    return True


@dataclass(frozen=True)
class Family:
    """One metric family, declared once in its own module and listed once in
    measure.families. Every part but the name and the formulas is optional."""

    name: str
    formulas: Callable[[Context], dict[str, Formula]]  # metrics.json's numbers, by name
    applies: Callable[[Context], bool] = _always  # e.g. voted kinds only, judged runs only
    keys: Callable[[Scoring], list[str]] = _nothing  # tally keys counted a debate at a time
    count: Callable[[Debate, Add], None] | None = None
    # Whole numbers or seconds per question: kept as float32, half the memory, exact enough.
    compact: bool = False
    verdict_keys: Callable[[Scoring], list[str]] = _nothing  # tally keys counted from verdicts
    count_verdicts: Callable[[list[Verdict], VerdictCounts], None] | None = None
    intervals: Callable[[Context], list[str]] = _nothing  # names given a 95% interval
    # Numbers that are one number less another: name -> (first, second), tested against 0.
    tests: Callable[[Scoring], dict[str, tuple[str, str]]] = lambda _: {}
    # Fields metrics.json's summary holds beside the formulas' (none in per_run).
    finish: Callable[[dict[str, Any], Tallies], None] | None = None
    # Counted against another run (reporting.pairing), never by Counting or Measuring.
    paired: bool = False
    # The numbered heads of its formula names that are rows of a list (schema.locate).
    lists: dict[str, Section] = field(default_factory=dict)
    # Plain sums over turns (Count) and ratios of two (Share), kept apart from the tallies
    # (compute.Totals): metrics.json holds them after the formulas' numbers, in this order.
    sums: tuple[Count | Share, ...] = ()
    per_run: tuple[str, ...] = ()  # sums each run's row holds too (their total: the rows' sum)
    by_round: tuple[str, ...] = ()  # sums each round's row holds too, in this order
    # The console's panels that show its numbers (reporting.console.PANELS, which orders them):
    # the console shows a panel where a family that applies to the run names it.
    console: tuple[str, ...] = ()
