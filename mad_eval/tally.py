"""Per-question counts behind every rate a run reports.

Each rate is a ratio of two sums over questions (right votes / questions with a vote, right
answers / answers, ...). Keeping the numerator and denominator of each question apart lets
one code path give a run's number (sum over all questions) and a bootstrap replicate's
(questions drawn with replacement, so each is counted as often as it was drawn).
"""

from __future__ import annotations

import math
import random
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Protocol, TypeVar

import numpy as np

from mad_eval.grading import ROUGE, consensus, equivalent, same_answer
from mad_eval.prompts import JUDGE_CRITERIA
from mad_eval.records import Turn, Verdict, derive_seed

# What the judge's scores are tallied as: each criterion, and their sum.
CRITIQUE = (*JUDGE_CRITERIA, "total")


@dataclass(frozen=True)
class Vote:
    answer: str | None
    correct: bool


class Graded(Protocol):
    """Anything graded: a turn, a training rollout."""

    answer: str | None
    correct: bool | None
    grade_timed_out: bool


G = TypeVar("G", bound=Graded)


Same = Callable[[str, str], bool]


def answer_groups(turns: Sequence[G], same: Same = equivalent) -> list[list[G]]:
    """Parsed answers grouped by equivalence (not by string), in order of first appearance.
    `same` is the benchmark kind's equivalence (grading.same_answer)."""
    groups: list[list[G]] = []
    for turn in turns:
        if turn.answer is None:
            continue
        for group in groups:
            if _same(turn, group[0], same):
                group.append(turn)
                break
        else:
            groups.append([turn])
    return groups


def _same(a: Graded, b: Graded, same: Same) -> bool:
    """Two graded answers are equivalent when both equal the gold; one right and one wrong
    never are. Only two wrong answers need comparing, which saves most math-verify calls;
    one that math-verify could not decide against the gold is compared by its text alone."""
    if bool(a.correct) != bool(b.correct):
        return False
    if a.correct:
        return True
    if a.grade_timed_out or b.grade_timed_out:
        return " ".join(a.answer.split()) == " ".join(b.answer.split())  # type: ignore[union-attr]
    return same(a.answer, b.answer)  # type: ignore[arg-type]


def majority_vote(
    turns: list[Turn], rng: random.Random, groups: list[list[Turn]] | None = None
) -> Vote:
    """Plurality over extracted answers grouped by equivalence; ties are broken by `rng`.
    Unparsed answers do not vote; no answer at all is a wrong vote. `groups` are the
    turns' answer_groups, when the caller has them already."""
    groups = answer_groups(turns) if groups is None else groups
    if not groups:
        return Vote(None, False)
    top = max(len(g) for g in groups)
    winner = rng.choice([g for g in groups if len(g) == top])
    return Vote(winner[0].answer, bool(winner[0].correct))


def entropy_bits(turns: list[Turn], groups: list[list[Turn]]) -> float:
    """Shannon entropy of the agents' answers (`groups`: their answer_groups); every
    unparsed answer falls in one more class."""
    sizes = [len(g) for g in groups]
    sizes.append(sum(1 for t in turns if t.answer is None))
    total = sum(sizes)
    return -sum(s / total * math.log2(s / total) for s in sizes if s)


class Rates(dict):
    """Rates by tally key, each worked out when first asked for. A rate with nothing to
    count is NaN."""

    def __init__(self, tallies: Tallies, weights: np.ndarray | None):
        super().__init__()
        self.tallies, self.weights = tallies, weights

    def __missing__(self, key: str) -> np.ndarray:
        num, den = self.tallies.num[key], self.tallies.den[key]
        if self.weights is None:
            num, den = num.sum(axis=1), den.sum(axis=1)
        else:
            num, den = num @ self.weights.T, den @ self.weights.T
        with np.errstate(invalid="ignore", divide="ignore"):
            self[key] = np.where(den > 0, num / den, np.nan)
        return self[key]


@dataclass
class Tallies:
    """Numerators and denominators per (run, question) of every rate of a set of turns.

    Keys: `vote{r}` (right votes), `agent{r}` (right answers), `hub{r}` (the hub's right
    answers), `unanimous{r}` (questions whose answers all agree), `entropy{r}` (bits summed
    over questions), `agree{r}` (agent pairs equally right or wrong), `len_right{r}` and
    `len_wrong{r}` (completion tokens summed over right / wrong answers), and for debate
    rounds `c2i{r}` and `i2c{r}` (agents moving right->wrong and wrong->right into round r).
    """

    runs: list[int]
    questions: list[str]
    num: dict[str, np.ndarray]  # key -> [runs, questions]
    den: dict[str, np.ndarray]

    def rates(self, weights: np.ndarray | None = None) -> Rates:
        """Every rate per run ([runs]); with question weights [replicates, questions] (how
        often a bootstrap replicate drew each question), per run and replicate."""
        return Rates(self, weights)

    def on(self, questions: list[str]) -> Tallies:
        """The same tallies on `questions` (a subset, in that order), to pair two methods."""
        index = [self.questions.index(q) for q in questions]
        return Tallies(
            self.runs,
            list(questions),
            {k: v[:, index] for k, v in self.num.items()},
            {k: v[:, index] for k, v in self.den.items()},
        )


def tally(
    turns: list[Turn],
    voters: list[int],
    rounds: int,
    seed: int,
    hub: int | None = None,
    kind: str = "math",
) -> Tallies:
    """Count everything once. Failed turns are left out of every count; a question whose
    every voter failed has no vote to score. Summaries are scored, not voted: see
    `tally_summaries`."""
    if kind == "summary":
        return tally_summaries(turns, voters, rounds)
    alike = same_answer(kind)
    keys = ["vote", "agent", "unanimous", "entropy", "agree", "len_right", "len_wrong"]
    keys += ["hub"] if hub is not None else []
    names = [f"{k}{r}" for r in range(rounds + 1) for k in keys]
    names += [f"{k}{r}" for r in range(1, rounds + 1) for k in ("c2i", "i2c")]
    found, cells = _cells(turns, rounds, names)
    num, den = found.num, found.den
    row = {run: i for i, run in enumerate(found.runs)}
    col = {q: j for j, q in enumerate(found.questions)}

    def add(key: str, at: tuple[int, int], n: float, d: float) -> None:
        num[key][at] += n
        den[key][at] += d

    for (run, qid, r), live in cells.items():
        at = (row[run], col[qid])
        groups = answer_groups(live, alike)
        ballot = [t for t in live if t.agent in voters]
        if ballot:
            rng = random.Random(derive_seed(seed, "vote", run, qid, r))
            same = groups if len(ballot) == len(live) else None  # every live agent votes
            add(f"vote{r}", at, majority_vote(ballot, rng, same).correct, 1)
        right = [bool(t.correct) for t in live]
        add(f"agent{r}", at, sum(right), len(right))
        if hub is not None:
            mine = [bool(t.correct) for t in live if t.agent == hub]
            add(f"hub{r}", at, sum(mine), len(mine))
        add(f"unanimous{r}", at, len(groups) == 1 and len(groups[0]) == len(live), 1)
        add(f"entropy{r}", at, entropy_bits(live, groups), 1)
        pairs = list(combinations(right, 2))
        add(f"agree{r}", at, sum(a == b for a, b in pairs), len(pairs))
        for t in live:
            if t.completion_tokens is not None:
                add(f"len_right{r}" if t.correct else f"len_wrong{r}", at, t.completion_tokens, 1)

    by_agent: dict[tuple[int, str, int], dict[int, Turn]] = defaultdict(dict)
    for t in turns:
        if not t.failed:
            by_agent[(t.run, t.question, t.agent)][t.round] = t
    for (run, qid, _), seen in by_agent.items():
        at = (row[run], col[qid])
        for r in range(1, rounds + 1):
            if r - 1 in seen and r in seen:
                before, after = bool(seen[r - 1].correct), bool(seen[r].correct)
                add(f"c2i{r}", at, before and not after, 1)
                add(f"i2c{r}", at, after and not before, 1)
    return found


def _cells(
    turns: list[Turn], rounds: int, names: list[str]
) -> tuple[Tallies, dict[tuple[int, str, int], list[Turn]]]:
    """Zeroed tallies named `names` over the turns' runs and questions, and the turns of each
    (run, question, round) up to `rounds` that did not fail, in agent order."""
    runs = sorted({t.run for t in turns})
    questions = sorted({t.question for t in turns})
    shape = (len(runs), len(questions))
    num = {name: np.zeros(shape) for name in names}
    den = {name: np.zeros(shape) for name in names}
    cells: dict[tuple[int, str, int], list[Turn]] = defaultdict(list)
    for t in sorted(turns, key=lambda t: t.agent):
        if not t.failed and t.round <= rounds:
            cells[(t.run, t.question, t.round)].append(t)
    return Tallies(runs, questions, num, den), cells


def tally_summaries(turns: list[Turn], voters: list[int], rounds: int) -> Tallies:
    """A summary benchmark's counts: per round, the ROUGE of the voters' consensus summary
    (`rouge1{r}`, `rouge2{r}`, `rougeL{r}`: the score of the summary picked by
    grading.consensus, which never reads the reference; none parsed scores 0) and the
    agents' mean ROUGE (`agent_rouge1{r}`, ...; an unparsed summary scores 0)."""
    names = [f"{p}{m}{r}" for r in range(rounds + 1) for m in ROUGE for p in ("", "agent_")]
    found, cells = _cells(turns, rounds, names)
    num, den = found.num, found.den
    row = {run: i for i, run in enumerate(found.runs)}
    col = {q: j for j, q in enumerate(found.questions)}
    for (run, qid, r), live in cells.items():
        at = (row[run], col[qid])
        for t in live:
            for m in ROUGE:
                num[f"agent_{m}{r}"][at] += t.rouge[m] if t.rouge else 0.0
                den[f"agent_{m}{r}"][at] += 1
        ballot = [t for t in live if t.agent in voters]
        if not ballot:
            continue
        parsed = [t for t in ballot if t.answer is not None and t.rouge]
        picked = parsed[consensus([t.answer for t in parsed])] if parsed else None  # type: ignore[misc]
        for m in ROUGE:
            num[f"{m}{r}"][at] += picked.rouge[m] if picked else 0.0  # type: ignore[index]
            den[f"{m}{r}"][at] += 1
    return found


def tally_verdicts(verdicts: list[Verdict], tallies: Tallies, rounds: int) -> Tallies:
    """`tallies` with the judge's counts added: `score{r}:{name}` (a criterion's scores, or
    `total`, summed over the turns scored; its denominator counts them) and `judge_fail{r}`
    (judge failures of the turns scored or failed); without `r`, over every round. A
    verdict whose request failed counts nowhere: it is to be asked again."""
    shape = (len(tallies.runs), len(tallies.questions))
    tags = ["", *(str(r) for r in range(1, rounds + 1))]
    names = [f"score{t}:{c}" for t in tags for c in CRITIQUE] + [f"judge_fail{t}" for t in tags]
    num = {name: np.zeros(shape) for name in names}
    den = {name: np.zeros(shape) for name in names}
    row = {run: i for i, run in enumerate(tallies.runs)}
    col = {q: j for j, q in enumerate(tallies.questions)}
    for v in verdicts:
        if v.error is not None or v.run not in row or v.question not in col:
            continue
        at = (row[v.run], col[v.question])
        for tag in ("", str(v.round)):
            num[f"judge_fail{tag}"][at] += v.scores is None
            den[f"judge_fail{tag}"][at] += 1
            if v.scores is None:
                continue
            for name in CRITIQUE:
                num[f"score{tag}:{name}"][at] += v.total if name == "total" else v.scores[name]
                den[f"score{tag}:{name}"][at] += 1
    return Tallies(tallies.runs, tallies.questions, {**tallies.num, **num}, {**tallies.den, **den})
