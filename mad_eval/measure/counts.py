"""Per-question counts behind every rate a run reports.

Each rate is a ratio of two sums over questions (right votes / questions with a vote, right
answers / answers, ...). Keeping the numerator and denominator of each question apart lets
one code path give a run's number (sum over all questions) and a bootstrap replicate's
(questions drawn with replacement, so each is counted as often as it was drawn).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from itertools import combinations

import numpy as np

from mad_eval.grading.grader import ROUGE, same_answer
from mad_eval.grading.kinds import get_kind
from mad_eval.grading.rubric import CRITIQUE
from mad_eval.measure.cost import JUDGE_KEYS, cost_keys, count_cost, count_judge_cost
from mad_eval.measure.dynamics import ScoredRound, count_dynamics, dynamics_keys
from mad_eval.protocols.scoring import (
    answer_groups,
    bootstrap_maj,
    default_rule,
    get_rule,
    vote_ties,
)
from mad_eval.records import Turn, Verdict


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
        if self.weights is None:  # summed in float64 whatever the counts are kept in
            num, den = num.sum(axis=1, dtype=float), den.sum(axis=1, dtype=float)
        else:
            num, den = _weighted(num, self.weights), _weighted(den, self.weights)
        with np.errstate(invalid="ignore", divide="ignore"):
            self[key] = np.where(den > 0, num / den, np.nan)
        return self[key]


# Bootstrap replicates drawn and weighed at once: their question counts are drawn as
# integers and made floats a block at a time, so no replicates x questions float matrix
# ever exists (800 MB at 50k questions and 2,000 replicates).
BLOCK = 100


def _weighted(values: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """values [runs, questions] summed with each replicate's counts [replicates, questions]:
    [runs, replicates]."""
    values = values.astype(float, copy=False)  # float32 counts too: a mixed product skips BLAS
    out = np.empty((values.shape[0], counts.shape[0]))
    for start in range(0, counts.shape[0], BLOCK):
        out[:, start : start + BLOCK] = values @ counts[start : start + BLOCK].T.astype(float)
    return out


@dataclass
class Tallies:
    """Numerators and denominators per (run, question) of every rate of a set of turns.

    Keys: `vote{r}` (right system answers, as the scoring rule picks them), `agent{r}`
    (right answers), `hub{r}` (the hub's right answers), `unanimous{r}` (questions whose
    answers all agree), `entropy{r}` (bits summed over questions), `agree{r}` (agent pairs
    equally right or wrong), `len_right{r}` and `len_wrong{r}` (completion tokens summed over
    right / wrong answers), `reasoning_len{r}` and `final_len{r}` (reasoning and final-content
    tokens summed over the answers whose reasoning tokens are known), for debate rounds `c2i{r}` and
    `i2c{r}` (agents moving right->wrong and wrong->right into round r), and without debate
    `maj_boot0` (verl's bootstrap maj@K of each question, rules.bootstrap_maj). Summaries
    have ROUGE keys instead (`rougeL{r}`, `agent_rougeL{r}`, ...).
    """

    runs: list[int]
    questions: list[str]
    num: dict[str, np.ndarray]  # key -> [runs, questions]
    den: dict[str, np.ndarray]
    # Rates already worked out, by the weights they were weighed with (kept, so their ids
    # stay theirs).
    _rates: dict[int | None, tuple[np.ndarray | None, Rates]] = field(
        default_factory=dict, repr=False, compare=False
    )

    def rates(self, weights: np.ndarray | None = None) -> Rates:
        """Every rate per run ([runs]); with question weights [replicates, questions] (how
        often a bootstrap replicate drew each question), per run and replicate. The same
        weights give the same Rates, so a table's numbers weigh each key once."""
        key = None if weights is None else id(weights)
        if key not in self._rates or self._rates[key][0] is not weights:
            self._rates[key] = (weights, Rates(self, weights))
        return self._rates[key][1]

    def on(self, questions: list[str]) -> Tallies:
        """The same tallies on `questions` (a subset, in that order), to pair two methods."""
        if questions == self.questions:
            return self
        where = {q: i for i, q in enumerate(self.questions)}
        index = [where[q] for q in questions]
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
    rule: str | None = None,
) -> Tallies:
    """Count everything once (see Counting); the turns of any number of runs and questions."""
    runs = sorted({t.run for t in turns})
    questions = sorted({t.question for t in turns})
    counting = Counting(runs, questions, voters, rounds, seed, hub, kind, rule)
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

    The system's answer in each round is the one `rule` picks (mad_eval.protocols.scoring; None: the
    kind's default): a voting kind counts it right or wrong, a summary scores its ROUGE.
    Failed turns are left out of every count; whether a question whose every voter failed
    is scored is the rule's to say (plurality: it is not)."""

    def __init__(
        self,
        runs: list[int],
        questions: list[str],
        voters: list[int],
        rounds: int,
        seed: int,
        hub: int | None = None,
        kind: str = "math",
        rule: str | None = None,
    ):
        self.decide = get_rule(rule or default_rule(kind))
        if self.decide.needs_hub and hub is None:
            raise ValueError(
                f"score={self.decide.name} needs a protocol with a hub; this run has none."
            )
        self.voters, self.rounds, self.seed, self.hub = voters, rounds, seed, hub
        self.alike = same_answer(kind)
        self.summary = not get_kind(kind).voted  # scored (ROUGE), not right or wrong
        names = _summary_keys(rounds) if self.summary else _keys(rounds, hub)
        # The cost and diagnostics keys hold whole numbers per question (tokens, counts) or
        # seconds: float32 holds them exactly (or to a part in 10^7) in half the memory.
        compact = cost_keys(rounds) + ([] if self.summary else dynamics_keys(rounds, len(voters)))
        names += compact
        self.index = {name: i for i, name in enumerate(names)}
        self.split = len(names) - len(compact)
        # Every key's counts in two arrays, [keys, runs, questions], so a debate's are
        # written at once; the tallies hold a view of each key's part.
        shape = (len(runs), len(questions))
        self.num = np.zeros((self.split, *shape)), np.zeros((len(compact), *shape), np.float32)
        self.den = np.zeros_like(self.num[0]), np.zeros_like(self.num[1])

        def part(arrays: tuple[np.ndarray, np.ndarray], i: int) -> np.ndarray:
            return arrays[0][i] if i < self.split else arrays[1][i - self.split]

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

        self._count(run, qid, turns, add)
        at, split = (slice(None), self.row[run], self.col[qid]), self.split
        self.num[0][at] += num[:split]
        self.num[1][at] += num[split:]
        self.den[0][at] += den[:split]
        self.den[1][at] += den[split:]

    def _count(
        self, run: int, qid: str, turns: list[Turn], add: Callable[[str, float, float], None]
    ) -> None:
        count_cost(turns, self.rounds, add)
        ordered = sorted(turns, key=lambda t: t.agent)
        seen_rounds: dict[int, ScoredRound] = {}
        for r in sorted({t.round for t in turns if t.round <= self.rounds}):
            live = [t for t in ordered if t.round == r and not t.failed]
            seen_rounds[r] = self._round(run, qid, r, live, add)
        if self.summary:
            return
        count_dynamics(turns, seen_rounds, self.rounds, self.voters, self.alike, add)
        seen: dict[int, dict[int, Turn]] = defaultdict(dict)
        for t in turns:
            if not t.failed:
                seen[t.agent][t.round] = t
        for rounds in seen.values():
            for r in range(1, self.rounds + 1):
                if r - 1 in rounds and r in rounds:
                    before, after = bool(rounds[r - 1].correct), bool(rounds[r].correct)
                    add(f"c2i{r}", before and not after, 1)
                    add(f"i2c{r}", after and not before, 1)

    def _round(
        self, run: int, qid: str, r: int, live: list[Turn], add: Callable[[str, float, float], None]
    ) -> ScoredRound:
        """Count one round of one debate: `live` are its turns that did not fail, by agent.
        Returns the round as the diagnostics read it (dynamics.ScoredRound)."""
        decide, voters, hub = self.decide, self.voters, self.hub
        vote = None
        if decide.scored(live, voters, hub):
            rng = vote_ties(self.seed, run, qid, r)
            picked = decide.pick(live, voters, hub, rng, self.alike)
            if self.summary:
                for m in ROUGE:
                    add(f"{m}{r}", picked.rouge[m] if picked and picked.rouge else 0.0, 1)
            else:
                vote = picked is not None and bool(picked.correct)
                add(f"vote{r}", vote, 1)
        if self.summary:
            for t in live:
                for m in ROUGE:
                    add(f"agent_{m}{r}", t.rouge[m] if t.rouge else 0.0, 1)
            return ScoredRound(live, [], None)
        found = ScoredRound(live, answer_groups(live, self.alike), vote)
        if not live:
            return found
        groups = found.groups
        if self.rounds == 0 and (ballot := [t for t in live if t.agent in voters]):
            add("maj_boot0", bootstrap_maj(ballot), 1)
        right = [bool(t.correct) for t in live]
        add(f"agent{r}", sum(right), len(right))
        if hub is not None:
            mine = [bool(t.correct) for t in live if t.agent == hub]
            add(f"hub{r}", sum(mine), len(mine))
        add(f"unanimous{r}", found.unanimous, 1)
        add(f"entropy{r}", entropy_bits(live, groups), 1)
        pairs = list(combinations(right, 2))
        add(f"agree{r}", sum(a == b for a, b in pairs), len(pairs))
        for t in live:
            if t.completion_tokens is not None:
                add(f"len_right{r}" if t.correct else f"len_wrong{r}", t.completion_tokens, 1)
            if t.reasoning_tokens is not None:
                add(f"reasoning_len{r}", t.reasoning_tokens, 1)
            final = final_tokens(t)
            if final is not None:
                add(f"final_len{r}", final, 1)
        return found


def final_tokens(turn: Turn) -> int | None:
    """The tokens of a reply's final content: its completion tokens less its reasoning
    tokens, where the server counted those (a reasoning model's replies)."""
    if turn.completion_tokens is None or turn.reasoning_tokens is None:
        return None
    return turn.completion_tokens - turn.reasoning_tokens


def _keys(rounds: int, hub: int | None) -> list[str]:
    """A voting kind's tally keys (see Tallies), besides those of cost.cost_keys and
    dynamics.dynamics_keys."""
    keys = ["vote", "agent", "unanimous", "entropy", "agree", "len_right", "len_wrong"]
    keys += ["reasoning_len", "final_len"]
    keys += ["hub"] if hub is not None else []
    names = [f"{k}{r}" for r in range(rounds + 1) for k in keys]
    names += [f"{k}{r}" for r in range(1, rounds + 1) for k in ("c2i", "i2c")]
    return names + (["maj_boot0"] if rounds == 0 else [])


def _summary_keys(rounds: int) -> list[str]:
    """A summary's tally keys: the system's summary's ROUGE (`rouge1{r}`, `rouge2{r}`,
    `rougeL{r}`; none parsed scores 0) and the agents' mean (`agent_rouge1{r}`, ...; an
    unparsed summary scores 0)."""
    return [f"{p}{m}{r}" for r in range(rounds + 1) for m in ROUGE for p in ("", "agent_")]


def tally_summaries(turns: list[Turn], voters: list[int], rounds: int) -> Tallies:
    """A summary benchmark's counts by its default rule: per round, the ROUGE of the voters'
    consensus summary (grading.consensus, which never reads the reference) and the agents'
    mean ROUGE."""
    return tally(turns, voters, rounds, seed=0, kind="summary")


def tally_verdicts(verdicts: list[Verdict], tallies: Tallies, rounds: int) -> Tallies:
    """`tallies` with the judge's counts added: `score{r}:{name}` (a criterion's scores, or
    `total`, summed over the turns scored; its denominator counts them) and `judge_fail{r}`
    (judge failures of the turns scored or failed); without `r`, over every round. A
    verdict whose request failed counts nowhere: it is to be asked again; but what it cost
    counts in the judge's cost keys (cost.JUDGE_KEYS, per question judged)."""
    shape = (len(tallies.runs), len(tallies.questions))
    tags = ["", *(str(r) for r in range(1, rounds + 1))]
    names = [f"score{t}:{c}" for t in tags for c in CRITIQUE] + [f"judge_fail{t}" for t in tags]
    names += JUDGE_KEYS
    num = {name: np.zeros(shape) for name in names}
    den = {name: np.zeros(shape) for name in names}
    row = {run: i for i, run in enumerate(tallies.runs)}
    col = {q: j for j, q in enumerate(tallies.questions)}
    known = [v for v in verdicts if v.run in row and v.question in col]

    def spent(v: Verdict, key: str, amount: float) -> None:
        at = (row[v.run], col[v.question])
        num[key][at] += amount
        den[key][at] = 1  # per question judged

    count_judge_cost(known, spent)
    for v in known:
        if v.error is not None:
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
