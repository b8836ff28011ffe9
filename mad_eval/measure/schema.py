"""The numbers of metrics.json as formulas over a run's rates (in percent): Maj, Debate,
Delta, per-round accuracy, diversity and answer lengths, transitions, the cost and the
diagnostics; and where each sits in metrics.json. measuring.py evaluates them."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from mad_eval.grading.grader import ROUGE
from mad_eval.grading.kinds import get_kind
from mad_eval.grading.rubric import CRITIQUE
from mad_eval.measure.cost import Price, cost_formulas, judge_cost_formulas
from mad_eval.measure.counts import Rates
from mad_eval.measure.dynamics import dynamics_formulas
from mad_eval.measure.formula import Formula, gain, percent, plain


def formulas(
    rounds: int,
    agents: int,
    hub: bool = False,
    critique: bool = False,
    kind: str = "math",
    voters: int | None = None,
    price: Price | None = None,
    judge_price: Price | None = None,
) -> dict[str, Formula]:
    """Every number of metrics.json by name (`maj`, `round2.vote_accuracy`, `move1.c2i`, ...)
    as a function of a run's rates: evaluated on all questions for metrics.json, on
    resampled questions for a bootstrap. Rates are fractions; accuracies come out in percent.
    The votes (`maj`, `debate`, ...) are the system's answers as the run's scoring rule picks
    them. Without debate, maj@K both exactly (`maj_at_k`) and as verl estimates it
    (`maj_at_k_bootstrap`, rules.bootstrap_maj). With `critique`, the judge's mean scores
    and failure rate, over all debate rounds (`critique_total`) and per round
    (`round1.critique_total`). A summary benchmark has ROUGE instead of votes
    (`rouge_formulas`). Every run has its cost (cost.cost_formulas, priced with `price`);
    a voted one the diagnostics of dynamics.dynamics_formulas (`voters`: how many vote; all
    agents unless given); a judged one the judge's cost (`judge_price`)."""
    cost = cost_formulas(rounds, price)
    if critique:
        cost |= judge_cost_formulas(judge_price)
    if not get_kind(kind).voted:
        found = rouge_formulas(rounds) | cost
        return found | critique_formulas(rounds) if critique else found
    found: dict[str, Formula] = {
        "maj": percent("vote0"),
        "debate": percent(f"vote{rounds}"),
        "delta": gain("vote0", f"vote{rounds}"),
    }
    if rounds == 0:  # independent samples: the single-agent numbers
        found["mean_at_k"] = percent("agent0")
        found["maj_at_k"] = percent("vote0")  # exact: the vote of all K answers
        found["maj_at_k_bootstrap"] = percent("maj_boot0")  # verl's maj@K/mean
    for r in range(rounds + 1):
        found |= {
            f"round{r}.vote_accuracy": percent(f"vote{r}"),
            f"round{r}.agent_accuracy": percent(f"agent{r}"),
            f"round{r}.unanimous": percent(f"unanimous{r}"),
            f"round{r}.entropy": plain(f"entropy{r}"),
            f"round{r}.rho": _rho(r),
            f"round{r}.n_eff": _n_eff(r, agents),
            f"round{r}.length_right": plain(f"len_right{r}"),
            f"round{r}.length_wrong": plain(f"len_wrong{r}"),
            f"round{r}.reasoning_tokens": plain(f"reasoning_len{r}"),
            f"round{r}.final_tokens": plain(f"final_len{r}"),
        }
        if hub:
            found[f"round{r}.hub_accuracy"] = percent(f"hub{r}")
    for r in range(1, rounds + 1):
        found |= {
            f"move{r}.c2i": percent(f"c2i{r}"),
            f"move{r}.i2c": percent(f"i2c{r}"),
            f"move{r}.delta": gain(f"c2i{r}", f"i2c{r}"),
        }
    found |= dynamics_formulas(rounds, agents if voters is None else voters) | cost
    if critique:
        found |= critique_formulas(rounds)
    return found


def rouge_formulas(rounds: int) -> dict[str, Formula]:
    """A summary run's numbers, F1 in percent: the ROUGE of the system's summary (the
    consensus one unless the run names another rule) after the last round (`rougeL`) and
    after each round (`round1.rougeL`), the agents' mean per round (`round1.agent_rougeL`),
    and the last round's gain over round 0 (`rougeL_delta`)."""
    found: dict[str, Formula] = {}
    for m in ROUGE:
        found[m] = percent(f"{m}{rounds}")
        found[f"{m}_delta"] = gain(f"{m}0", f"{m}{rounds}")
    for r in range(rounds + 1):
        for m in ROUGE:
            found[f"round{r}.{m}"] = percent(f"{m}{r}")
            found[f"round{r}.agent_{m}"] = percent(f"agent_{m}{r}")
    return found


def critique_formulas(rounds: int) -> dict[str, Formula]:
    """The judge's numbers: mean scores and failure rate over all debate rounds and per round."""
    found: dict[str, Formula] = {}
    for r in ["", *range(1, rounds + 1)]:
        where = f"round{r}." if r != "" else ""
        found |= {f"{where}critique_{name}": plain(f"score{r}:{name}") for name in CRITIQUE}
        found[f"{where}judge_failure_rate"] = percent(f"judge_fail{r}")
    return found


def _rho(r: int) -> Formula:
    """Correlation of two agents' correctness: for exchangeable agents right with probability
    p, P(two agree) = 1 - 2p(1-p)(1-rho). Undefined when every answer is right or wrong."""

    def rho(rates: Rates) -> np.ndarray:
        p, agree = rates[f"agent{r}"], rates[f"agree{r}"]
        spread = 2 * p * (1 - p)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(spread > 0, 1 - (1 - agree) / np.where(spread > 0, spread, 1), np.nan)

    return rho


def _n_eff(r: int, agents: int) -> Formula:
    """The correlation lemma's effective ensemble size N / (1 + (N-1) rho): N independent
    agents are worth N, perfectly correlated ones are worth one."""

    def n_eff(rates: Rates) -> np.ndarray:
        scale = 1 + (agents - 1) * _rho(r)(rates)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(scale > 0, agents / np.where(scale > 0, scale, 1), np.nan)

    return n_eff


def mean_std(values: list[float | None]) -> tuple[float | None, float | None]:
    """Mean and sample standard deviation across runs (std is None with fewer than 2 runs)."""
    present = [v for v in values if v is not None and not math.isnan(v)]
    if not present:
        return None, None
    std = float(np.std(present, ddof=1)) if len(present) > 1 else None
    return float(np.mean(present)), std


# Where a numbered formula name's number sits: `round2.x` is rounds[2]["x"], `move1.x` is
# transitions[0]["x"], `margin3.x` is margins[3]["x"], `cost2.x` cost_by_round[2]["x"],
# `stop1.x` stopping[1]["x"]; each list's row names its number.
LISTS = {
    "round": ("rounds", 0, lambda n: {"round": n}),
    "move": ("transitions", 1, lambda n: {"from_round": n - 1, "to_round": n}),
    "margin": ("margins", 0, lambda n: {"right_in_round0": n}),
    "cost": ("cost_by_round", 0, lambda n: {"round": n}),
    "stop": ("stopping", 0, lambda n: {"after_round": n}),
}


def locate(name: str) -> tuple[str | None, int | None, str]:
    """Where a formula's number sits in metrics.json: a numbered head is a row of a list
    (LISTS), a plain head a section of its own (`cost.x` is cost["x"]), and a plain name is
    top level: (section or None, index or None, field)."""
    head, _, field = name.partition(".")
    if not field:
        return None, None, name
    found = re.fullmatch(r"([a-z_]+?)(\d+)", head)
    if found and found[1] in LISTS:
        section, first, _ = LISTS[found[1]]
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
    return metrics[section] if index is None else metrics[section][index]


def nest(names: Iterable[str], cell: Callable[[str], dict[str, Any]]) -> dict[str, Any]:
    """metrics.json's shape from flat names (see `locate`); `cell(name)` gives the fields
    one name contributes."""
    out: dict[str, Any] = {"rounds": [], "transitions": []}
    heads = {section: (first, row) for section, first, row in LISTS.values()}
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


def json_number(value: float) -> float | None:
    return None if math.isnan(value) else float(value)
