"""metrics.json from a run's turns, read a debate (one run's turns of one question) at a
time: the tallies behind every rate (counts.Counting), the plain sums (Totals), the same for
each agent group, evaluated by schema.formulas, averaged over seeded runs with their
spread, and for the numbers each metric family names their interval and test."""

from __future__ import annotations

import warnings
from collections import Counter, defaultdict
from typing import TYPE_CHECKING, Any

import numpy as np

from mad_eval.grading.grader import ROUGE
from mad_eval.grading.reasoning import holds_quoting_tags
from mad_eval.measure import families
from mad_eval.measure.alerts import Outcomes, alerts
from mad_eval.measure.counts import Counting, Tallies, by_debate, tally_verdicts
from mad_eval.measure.family import Context
from mad_eval.measure.formula import Formula, json_number, mean_std
from mad_eval.measure.schema import SCHEMA_VERSION, field_of, formulas, holder, locate, nest
from mad_eval.measure.scoring import Scoring
from mad_eval.records import Turn, Verdict

if TYPE_CHECKING:
    from mad_eval.measure.prices import Price


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


class Totals:
    """The counts of metrics.json that are plain sums over turns, added a debate at a time."""

    def __init__(self) -> None:
        self.by_run: dict[int, Counter[str]] = defaultdict(Counter)
        self.all: Counter[str] = Counter()
        self.truncated: Counter[int] = Counter()  # by round
        self.shared: Counter[int] = Counter()  # prompt tokens a prefix cache can skip, by round
        self.context: Counter[int] = Counter()
        self.outcomes: defaultdict[int, Outcomes] = defaultdict(Outcomes)  # by round

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
            self.outcomes[t.round].add(t)
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
        counts["refusals"] += sum(1 for t in turns if t.refusal)
        counts["usage_invalid"] += sum(1 for t in turns if t.usage_invalid)
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
    (counts.Counting), the plain sums (Totals), and the same for each agent group.

    The system's answers are those the scoring rule picks, recorded as `score`. With a
    hub, its own accuracy per round; with several `groups` (label -> agents), the same
    numbers for each group's agents alone, voted among them by the kind's default rule; with
    the judge's verdicts, the critique scores. `count=False` skips the team's own tallies,
    for a caller that has them already."""

    def __init__(
        self,
        runs: list[int],
        questions: list[str],
        scoring: Scoring,
        groups: dict[str, list[int]] | None = None,
        count: bool = True,
        price: Price | None = None,
        judge_price: Price | None = None,
    ):
        self.scoring = scoring
        self.price, self.judge_price = price, judge_price
        self.counting = Counting(runs, questions, scoring) if count else None
        self.totals = Totals()
        self.groups = (
            {
                label: Measuring(runs, questions, scoring.group(members))
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
            group.add([t for t in turns if t.agent in group.scoring.voters])

    def tallies(self, verdicts: list[Verdict] | None = None) -> Tallies:
        """The team's tallies, with the judge's verdicts counted when given."""
        assert self.counting is not None, "counted with count=False"
        found = self.counting.tallies
        return tally_verdicts(verdicts, found, self.scoring) if verdicts else found

    def metrics(
        self,
        tallies: Tallies | None = None,
        verdicts: list[Verdict] | None = None,
        intervals: bool = True,
    ) -> dict[str, Any]:
        """metrics.json: means over runs, their sample std, and each run's own numbers; for
        the numbers each family names also their interval and test (`add_intervals`)."""
        if not self.totals.by_run:
            raise ValueError("no turns recorded yet: nothing to measure.")
        tallies = tallies if tallies is not None else self.tallies(verdicts)
        rates = tallies.rates()
        scoring = self.scoring
        context = Context(scoring, bool(verdicts), self.price, self.judge_price)
        applying = families.applying(context)
        named = formulas(scoring, context.judged, self.price, self.judge_price)
        values = {name: f(rates) for name, f in named.items()}

        def mean_cell(name: str) -> dict[str, Any]:
            mean, std = mean_std([json_number(v) for v in values[name]])
            return {field_of(name): mean, f"{field_of(name)}_std": std}

        per_run = []
        for i, run in enumerate(tallies.runs):
            mine = self.totals.by_run[run]
            per_run.append(
                {
                    "run": run,
                    **nest(
                        values, lambda name, i=i: {field_of(name): json_number(values[name][i])}
                    ),
                    **{k: mine[k] for k in RUN_COUNTS},
                }
            )
        summary = nest(values, mean_cell)
        for family in applying:
            if family.finish is not None:
                family.finish(summary, tallies)
        share = self.totals.prefix_share()
        truncated = self.totals.truncated
        for row in summary["rounds"]:
            row["prefix_share"] = share["by_round"].get(row["round"])
            row["truncated_in_reasoning"] = truncated[row["round"]]
        counts = self.totals.all
        unparsed = sum(p["unparsed"] for p in per_run)
        metrics = {
            "schema_version": SCHEMA_VERSION,
            "kind": scoring.kind,
            "score": scoring.rule,
            "runs": len(per_run),
            "questions": len(tallies.questions),
            "agents": scoring.agents,
            "rounds_of_debate": scoring.rounds,
            "voters": list(scoring.voters),
            "hub": scoring.hub,
            **summary,
            "turns": sum(p["turns"] for p in per_run),
            "unparsed": unparsed,
            "unparsed_pct": 100.0 * unparsed / counts["live"] if counts["live"] else None,
            # Cut off by the token limit before the reasoning ended: unparsed, never voted.
            "truncated_in_reasoning": truncated.total(),
            "failed_turns": sum(p["failed_turns"] for p in per_run),
            **{k: counts[k] for k in TURN_COUNTS},
            "prefix_share": share["overall"],
            # Why the numbers may mislead (most final answers unread): sentences, [] if none.
            "alerts": alerts(
                self.totals.outcomes[scoring.rounds], scoring.kind, scoring.answer, scoring.rounds
            ),
            "per_run": per_run,
        }
        if verdicts:
            metrics["judge"] = judge_counts(verdicts, summary["rounds"])
        if intervals:
            tested = [n for family in applying for n in family.intervals(context)]
            pairs = families.differences(scoring)
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
        return {"agents": list(self.scoring.voters), **rows}


def add_intervals(
    metrics: dict[str, Any],
    tallies: Tallies,
    named: dict[str, Formula],
    names: list[str],
    differences: dict[str, tuple[str, str]],
) -> None:
    """Add to each of `names` in metrics.json its 95% bootstrap interval over questions
    (`drift_ci`: [low, high]), and to a difference (families.differences) the paired test's
    p-value against zero (`drift_p`): the numbers `table` prints for them, from the same
    resamples, drawn here a block at a time (bootstrap.replicate_values)."""
    from mad_eval.measure.bootstrap import interval, p_value, replicate_values

    tested = {n: differences[n] for n in names if n in differences}
    needed = set(names) | {side for pair in tested.values() for side in pair}
    draws = replicate_values(tallies, {n: named[n] for n in sorted(needed)})
    rates = tallies.rates()
    for name in names:
        row, field = holder(metrics, name), locate(name)[2]
        row[f"{field}_ci"] = [None if x is None else json_number(x) for x in interval(draws[name])]
        if name in tested:
            first, second = tested[name]
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # no run defines it
                observed = np.nanmean(named[first](rates)) - np.nanmean(named[second](rates))
            row[f"{field}_p"] = p_value(float(observed), draws[first] - draws[second])


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
    # Answers the model declined to give (unparsed, in every denominator), and answers whose
    # usage held no token counts (recorded unknown).
    "refusals",
    "usage_invalid",
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
