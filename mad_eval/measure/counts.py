"""Tallies filled from a run's turns a debate at a time, and from the judge's verdicts: the
system's answer of each round as the scoring rule picks it, then every metric family that
applies (measure.families) counting its own keys."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import replace

import numpy as np

from mad_eval.measure import families
from mad_eval.measure.base import Context, Debate, ScoredRound, VerdictCounts
from mad_eval.measure.scoring import Scoring
from mad_eval.measure.tallies import Tallies
from mad_eval.records import Turn, Verdict
from mad_eval.voting.groups import answer_groups
from mad_eval.voting.rules import Rule, get_rule
from mad_eval.voting.ties import vote_ties


def tally(turns: list[Turn], scoring: Scoring) -> Tallies:
    """Count everything once (see Counting); the turns of any number of runs and questions."""
    runs = sorted({t.run for t in turns})
    questions = sorted({t.question for t in turns})
    counting = Counting(runs, questions, scoring)
    for debate in by_debate(turns):
        counting.add(debate)
    return counting.tallies


def by_debate(turns: Iterable[Turn]) -> list[list[Turn]]:
    """Turns grouped by (run, question), each group in the order the turns came."""
    groups: dict[tuple[int, str], list[Turn]] = defaultdict(list)
    for t in turns:
        groups[(t.run, t.question)].append(t)
    return list(groups.values())


class Counting:
    """Tallies filled a debate (one run's turns of one question) at a time, so a run's
    counts never need all of its turns at once. `runs` and `questions` name the rows and
    columns, in the order tallies keep them (sorted, which fixes the bootstrap's draws).

    The system's answer in each round is the one the scoring rule picks
    (mad_eval.voting.rules): a voting kind counts it right or wrong, a summary scores
    its ROUGE. Failed turns are left out of every count; whether a question whose every voter
    failed is scored is the rule's to say (plurality: it is not)."""

    def __init__(self, runs: list[int], questions: list[str], scoring: Scoring):
        self.decide = get_rule(scoring.rule)
        if self.decide.needs_hub and scoring.hub is None:
            raise ValueError(
                f"score={self.decide.name} needs a protocol with a hub; this run has none."
            )
        self.scoring = scoring
        self.alike = scoring.same
        families.check_names(scoring)
        self.families = [f for f in families.applying(Context(scoring)) if f.count]
        names = [k for f in self.families if not f.compact for k in f.keys(scoring)]
        compact = [k for f in self.families if f.compact for k in f.keys(scoring)]
        names += compact
        self.index = {name: i for i, name in enumerate(names)}
        self.split = len(names) - len(compact)
        # Every key's counts in two arrays, [keys, runs, questions], so a debate's are
        # written at once; the tallies hold a view of each key's part.
        shape = (len(runs), len(questions))
        self.num = np.zeros((self.split, *shape)), np.zeros((len(compact), *shape), np.float32)
        self.den = np.zeros_like(self.num[0]), np.zeros_like(self.num[1])

        def part(arrays: tuple[np.ndarray, np.ndarray], i: int) -> np.ndarray:
            view: np.ndarray = arrays[0][i] if i < self.split else arrays[1][i - self.split]
            return view

        self.tallies = Tallies(
            list(runs),
            list(questions),
            {name: part(self.num, i) for name, i in self.index.items()},
            {name: part(self.den, i) for name, i in self.index.items()},
        )
        self.row = {run: i for i, run in enumerate(runs)}
        self.col = {q: j for j, q in enumerate(questions)}

    def add(self, turns: list[Turn]) -> None:
        """Count one debate: every turn of one run and one question."""
        if not turns:
            return
        run, qid = turns[0].run, turns[0].question
        num, den, index = [0.0] * len(self.index), [0.0] * len(self.index), self.index

        def add(key: str, n: float, d: float) -> None:
            i = index[key]
            num[i] += n
            den[i] += d

        debate = Debate(run, qid, turns, self._rounds(run, qid, turns), self.scoring, self.alike)
        for family in self.families:
            family.count(debate, add)  # type: ignore[misc]
        at, split = (slice(None), self.row[run], self.col[qid]), self.split
        self.num[0][at] += num[:split]
        self.num[1][at] += num[split:]
        self.den[0][at] += den[:split]
        self.den[1][at] += den[split:]

    def _rounds(self, run: int, qid: str, turns: list[Turn]) -> dict[int, ScoredRound]:
        return scored_rounds(run, qid, turns, self.scoring, self.decide)


def scored_rounds(
    run: int, qid: str, turns: list[Turn], scoring: Scoring, decide: Rule | None = None
) -> dict[int, ScoredRound]:
    """Each round of one debate (`turns`: run `run`'s of question `qid`) that has turns, as
    the scoring rule (`decide`, by default the run's) scored it: what Counting counts and
    the viewer shows."""
    decide = decide or get_rule(scoring.rule)
    ordered = sorted(turns, key=lambda t: t.agent)
    found = {}
    for r in sorted({t.round for t in turns if t.round <= scoring.rounds}):
        live = [t for t in ordered if t.round == r and not t.failed]
        found[r] = _round(run, qid, r, live, scoring, decide)
    stopped = scoring.stopped(run, qid)
    if stopped is not None and stopped in found:  # its answers there are its final ones
        for r in range(stopped + 1, scoring.rounds + 1):
            found[r] = replace(found[stopped], carried=True)
    return found


def _round(
    run: int, qid: str, r: int, live: list[Turn], scoring: Scoring, decide: Rule
) -> ScoredRound:
    """One round of one debate: `live` are its turns that did not fail, by agent."""
    voters, hub, alike = list(scoring.voters), scoring.hub, scoring.same
    scored = decide.scored(live, voters, hub)
    picked, tie = None, None
    if scored:
        rng = vote_ties(scoring.seed, run, qid, r)
        picked = decide.pick(live, voters, hub, rng, alike)
        tie = rng.drawn
    if not scoring.voted:  # a summary: scored by ROUGE, not grouped or voted
        return ScoredRound(live, [], None, scored, picked, tie=tie)
    vote = (picked is not None and bool(picked.correct)) if scored else None
    return ScoredRound(live, answer_groups(live, alike), vote, scored, picked, tie=tie)


def tally_verdicts(verdicts: list[Verdict], tallies: Tallies, scoring: Scoring) -> Tallies:
    """`tallies` with the judge's verdicts counted by every family that counts verdicts
    (Family.count_verdicts), on the runs and questions `tallies` has."""
    shape = (len(tallies.runs), len(tallies.questions))
    counting = [f for f in families.applying(Context(scoring, judged=True)) if f.count_verdicts]
    names = [k for f in counting for k in f.verdict_keys(scoring)]
    counts = VerdictCounts(
        {name: np.zeros(shape) for name in names},
        {name: np.zeros(shape) for name in names},
        {run: i for i, run in enumerate(tallies.runs)},
        {q: j for j, q in enumerate(tallies.questions)},
    )
    known = [v for v in verdicts if v.run in counts.row and v.question in counts.col]
    for family in counting:
        family.count_verdicts(known, counts)  # type: ignore[misc]
    num, den = {**tallies.num, **counts.num}, {**tallies.den, **counts.den}
    return Tallies(tallies.runs, tallies.questions, num, den)
