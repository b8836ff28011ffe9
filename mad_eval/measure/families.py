"""The metric families, in the order their numbers appear in metrics.json: a new family is
one module (with its FAMILY) and one line here, or another package's `mad_eval.metrics` entry
point. Counting, Measuring and schema.formulas read them from this registry and name none of
them; two families giving the same formula name or tally key are refused, never merged."""

from __future__ import annotations

from collections.abc import Iterable

from mad_eval.measure import (
    cost,
    dynamics,
    ending,
    judge_scores,
    matched,
    rouge,
    turn_counts,
    votes,
)
from mad_eval.measure.base import Context, Family
from mad_eval.measure.scoring import Scoring
from mad_eval.records import shown
from mad_eval.registry import Registry, RegistryError

FAMILIES: Registry[Family] = Registry("metric family", "mad_eval.metrics", holds=Family)
for _family in (
    votes.FAMILY,
    rouge.FAMILY,
    dynamics.FAMILY,
    ending.FAMILY,
    cost.FAMILY,
    judge_scores.FAMILY,
    matched.FAMILY,
    turn_counts.FAMILY,
):
    FAMILIES.add(_family.name, _family)


def every() -> list[Family]:
    """Every registered family, in the registry's order."""
    return [family for _, family in FAMILIES.items()]


def applying(context: Context) -> list[Family]:
    """The families a run's own numbers come from (not those counted against another run)."""
    return [f for f in every() if not f.paired and f.applies(context)]


def check_names(scoring: Scoring) -> None:
    """Refuse, in one sentence naming both families and who registered them, two families
    that give the same formula name (one would overwrite the other's number in metrics.json)
    or the same tally key (one would count into the other's)."""
    for judged in (False, True):
        context = Context(scoring, judged)
        found = [f for f in every() if f.paired or f.applies(context)]
        unique(((f, f.formulas(context)) for f in found), "formula")
        unique(((f, [*f.keys(scoring), *f.verdict_keys(scoring)]) for f in found), "tally key")
        unique(((f, f.lists) for f in found), "numbered list")


def unique(named: Iterable[tuple[Family, Iterable[str]]], what: str) -> None:
    """Refuse a name two families give, or one family gives twice."""
    owners: dict[str, Family] = {}
    for family, names in named:
        mine, seen = f"the metric family '{family.name}' ({FAMILIES.owner(family.name)})", set()
        for name in names:
            if name in seen:
                raise RegistryError(f"{mine} names the {what} {shown(name, 80)} twice.")
            seen.add(name)
            first = owners.setdefault(name, family)
            if first is not family:
                raise RegistryError(
                    f"{mine} names a {what} {shown(name, 80)}, which the metric family "
                    f"'{first.name}' ({FAMILIES.owner(first.name)}) already names; one of "
                    "them must take another name."
                )


def differences(scoring: Scoring) -> dict[str, tuple[str, str]]:
    """Every number of the run that is one number less another, by name: (first, second),
    for a paired test against zero on the same questions."""
    found: dict[str, tuple[str, str]] = {}
    for family in applying(Context(scoring)):
        found |= family.tests(scoring)
    return found
