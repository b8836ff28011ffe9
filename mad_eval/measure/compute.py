"""metrics.json from a run's turns, read a debate (one run's turns of one question) at a
time: the tallies behind every rate (counts.Counting), the plain sums (Totals), the same for
each agent group, evaluated by schema.formulas, averaged over seeded runs with their
spread, and for the numbers each metric family names their interval and test."""

from __future__ import annotations

import warnings
from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from mad_eval.grading.grader import ROUGE
from mad_eval.measure import families
from mad_eval.measure.alerts import Outcomes, alerts, judge_alerts
from mad_eval.measure.base import Context, Count, Family, Share
from mad_eval.measure.counts import Counting, tally_verdicts
from mad_eval.measure.formula import Formula, json_number, mean_std
from mad_eval.measure.schema import SCHEMA_VERSION, field_of, formulas, holder, locate, nest
from mad_eval.measure.scoring import Scoring
from mad_eval.measure.tallies import Tallies
from mad_eval.records import Turn, Verdict

if TYPE_CHECKING:
    from mad_eval.measure.prices import Price


class Totals:
    """The plain sums of metrics.json (each family's `sums`), added a debate at a time: over
    all turns, by run, and by round for those a family shows by round."""

    def __init__(self, declared: Sequence[Family]) -> None:
        self.families = list(declared)
        items = [item for family in self.families for item in family.sums]
        self.counts = [item for item in items if isinstance(item, Count)]
        self.shares = {item.name: item for item in items if isinstance(item, Share)}
        rounds = {name for family in self.families for name in family.by_round}
        for name in list(rounds):
            if name in self.shares:
                rounds |= {self.shares[name].part, self.shares[name].whole}
        self.round_counts = [count for count in self.counts if count.name in rounds]
        self.all: Counter[str] = Counter()
        self.by_run: dict[int, Counter[str]] = defaultdict(Counter)
        self.by_round: dict[int, Counter[str]] = defaultdict(Counter)

    def add(self, turns: list[Turn]) -> None:
        """Count one debate's turns (one run's, so its counts are added to that run once)."""
        if not turns:
            return
        mine = self.by_run[turns[0].run]
        for count in self.counts:
            found = sum(count.of(t) for t in turns)
            mine[count.name] += found
            self.all[count.name] += found
        for t in turns:
            row = self.by_round[t.round]
            for count in self.round_counts:
                row[count.name] += count.of(t)

    def total(self, name: str) -> int:
        """A count over all the turns added."""
        return self.all[name]

    def per_run(self) -> list[str]:
        return [name for family in self.families for name in family.per_run]

    def by_round_names(self) -> list[str]:
        return [name for family in self.families for name in family.by_round]

    def in_round(self, name: str, round_: int) -> float | None:
        """A sum, or a share, of one round's turns."""
        counted = self.by_round[round_]
        share = self.shares.get(name)
        return (
            counted[name] if share is None else share.of(counted[share.part], counted[share.whole])
        )

    def shown(self, rows: list[dict[str, Any]]) -> dict[str, Any]:
        """The sums metrics.json holds, in the families' order: a count kept per run is the
        sum of the runs' `rows`, a share is taken of those totals."""
        kept = set(self.per_run())
        totals = {
            count.name: sum(row[count.name] for row in rows)
            if count.name in kept
            else self.all[count.name]
            for count in self.counts
        }
        out: dict[str, Any] = {}
        for family in self.families:
            for item in family.sums:
                if isinstance(item, Share):
                    out[item.name] = item.of(totals[item.part], totals[item.whole])
                elif item.shown:
                    out[item.name] = totals[item.name]
        return out


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
        self.totals = Totals(families.applying(Context(scoring)))
        self.outcomes: defaultdict[int, Outcomes] = defaultdict(Outcomes)  # by round
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
        for t in turns:
            self.outcomes[t.round].add(t)
        last = self.scoring.rounds
        stopped = self.scoring.stopped(turns[0].run, turns[0].question) if turns else None
        if stopped is not None and stopped < last:  # its answers there are its final ones
            for t in turns:
                if t.round == stopped:
                    self.outcomes[last].add(t)
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

        totals = self.totals
        per_run = []
        for i, run in enumerate(tallies.runs):

            def run_cell(name: str, i: int = i) -> dict[str, Any]:
                return {field_of(name): json_number(float(values[name][i]))}

            mine = totals.by_run[run]
            own = {k: mine[k] for k in totals.per_run()}
            per_run.append({"run": run, **nest(values, run_cell), **own})
        summary = nest(values, mean_cell)
        for family in applying:
            if family.finish is not None:
                family.finish(summary, tallies)
        for row in summary["rounds"]:
            row.update({k: totals.in_round(k, row["round"]) for k in totals.by_round_names()})
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
            **totals.shown(per_run),
            # Why the numbers may mislead (most final answers unread): sentences, [] if none.
            "alerts": alerts(
                self.outcomes[scoring.rounds], scoring.kind, scoring.answer, scoring.rounds
            ),
            "per_run": per_run,
        }
        if verdicts:
            metrics["judge"] = judge_counts(verdicts, summary["rounds"])
            metrics["alerts"] += judge_alerts(verdicts)
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
            for name in self.totals.by_round_names():
                row.pop(name)
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
