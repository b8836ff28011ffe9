"""Scoring rules: whose answer is the system's answer in a round, so that a protocol can be
scored the way the paper it reproduces scored it (the vote of all agents, the hub's own
answer, the summary the agents agree on), and verl's bootstrap estimate of maj@K.

A rule sees one (run, question, round): its agents' turns that did not fail, in agent order.
It returns the turn whose answer is the system's, or None when there is none to take (no
parsed answer): a wrong vote, a summary that scores zero.
"""

from __future__ import annotations

import asyncio
import functools
import random
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Protocol, Self, TypeVar

import numpy as np

from mad_eval.grading.grader import consensus, equivalent, same_answer
from mad_eval.grading.kinds import get_kind
from mad_eval.records import derive_seed, shown
from mad_eval.store.files import StoreError

if TYPE_CHECKING:
    from mad_eval.store.manifest import RunManifest

Same = Callable[[str, str], bool]


class Graded(Protocol):
    """Anything graded: a turn, a training rollout (read only, so a rollout's `correct`
    may be a plain bool)."""

    @property
    def answer(self) -> str | None: ...

    @property
    def correct(self) -> bool | None: ...

    @property
    def grade_timed_out(self) -> bool: ...


class Cast(Graded, Protocol):
    """A graded answer of one agent: what a rule chooses among."""

    agent: int


G = TypeVar("G", bound=Graded)
C = TypeVar("C", bound=Cast)


@dataclass(frozen=True)
class Vote:
    answer: str | None
    correct: bool


def answer_groups(turns: Sequence[G], same: Same = equivalent) -> list[list[G]]:
    """Parsed answers grouped by equivalence (not by string), in order of first appearance.
    `same` is the benchmark kind's equivalence (grading.same_answer). Turns whose classes
    were recorded when they were graded (AnswerClasses) are grouped by class, with no
    comparison at all; turns recorded before classes existed are compared pair by pair."""
    classes = [getattr(t, "answer_class", None) for t in turns if t.answer is not None]
    if classes and None not in classes:
        by_class: dict[int, list[G]] = {}
        for turn in turns:
            if turn.answer is not None:
                by_class.setdefault(turn.answer_class, []).append(turn)  # type: ignore[attr-defined]
        return list(by_class.values())
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


def same_answer_as(a: Graded, b: Graded, same: Same) -> bool:
    """Whether two answers of one run and question (any rounds) are equivalent: by their
    recorded classes where both have one, else compared as answer_groups compares them."""
    if a.answer is None or b.answer is None:
        return False
    mine, theirs = getattr(a, "answer_class", None), getattr(b, "answer_class", None)
    if mine is not None and theirs is not None:
        return bool(mine == theirs)
    return _same(a, b, same)


class TieBreak(random.Random):
    """The generator a vote breaks ties with, seeded from `parts` only when a tie needs it:
    most votes have one largest group, and seeding cost more than the rest of a vote. It
    draws exactly what random.Random(derive_seed(*parts)) would."""

    def __init__(self, *parts: object):  # no seeding yet
        self.parts: tuple[object, ...] | None = parts

    def choice(self, seq):  # type: ignore[no-untyped-def]
        if self.parts is not None:
            if len(seq) == 1:  # what a fresh generator's choice gives, without its draw
                return seq[0]
            self.seed(derive_seed(*self.parts))
            self.parts = None
        return super().choice(seq)


def vote_ties(seed: int, run: int, question: str, round_: int) -> TieBreak:
    """The generator one round's vote breaks its ties with, so every report, table and
    viewer page of a run picks the same answer."""
    return TieBreak(seed, "vote", run, question, round_)


class AnswerClasses:
    """The equivalence classes of one debate's answers (one run's turns of one question),
    numbered as they are graded: 0 for every right answer, 1, 2, ... for each distinct
    wrong one, None for no answer. Each wrong answer is compared with the first answer of
    each wrong class, in class order, by the rule answer_groups applies pair by pair
    (`_same`); the engine records the class on the turn, so votes and reports never compare
    answers again. math-verify's equivalence is not always transitive, so in a rare case
    classes made in grading order group differently from pairs taken in agent order; the
    recorded classes are what is voted on from then on."""

    def __init__(self, same: Same):
        self.same = same
        self.first: dict[int, Graded] = {}  # each wrong class's first answer
        self.lock = asyncio.Lock()  # for callers that assign from several tasks

    def seen(self, turn: Graded, answer_class: int | None) -> None:
        """A turn recorded earlier (a resumed run): its class is known."""
        if answer_class is not None and answer_class > 0:
            self.first.setdefault(answer_class, turn)

    def assign(self, graded: Graded) -> int | None:
        """The class of a newly graded answer (math-verify may be asked)."""
        if graded.answer is None:
            return None
        if graded.correct:
            return 0
        for number in sorted(self.first):
            if _same(graded, self.first[number], self.same):
                return number
        number = max(self.first, default=0) + 1
        self.first[number] = graded
        return number


def plurality(groups: list[list[G]], rng: random.Random) -> G | None:
    """The first answer of the largest group (`answer_groups`); ties are broken by `rng`."""
    if not groups:
        return None
    top = max(len(g) for g in groups)
    return rng.choice([g for g in groups if len(g) == top])[0]


def majority_vote(turns: list[G], rng: random.Random, groups: list[list[G]] | None = None) -> Vote:
    """Plurality over extracted answers grouped by equivalence; ties are broken by `rng`.
    Unparsed answers do not vote; no answer at all is a wrong vote. `groups` are the
    turns' answer_groups, when the caller has them already."""
    winner = plurality(answer_groups(turns) if groups is None else groups, rng)
    return Vote(None, False) if winner is None else Vote(winner.answer, bool(winner.correct))


class Rule(ABC):
    """A scoring rule. Subclass it, set `name` and `description`, implement `pick`."""

    name: str
    description: str
    needs_hub: bool = False  # it reads the protocol's hub, so a protocol without one cannot use it

    def scored(self, live: Sequence[Cast], voters: list[int], hub: int | None) -> bool:
        """Whether the round has a system answer to score at all: by default when a voter
        answered; a question whose every voter failed has no vote."""
        return any(t.agent in voters for t in live)

    @abstractmethod
    def pick(
        self,
        live: Sequence[C],
        voters: list[int],
        hub: int | None,
        rng: random.Random,
        same: Same,
    ) -> C | None:
        """The turn whose answer is the system's, or None when there is no parsed answer."""


class Plurality(Rule):
    name = "plurality"
    description = "the answer most voters gave (equivalent answers pooled; ties drawn by seed)"

    def pick(
        self, live: Sequence[C], voters: list[int], hub: int | None, rng: random.Random, same: Same
    ) -> C | None:
        return plurality(answer_groups([t for t in live if t.agent in voters], same), rng)


class Hub(Rule):
    name = "hub"
    description = "the hub's own answer in every round, as Debate-or-Vote scores centralized debate"
    needs_hub = True

    def scored(self, live: Sequence[Cast], voters: list[int], hub: int | None) -> bool:
        return True  # a failed hub is a wrong answer, never a question left out

    def pick(
        self, live: Sequence[C], voters: list[int], hub: int | None, rng: random.Random, same: Same
    ) -> C | None:
        mine = next((t for t in live if t.agent == hub), None)
        return mine if mine is not None and mine.answer is not None else None


class Consensus(Rule):
    name = "consensus"
    description = "the voters' summary with the highest mean ROUGE-L to the others"

    def pick(
        self, live: Sequence[C], voters: list[int], hub: int | None, rng: random.Random, same: Same
    ) -> C | None:
        parsed = [t for t in live if t.agent in voters and t.answer is not None]
        answers = [t.answer for t in parsed if t.answer is not None]  # all of them: parsed
        return parsed[consensus(answers)] if parsed else None


RULES: dict[str, Rule] = {rule.name: rule for rule in (Plurality(), Hub(), Consensus())}


def get_rule(name: str) -> Rule:
    """The rule named `name`; ValueError in one sentence if there is none."""
    if name not in RULES:
        raise ValueError(f"unknown scoring rule '{name}'; known rules: {', '.join(RULES)}.")
    return RULES[name]


def default_rule(kind: str) -> str:
    """The rule a protocol that names none is scored by: the kind's own (summaries by
    consensus, answers by plurality)."""
    return get_kind(kind).rule


@dataclass(frozen=True)
class Scoring:
    """How a run's answers are scored, read once from its manifest and handed to every
    counter and formula, so no signature restates (or silently defaults) any of it."""

    agents: int
    rounds: int
    voters: tuple[int, ...]  # whose answers make the system's vote
    kind: str  # how answers are graded and compared (grading.kinds)
    seed: int  # the run's seed: ties in a vote are broken by it
    hub: int | None = None
    rule: str = ""  # the scoring rule (RULES); "" : the kind's default
    answer: str | None = None  # the answer protocol; None: the kind's default

    @property
    def same(self) -> Same:
        """Whether two of the run's answers are one answer: the kind's equivalence, or equal
        text under a protocol that compares strings (dapo)."""
        return same_answer(self.kind, self.answer)

    def __post_init__(self) -> None:
        object.__setattr__(self, "voters", tuple(self.voters))
        object.__setattr__(self, "rule", self.rule or default_rule(self.kind))

    @property
    def voted(self) -> bool:
        """Whether answers are right or wrong and voted (a summary is scored instead)."""
        return get_kind(self.kind).voted

    def group(self, members: Sequence[int]) -> Self:
        """An agent group's own scoring: its members vote among themselves by the kind's
        default rule, with no hub."""
        return replace(self, agents=len(members), voters=tuple(members), hub=None, rule="")

    @classmethod
    def from_manifest(cls, manifest: RunManifest) -> Self:
        """A run's scoring, from its manifest: the one place a reader takes it from. The
        rule is the one the protocol named (`score`), else, as for every run made before
        rules existed, the kind's default; a rule the manifest cannot have is a StoreError."""
        named, hub = manifest.protocol.score, manifest.protocol.hub
        if named is not None and named not in RULES:
            known = ", ".join(RULES)
            raise StoreError(
                f"the manifest names scoring rule {shown(named)}, not one of: {known}."
            )
        if named is not None and RULES[named].needs_hub and hub is None:
            raise StoreError(
                f"the manifest names scoring rule {shown(named)}, but its protocol has no hub."
            )
        config = manifest.config
        return cls(
            agents=config.agents,
            rounds=config.rounds,
            voters=tuple(manifest.protocol.voters),
            kind=manifest.benchmark.kind,
            seed=config.seed,
            hub=hub,
            rule=named or "",
            answer=manifest.benchmark.answer,
        )


# verl's maj@K/mean: 1000 resamples of the K answers, drawn after seeding numpy's legacy
# generator with 42 (verl reseeds it for every question).
BOOTSTRAP_DRAWS, BOOTSTRAP_SEED = 1000, 42


@functools.lru_cache(maxsize=64)
def bootstrap_draws(k: int) -> np.ndarray:
    """verl's resampled indices for K answers: [1000, K]. RandomState(42) is the stream
    np.random.seed(42) starts; one call draws what verl's 1000 calls in a row draw (tested).
    Shared between calls: callers must not modify it."""
    drawn = np.random.RandomState(BOOTSTRAP_SEED).choice(k, size=(BOOTSTRAP_DRAWS, k))
    drawn.setflags(write=False)
    return drawn


def bootstrap_votes(samples: Sequence[Graded]) -> np.ndarray:
    """verl's 1000 resampled votes for one question's K answers (in agent order), each 1.0
    (right) or 0.0: in each resample of K answers with replacement, the most frequent exact
    answer string wins (ties go to the one drawn first), scored by its first drawn sample.
    Unparsed answers are one more answer, always wrong (verl's "[INVALID]")."""
    codes: dict[str | None, int] = {}
    answer = np.array([codes.setdefault(t.answer, len(codes)) for t in samples])
    right = np.array([t.answer is not None and bool(t.correct) for t in samples], dtype=float)
    drawn = bootstrap_draws(len(samples))
    votes = answer[drawn]  # [draws, K]: the answer of each drawn sample
    counts = (votes[:, :, None] == np.arange(len(codes))).sum(axis=1)  # [draws, answers]
    support = np.take_along_axis(counts, votes, axis=1)  # each drawn sample's answer's count
    # The first position holding a most frequent answer: the winner's first drawn sample.
    first = np.argmax(support == support.max(axis=1, keepdims=True), axis=1)
    chosen: np.ndarray = right[drawn[np.arange(len(drawn)), first]]
    return chosen


def bootstrap_maj(samples: Sequence[Graded]) -> float:
    """verl's maj@K/mean for one question's K answers: the mean of its resampled votes."""
    return float(np.mean(bootstrap_votes(samples)))


def bootstrap_maj_std(samples: Sequence[Graded]) -> float:
    """verl's maj@K/std for one question's K answers: the spread of its resampled votes
    (NumPy's population standard deviation, as verl takes it)."""
    return float(np.std(bootstrap_votes(samples)))
