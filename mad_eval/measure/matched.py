"""Compute-matched baselines: is debate worth its compute? A debate of N agents and T rounds
makes G = N(T+1) generations per question; self-consistency (the vote of independent
samples of the same model, from a `mad-eval single -k K` run) is given the same budget,
counted two ways: G samples (maj@G), and as many samples as the debate's own tokens buy
on that question (SC at equal tokens). Each is the vote of a subsample of the K samples,
its correctness averaged over seeded subsamples, kept per question as tallies on the
debate run's axes, so it gets the same intervals and paired tests as Debate.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any

import numpy as np

from mad_eval.measure.base import Family
from mad_eval.measure.bootstrap import bootstrap_ci, paired_test
from mad_eval.measure.formula import Formula, mean_std, percent, plain
from mad_eval.measure.tallies import Tallies
from mad_eval.records import Turn, derive_seed
from mad_eval.voting.groups import AnswerClasses, Same, answer_groups

# Subsamples a question's vote of m samples is averaged over (every subset when there are
# no more than this many), and the seed they are drawn with: a table repeats.
SUBSAMPLES = 200
SEED = 0
UNPARSED = -1  # an answer class that never wins a vote

KEYS: tuple[str, ...] = ("maj_at_generations", "sc_at_tokens", "samples_at_tokens")
KEYS += ("debate_tokens", "sample_tokens", "generations")
TESTED = ("maj_at_generations", "sc_at_tokens")  # tested against Debate


def formulas() -> dict[str, Formula]:
    """The matched numbers of metrics.json's `matched` section, by formula name: the two
    baselines' accuracy in percent, the samples the tokens buy, the tokens themselves."""
    found = {f"matched.{key}": plain(key) for key in KEYS}
    return found | {f"matched.{key}": percent(key) for key in TESTED}


def tokens_of(turn: Turn) -> int:
    """What a generation cost: its prompt and completion tokens (those the server counted)."""
    return (turn.prompt_tokens or 0) + (turn.completion_tokens or 0)


@dataclass(frozen=True)
class SamplePool:
    """One question's single samples, over every seeded run of a single run folder."""

    classes: np.ndarray  # per sample: 0 right, 1, 2, ... each distinct wrong answer, -1 none
    tokens: float  # mean prompt + completion tokens per sample


class SamplePooling:
    """Pools built a debate (one run's samples of one question) at a time. Failed turns are
    no samples. A wrong answer of one seeded run joins an equivalent one of another
    (voting.groups.AnswerClasses), since each run numbers its classes on its own."""

    def __init__(self, same: Same):
        self.same = same
        self.classes: dict[str, AnswerClasses] = {}
        self.codes: dict[str, list[int]] = defaultdict(list)
        self.tokens: dict[str, list[int]] = defaultdict(list)

    def add(self, turns: list[Turn]) -> None:
        live = sorted((t for t in turns if not t.failed), key=lambda t: t.agent)
        if not live:
            return
        qid = live[0].question
        classes = self.classes.setdefault(qid, AnswerClasses(self.same))
        for group in answer_groups(live, self.same):
            code = classes.assign(group[0])  # grouped answers are parsed: never None
            self.codes[qid] += [UNPARSED if code is None else code] * len(group)
        self.codes[qid] += [UNPARSED] * sum(1 for t in live if t.answer is None)
        self.tokens[qid] += [tokens_of(t) for t in live]

    def pools(self) -> dict[str, SamplePool]:
        return {
            q: SamplePool(np.array(codes), float(np.mean(self.tokens[q])))
            for q, codes in self.codes.items()
        }


def pools(turns: Iterable[Turn], same: Same) -> dict[str, SamplePool]:
    """Each question's pool of a single run's turns (see SamplePooling)."""
    pooling = SamplePooling(same)
    by_debate: dict[tuple[int, str], list[Turn]] = defaultdict(list)
    for t in turns:
        by_debate[(t.run, t.question)].append(t)
    for debate in by_debate.values():
        pooling.add(debate)
    return pooling.pools()


def vote_accuracy(classes: np.ndarray, m: int, rng: np.random.Generator) -> float:
    """The chance that the plurality vote of m samples drawn without replacement is right:
    over every subset when there are at most SUBSAMPLES, else over SUBSAMPLES seeded ones.
    A tie counts as the chance a uniform draw among the tied classes picks the right one
    (what a seeded tie-break gives on average); unparsed answers never vote."""
    k = len(classes)
    if math.comb(k, m) <= SUBSAMPLES:
        subsets = np.array(list(combinations(range(k), m)), dtype=int).reshape(-1, m)
    else:
        subsets = np.argsort(rng.random((SUBSAMPLES, k)), axis=1)[:, :m]
    width = int(classes.max()) + 1
    if width <= 0:
        return 0.0
    counts = (classes[subsets][:, :, None] == np.arange(width)).sum(axis=1)
    top = counts.max(axis=1)
    ties = (counts == top[:, None]).sum(axis=1)
    right = (counts[:, 0] == top) & (top > 0)
    return float(np.mean(right / ties))


class Voting:
    """Each question's vote of m samples, worked out once per (question, m) with a
    generator seeded from both, so a number never depends on what was asked before."""

    def __init__(self, pools: dict[str, SamplePool]):
        self.pools = pools
        self.known: dict[tuple[str, int], float] = {}

    def __call__(self, question: str, m: int) -> float:
        if (question, m) not in self.known:
            rng = np.random.default_rng(derive_seed(SEED, "matched", question, m))
            self.known[(question, m)] = vote_accuracy(self.pools[question].classes, m, rng)
        return self.known[(question, m)]


def samples_for(tokens: float, per_sample: float, k: int) -> int:
    """The samples a debate's tokens buy: tokens / tokens per sample, rounded half up,
    clipped to [1, K]."""
    if per_sample <= 0:
        return k
    return min(max(math.floor(tokens / per_sample + 0.5), 1), k)


@dataclass
class Spending:
    """A debate run's tokens per (run, question), by round, counted a debate at a time;
    every turn counts, failed ones for the tokens the server counted for them."""

    rounds: int
    spent: dict[tuple[int, str], np.ndarray] = field(default_factory=dict)

    def add(self, turns: list[Turn]) -> None:
        if not turns or all(t.failed for t in turns):
            return  # no generation came back: no question the debate answered
        by_round = np.zeros(self.rounds + 1)
        for t in turns:
            if t.round <= self.rounds:
                by_round[t.round] += tokens_of(t)
        self.spent[(turns[0].run, turns[0].question)] = by_round


@dataclass
class Matched:
    """The matched numbers of one debate run against one pool of single samples."""

    tallies: Tallies  # KEYS on the debate's runs x the questions both answered
    generations: int
    samples: int  # the largest pool of a question
    # The share of (run, question) whose tokens buy more samples than the pool holds: there
    # SC at equal tokens votes all K and understates what the tokens would buy.
    clipped: float
    by_round: list[dict[str, Any]]  # the debate's vote accuracy and tokens through each round
    curve: list[dict[str, Any]]  # the single run's maj@m and its tokens, m = 1..K
    # Each m's vote per question (a [1, questions] tally), for the curve's intervals.
    curve_votes: list[Tallies] = field(default_factory=list)


def match(
    spending: Spending, debate: Tallies, pools: dict[str, SamplePool], generations: int
) -> Matched:
    """maj@G and SC at equal tokens per (debate run, question), with what they cost, and
    the accuracy-vs-tokens points of both sides, on the questions both answered."""
    common = [q for q in debate.questions if q in pools]
    shape = (len(debate.runs), len(common))
    num = {key: np.zeros(shape) for key in KEYS}
    den = {key: np.zeros(shape) for key in KEYS}
    vote = Voting(pools)
    clipped = 0
    for i, run in enumerate(debate.runs):
        for j, q in enumerate(common):
            if (run, q) not in spending.spent:
                continue
            pool, spent = pools[q], float(spending.spent[(run, q)].sum())
            k = len(pool.classes)
            m = samples_for(spent, pool.tokens, k)
            clipped += m == k and spent >= (k + 0.5) * pool.tokens
            found = {
                "sc_at_tokens": vote(q, m),
                "samples_at_tokens": m,
                "debate_tokens": spent,
                "sample_tokens": pool.tokens,
                "generations": generations,
            }
            if k >= generations:
                found["maj_at_generations"] = vote(q, generations)
            for key, value in found.items():
                num[key][i, j], den[key][i, j] = value, 1
    tallies = Tallies(list(debate.runs), common, num, den)
    counted = int(den["samples_at_tokens"].sum())
    return Matched(
        tallies,
        generations,
        max((len(pools[q].classes) for q in common), default=0),
        clipped / counted if counted else 0.0,
        _by_round(spending, debate.on(common)),
        *_curve(vote, pools, common),
    )


def _by_round(spending: Spending, debate: Tallies) -> list[dict[str, Any]]:
    rates = debate.rates()
    rows = []
    for r in range(spending.rounds + 1):
        spent = [
            spending.spent[(run, q)][: r + 1].sum()
            for run in debate.runs
            for q in debate.questions
            if (run, q) in spending.spent
        ]
        accuracy = float(np.nanmean(100.0 * rates[f"vote{r}"])) if spent else None
        tokens = float(np.mean(spent)) if spent else None
        rows.append({"round": r, "vote_accuracy": accuracy, "tokens": tokens})
    return rows


def _curve(
    vote: Voting, pools: dict[str, SamplePool], common: list[str]
) -> tuple[list[dict[str, Any]], list[Tallies]]:
    """maj@m and its tokens for m = 1..K, and each m's votes per question as tallies."""
    if not common:
        return [], []
    k = min(len(pools[q].classes) for q in common)
    per_sample = float(np.mean([pools[q].tokens for q in common]))
    points, votes = [], []
    for m in range(1, k + 1):
        right = np.array([[vote(q, m) for q in common]])
        points.append(
            {"samples": m, "accuracy": 100.0 * float(right.mean()), "tokens": m * per_sample}
        )
        votes.append(Tallies([0], list(common), {"curve": right}, {"curve": np.ones_like(right)}))
    return points, votes


def section(
    matched: Matched, debate: Tallies, debate_formula: Formula, replicates: int
) -> dict[str, Any]:
    """metrics.json's `matched` section: each number's mean and std over runs, its 95%
    bootstrap interval over questions (`_ci`), and for the two baselines the paired
    p-value against Debate on the questions both answered (`_p_vs_debate`)."""
    out: dict[str, Any] = {
        "samples": matched.samples,
        "questions": len(matched.tallies.questions),
        "subsamples": SUBSAMPLES,
        "clipped_share": matched.clipped,
    }
    rates = matched.tallies.rates()
    for name, formula in formulas().items():
        key = name.removeprefix("matched.")
        values = formula(rates)
        mean, std = mean_std([None if math.isnan(v) else float(v) for v in values])
        out[key], out[f"{key}_std"] = mean, std
        out[f"{key}_ci"] = list(bootstrap_ci(matched.tallies, formula, replicates))
        if key in TESTED:
            p, _ = paired_test(matched.tallies, formula, debate, debate_formula, replicates)
            out[f"{key}_p_vs_debate"] = p
    out["by_round"] = matched.by_round
    out["curve"] = [
        dict(point, accuracy_ci=list(bootstrap_ci(votes, percent("curve"), replicates)))
        for point, votes in zip(matched.curve, matched.curve_votes, strict=True)
    ]
    return out


# Counted against a single run, on the questions it shares with the debate run
# (reporting.pairing, then `section`), not by the run's own Counting.
FAMILY = Family(
    name="matched",
    console=("matched",),
    formulas=lambda context: formulas(),
    keys=lambda scoring: list(KEYS),
    intervals=lambda context: list(formulas()),
    paired=True,
)
