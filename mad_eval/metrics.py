"""Pure functions from turns to the paper's numbers (in percent): Maj, Debate, Delta,
per-round accuracy, diversity and answer lengths, and transitions, averaged over seeded
runs with their spread."""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from mad_eval.cost import Price, cost_formulas, judge_cost_formulas
from mad_eval.dynamics import differences, dynamics_formulas
from mad_eval.formula import Formula, gain, percent, plain
from mad_eval.grading import ROUGE
from mad_eval.kinds import get_kind
from mad_eval.prompts import holds_quoting_tags
from mad_eval.records import Turn, Verdict
from mad_eval.rubric import CRITIQUE
from mad_eval.rules import default_rule, majority_vote
from mad_eval.tally import (
    Counting,
    Rates,
    Tallies,
    by_debate,
    tally_verdicts,
)

__all__ = ["compute_metrics", "formulas", "lookup", "majority_vote", "mean_std"]


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


def _nest(names: Iterable[str], cell: Callable[[str], dict[str, Any]]) -> dict[str, Any]:
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


def _field(name: str) -> str:
    return locate(name)[2]


def _value(value: float) -> float | None:
    return None if math.isnan(value) else float(value)


def compute_metrics(
    turns: list[Turn],
    agents: int,
    rounds: int,
    voters: list[int],
    seed: int,
    hub: int | None = None,
    groups: dict[str, list[int]] | None = None,
    tallies: Tallies | None = None,
    verdicts: list[Verdict] | None = None,
    kind: str = "math",
    rule: str | None = None,
) -> dict[str, Any]:
    """metrics.json from a list of turns (see Measuring, which reads them a debate at a
    time). `tallies` are the turns' (and verdicts') own, when the caller has counted them
    already."""
    if not turns:
        raise ValueError("no turns recorded yet: nothing to measure.")
    runs = sorted({t.run for t in turns})
    questions = sorted({t.question for t in turns})
    measuring = Measuring(
        runs,
        questions,
        agents,
        rounds,
        voters,
        seed,
        hub,
        groups,
        kind,
        rule,
        count=tallies is None,
    )
    for debate in by_debate(turns):
        measuring.add(debate)
    if tallies is None:
        tallies = measuring.tallies(verdicts)
    return measuring.metrics(tallies, verdicts)


class Totals:
    """The counts of metrics.json that are plain sums over turns, added a debate at a time."""

    def __init__(self) -> None:
        self.by_run: dict[int, Counter[str]] = defaultdict(Counter)
        self.all: Counter[str] = Counter()
        self.truncated: Counter[int] = Counter()  # by round
        self.shared: Counter[int] = Counter()  # prompt tokens a prefix cache can skip, by round
        self.context: Counter[int] = Counter()

    def add(self, turns: list[Turn]) -> None:
        """Count one debate's turns (one run's, so its counts are added to that run once)."""
        live = [t for t in turns if not t.failed]
        failed = [t for t in turns if t.failed]
        unparsed = sum(1 for t in live if t.answer is None)
        truncated = [t.round for t in turns if t.truncated_in_reasoning]
        if turns:
            mine = self.by_run[turns[0].run]
            mine["turns"] += len(turns)
            mine["unparsed"] += unparsed
            mine["truncated_in_reasoning"] += len(truncated)
            mine["failed_turns"] += len(failed)
        self.truncated.update(truncated)
        for t in turns:
            if t.context_tokens and t.prefix_tokens is not None:
                self.shared[t.round] += t.prefix_tokens
                self.context[t.round] += t.context_tokens
        counts = self.all
        counts["live"] += len(live)
        counts["failed_sent"] += sum(1 for t in failed if t.attempts > 0)
        counts["length_stops"] += sum(1 for t in live if t.finish_reason == "length")
        counts["reasoning_turns"] += sum(1 for t in live if t.reasoning)
        counts["context_cut_turns"] += sum(1 for t in turns if t.cut_tokens)
        counts["context_cut_tokens"] += sum(t.cut_tokens for t in turns)
        counts["retried_turns"] += sum(1 for t in turns if t.attempts > 1)
        counts["requests_sent"] += sum(t.attempts for t in turns)
        counts["cached_turns"] += sum(1 for t in turns if t.cached)
        # Replies that wrote a tag prompts quote with: escaped wherever they were quoted.
        counts["replies_with_quoting_tags"] += sum(
            1 for t in turns if holds_quoting_tags(t.text) or holds_quoting_tags(t.reasoning)
        )

    def prefix_share(self) -> dict[str, Any]:
        """The fraction of prompt tokens that repeat a prefix another agent already sent for
        the same question and round: what vLLM's prefix cache can skip. Pooled over runs."""
        by_round = {r: self.shared[r] / self.context[r] for r in sorted(self.context)}
        total = self.context.total()
        return {"overall": self.shared.total() / total if total else None, "by_round": by_round}


class Measuring:
    """metrics.json built a debate (one run's turns of one question) at a time, so a run of
    any size is measured without holding its turns: the tallies behind every rate
    (tally.Counting), the plain sums (Totals), and the same for each agent group.

    The system's answers are those the scoring `rule` picks (None: the kind's default),
    recorded as `score`. With a `hub`, its own accuracy per round; with several `groups`
    (label -> agents), the same numbers for each group's agents alone, voted among them by
    the kind's default rule; with the judge's verdicts, the critique scores. `count=False`
    skips the team's own tallies, for a caller that has them already."""

    def __init__(
        self,
        runs: list[int],
        questions: list[str],
        agents: int,
        rounds: int,
        voters: list[int],
        seed: int,
        hub: int | None = None,
        groups: dict[str, list[int]] | None = None,
        kind: str = "math",
        rule: str | None = None,
        count: bool = True,
        price: Price | None = None,
        judge_price: Price | None = None,
    ):
        self.agents, self.rounds, self.voters, self.seed, self.hub = (
            agents,
            rounds,
            voters,
            seed,
            hub,
        )
        self.kind, self.rule = kind, rule or default_rule(kind)
        self.price, self.judge_price = price, judge_price
        self.counting = (
            Counting(runs, questions, voters, rounds, seed, hub, kind, self.rule) if count else None
        )
        self.totals = Totals()
        self.groups = (
            {
                label: Measuring(runs, questions, len(members), rounds, members, seed, kind=kind)
                for label, members in (groups or {}).items()
            }
            if groups and len(groups) > 1
            else {}
        )

    def add(self, turns: list[Turn]) -> None:
        """Count one debate: every turn of one run and one question."""
        if self.counting is not None:
            self.counting.add(turns)
        self.totals.add(turns)
        for group in self.groups.values():
            group.add([t for t in turns if t.agent in group.voters])

    def tallies(self, verdicts: list[Verdict] | None = None) -> Tallies:
        """The team's tallies, with the judge's verdicts counted when given."""
        assert self.counting is not None, "counted with count=False"
        found = self.counting.tallies
        return tally_verdicts(verdicts, found, self.rounds) if verdicts else found

    def metrics(
        self,
        tallies: Tallies | None = None,
        verdicts: list[Verdict] | None = None,
        intervals: bool = True,
    ) -> dict[str, Any]:
        """metrics.json: means over runs, their sample std, and each run's own numbers; for
        the drift and the critique scores also their interval and test (`add_intervals`)."""
        if not self.totals.by_run:
            raise ValueError("no turns recorded yet: nothing to measure.")
        tallies = tallies if tallies is not None else self.tallies(verdicts)
        rates = tallies.rates()
        named = formulas(
            self.rounds,
            self.agents,
            self.hub is not None,
            critique=bool(verdicts),
            kind=self.kind,
            voters=len(self.voters),
            price=self.price,
            judge_price=self.judge_price,
        )
        values = {name: f(rates) for name, f in named.items()}

        def mean_cell(name: str) -> dict[str, Any]:
            mean, std = mean_std([_value(v) for v in values[name]])
            return {_field(name): mean, f"{_field(name)}_std": std}

        per_run = []
        for i, run in enumerate(tallies.runs):
            mine = self.totals.by_run[run]
            per_run.append(
                {
                    "run": run,
                    **_nest(values, lambda name, i=i: {_field(name): _value(values[name][i])}),
                    **{k: mine[k] for k in RUN_COUNTS},
                }
            )
        summary = _nest(values, mean_cell)
        for row in summary.get("margins", []):  # how many questions, beside their share
            counts = tallies.num[f"m{row['right_in_round0']}"].sum(axis=1)
            row["questions"] = float(counts.mean())
        share = self.totals.prefix_share()
        truncated = self.totals.truncated
        for row in summary["rounds"]:
            row["prefix_share"] = share["by_round"].get(row["round"])
            row["truncated_in_reasoning"] = truncated[row["round"]]
        counts = self.totals.all
        unparsed = sum(p["unparsed"] for p in per_run)
        metrics = {
            "kind": self.kind,
            "score": self.rule,
            "runs": len(per_run),
            "questions": len(tallies.questions),
            "agents": self.agents,
            "rounds_of_debate": self.rounds,
            "voters": self.voters,
            "hub": self.hub,
            **summary,
            "turns": sum(p["turns"] for p in per_run),
            "unparsed": unparsed,
            "unparsed_pct": 100.0 * unparsed / counts["live"] if counts["live"] else None,
            # Cut off by the token limit before the reasoning ended: unparsed, never voted.
            "truncated_in_reasoning": truncated.total(),
            "failed_turns": sum(p["failed_turns"] for p in per_run),
            **{k: counts[k] for k in TURN_COUNTS},
            "prefix_share": share["overall"],
            "per_run": per_run,
        }
        if verdicts:
            metrics["judge"] = judge_counts(verdicts, summary["rounds"])
        if intervals:
            tested = [n for n in named if n in ("drift", "aggregation") or n.endswith(".drift")]
            tested += list(critique_formulas(self.rounds)) if verdicts else []
            pairs = differences(self.rounds, len(self.voters))
            add_intervals(metrics, tallies, named, tested, pairs)
        if self.groups:
            metrics["groups"] = [
                {"group": label, **group.group_metrics()} for label, group in self.groups.items()
            ]
        return metrics

    def group_metrics(self) -> dict[str, Any]:
        """One agent group's numbers: its agents' accuracy and transitions, and their own vote
        by the kind's default rule (for summaries: their consensus summary's ROUGE), whatever
        rule scores the whole team: a group need not hold the hub."""
        found = self.metrics(intervals=False)
        keep = (
            "maj",
            "debate",
            "delta",
            *ROUGE,
            "rounds",
            "transitions",
            "unparsed",
            "failed_turns",
        )
        rows = {key: found[key] for key in keep if key in found}
        for row in rows["rounds"]:
            row.pop("prefix_share")
            row.pop("truncated_in_reasoning")
        return {"agents": self.voters, **rows}


def add_intervals(
    metrics: dict[str, Any],
    tallies: Tallies,
    named: dict[str, Formula],
    names: list[str],
    differences: dict[str, tuple[str, str]],
) -> None:
    """Add to each of `names` in metrics.json its 95% bootstrap interval over questions
    (`drift_ci`: [low, high]), and to a difference (dynamics.differences) the paired test's
    p-value against zero (`drift_p`), as `table` prints them."""
    from mad_eval.stats import bootstrap_ci, paired_test

    for name in names:
        row, field = holder(metrics, name), locate(name)[2]
        row[f"{field}_ci"] = list(bootstrap_ci(tallies, named[name]))
        if name in differences:
            first, second = differences[name]
            row[f"{field}_p"] = paired_test(tallies, named[first], tallies, named[second])[0]


# metrics.json's plain counts: each run's, and the whole run's besides those summed over runs.
RUN_COUNTS = ("turns", "unparsed", "truncated_in_reasoning", "failed_turns")
TURN_COUNTS = (
    "length_stops",
    "reasoning_turns",
    "context_cut_turns",
    "context_cut_tokens",
    # Serving: answers that needed retries, requests sent in all, answers from the cache.
    "retried_turns",
    "requests_sent",
    "cached_turns",
    "replies_with_quoting_tags",
)


def judge_counts(verdicts: list[Verdict], rows: list[dict[str, Any]]) -> dict[str, Any]:
    """How the judging went, in all and in each round's row: turns scored, judge failures
    (no usable answer after one correction) and requests that failed (to be asked again)."""
    for row in rows:
        if row["round"] >= 1:
            mine = [v for v in verdicts if v.round == row["round"] and v.error is None]
            row["judged"] = sum(1 for v in mine if v.scores is not None)
            row["judge_failures"] = sum(1 for v in mine if v.scores is None)
    return {
        "setting": verdicts[0].setting,
        "verdicts": len(verdicts),
        "judged": sum(1 for v in verdicts if v.scores is not None),
        "judge_failures": sum(1 for v in verdicts if v.failure is not None),
        "failed_requests": sum(1 for v in verdicts if v.error is not None),
        "corrected": sum(1 for v in verdicts if v.scores is not None and len(v.raw) > 1),
        "requests_sent": sum(v.attempts for v in verdicts),
        "cached": sum(1 for v in verdicts if v.cached),
    }
