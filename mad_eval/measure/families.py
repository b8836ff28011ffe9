"""The metric families, in the order their numbers appear in metrics.json: a new family is
one module (with its FAMILY) and one line here. Counting, Measuring and schema.formulas
read them from this list and name none of them."""

from __future__ import annotations

from mad_eval.measure import cost, dynamics, judge_scores, matched, rouge, turn_counts, votes
from mad_eval.measure.family import Context, Family
from mad_eval.measure.scoring import Scoring

FAMILIES: list[Family] = [
    votes.FAMILY,
    rouge.FAMILY,
    dynamics.FAMILY,
    cost.FAMILY,
    judge_scores.FAMILY,
    matched.FAMILY,
    turn_counts.FAMILY,
]


def applying(context: Context) -> list[Family]:
    """The families a run's own numbers come from (not those counted against another run)."""
    return [f for f in FAMILIES if not f.paired and f.applies(context)]


def differences(scoring: Scoring) -> dict[str, tuple[str, str]]:
    """Every number of the run that is one number less another, by name: (first, second),
    for a paired test against zero on the same questions."""
    found: dict[str, tuple[str, str]] = {}
    for family in applying(Context(scoring)):
        found |= family.tests(scoring)
    return found
