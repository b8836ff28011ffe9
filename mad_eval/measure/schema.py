"""The numbers of metrics.json as formulas over a run's rates, gathered from every metric
family that applies (measure.families); where each sits in metrics.json; and the version of
its layout. compute.py evaluates them."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

from mad_eval.measure import families
from mad_eval.measure.base import Context, Section
from mad_eval.measure.formula import Formula
from mad_eval.measure.prices import Price
from mad_eval.measure.scoring import Scoring
from mad_eval.store.upgrade import METRICS_VERSION
from mad_eval.store.upgrade import MetricsVersionError as MetricsVersionError

SCHEMA_VERSION = METRICS_VERSION  # metrics.json's layout (store.upgrade reads older ones in it)


def formulas(
    scoring: Scoring,
    judged: bool = False,
    price: Price | None = None,
    judge_price: Price | None = None,
) -> dict[str, Formula]:
    """Every number of metrics.json by name (`maj`, `round2.vote_accuracy`, `move1.c2i`, ...)
    as a function of a run's rates: evaluated on all questions for metrics.json, on
    resampled questions for a bootstrap. Rates are fractions; accuracies come out in percent.
    Each family that applies to the run (a voted or a summary kind, `judged` or not) gives
    its own, in the registry's order, with the agents' and the judge's `prices.Price`."""
    context = Context(scoring, judged, price, judge_price)
    families.check_names(scoring)
    found: dict[str, Formula] = {}
    for family in families.applying(context):
        found |= family.formulas(context)
    return found


# Where a numbered formula name's number sits: `round2.x` is rounds[2]["x"], `move1.x` is
# transitions[0]["x"]; each list's row names its number. A family adds its own (`margin3.x`
# is margins[3]["x"]: Family.lists).
LISTS: dict[str, Section] = {
    "round": ("rounds", 0, lambda n: {"round": n}),
    "move": ("transitions", 1, lambda n: {"from_round": n - 1, "to_round": n}),
}


def lists() -> dict[str, Section]:
    """Every numbered head that is a row of a list, the families' too."""
    found = dict(LISTS)
    for family in families.every():
        found |= family.lists
    return found


def locate(name: str) -> tuple[str | None, int | None, str]:
    """Where a formula's number sits in metrics.json: a numbered head is a row of a list
    (`lists`), a plain head a section of its own (`x.y` is x["y"]), and a plain name is
    top level: (section or None, index or None, field)."""
    head, _, field = name.partition(".")
    if not field:
        return None, None, name
    found = re.fullmatch(r"([a-z_]+?)(\d+)", head)
    numbered = lists() if found else {}
    if found and found[1] in numbered:
        section, first, _ = numbered[found[1]]
        return section, int(found[2]) - first, field
    return head, None, field


def lookup(metrics: dict[str, Any], name: str) -> tuple[float | None, float | None]:
    """A number of metrics.json by formula name, with its std over runs."""
    row, field = holder(metrics, name), locate(name)[2]
    return row[field], row[f"{field}_std"]


def holder(metrics: dict[str, Any], name: str) -> dict[str, Any]:
    """The part of metrics.json that holds a formula's number."""
    section, index, _ = locate(name)
    if section is None:
        return metrics
    part: dict[str, Any] = metrics[section] if index is None else metrics[section][index]
    return part


def nest(names: Iterable[str], cell: Callable[[str], dict[str, Any]]) -> dict[str, Any]:
    """metrics.json's shape from flat names (see `locate`); `cell(name)` gives the fields
    one name contributes."""
    out: dict[str, Any] = {"rounds": [], "transitions": []}
    heads = {section: (first, row) for section, first, row in lists().values()}
    for name in names:
        section, index, _ = locate(name)
        if section is None:
            out.update(cell(name))
        elif index is None:
            out.setdefault(section, {}).update(cell(name))
        else:
            rows = out.setdefault(section, [])
            first, row = heads[section]
            while len(rows) <= index:
                rows.append(row(len(rows) + first))
            rows[index].update(cell(name))
    return out


def field_of(name: str) -> str:
    return locate(name)[2]
