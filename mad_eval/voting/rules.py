"""Scoring rules: whose answer is the system's answer in a round, so that a protocol can be
scored the way the paper it reproduces scored it (the vote of all agents, the hub's own
answer, the summary the agents agree on).

A rule sees one (run, question, round): its agents' turns that did not fail, in agent order.
It returns the turn whose answer is the system's, or None when there is none to take (no
parsed answer): a wrong vote, a summary that scores zero. Rules live in RULES, which a
package adds to through the entry-point group `mad_eval.rules`.
"""

from __future__ import annotations

import random
from abc import ABC, abstractmethod
from collections.abc import Sequence

from mad_eval.grading.grader import consensus
from mad_eval.grading.kinds import get_kind
from mad_eval.registry import Registry
from mad_eval.voting.groups import C, Cast, G, Same, answer_groups
from mad_eval.voting.statements import POINTS, RANKS, STATEMENTS


def plurality(groups: list[list[G]], rng: random.Random) -> G | None:
    """The first answer of the largest group (`answer_groups`); ties are broken by `rng`."""
    if not groups:
        return None
    top = max(len(g) for g in groups)
    return rng.choice([g for g in groups if len(g) == top])[0]


class Rule(ABC):
    """A scoring rule. Subclass it, set `name` and `description`, implement `pick`, and add
    an instance to RULES (or name it in the entry-point group `mad_eval.rules`)."""

    name: str
    description: str
    needs_hub: bool = False  # it reads the protocol's hub, so a protocol without one cannot use it
    # What each voter's reply must state besides its answer (voting.statements): the prompt
    # asks for it, and the rule reads it back.
    needs: tuple[str, ...] = ()
    # An agreement the debate ends at once it is reached (a consensus rule), else None.
    ends: float | None = None

    def reached(self, live: Sequence[Cast], voters: list[int], same: Same) -> bool:
        """Whether the voters' answers of one round reach the agreement `ends` names: the
        largest group of equivalent answers holds at least that share of the voters (a
        failed or unparsed voter agrees with no one)."""
        if self.ends is None:
            return False
        groups = answer_groups([t for t in live if t.agent in voters], same)
        largest = max((len(g) for g in groups), default=0)
        return largest > 0 and largest >= self.ends * len(voters) - 1e-9

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


class Majority(Plurality):
    name = "majority"
    description = (
        "the plurality answer; the debate ends once half of the voters agree "
        "(MALLM's majority consensus)"
    )
    ends = 0.5


class Supermajority(Plurality):
    name = "supermajority"
    description = (
        "the plurality answer; the debate ends once 66% of the voters agree "
        "(MALLM's supermajority consensus)"
    )
    ends = 0.66  # MALLM's threshold, not 2/3: 33 of 50 voters reach it


class Unanimity(Plurality):
    name = "unanimity"
    description = (
        "the plurality answer; the debate ends once every voter agrees "
        "(MALLM's unanimity consensus)"
    )
    ends = 1.0


class Judge(Hub):
    name = "judge"
    description = "the judge's own answer (Liang et al.'s judge decides the debate)"


class Weighted(Rule):
    """A vote where each voter gives its answers weights its reply states: the answer group
    with the largest total wins (ties drawn by seed)."""

    def pick(
        self, live: Sequence[C], voters: list[int], hub: int | None, rng: random.Random, same: Same
    ) -> C | None:
        ballot = [t for t in live if t.agent in voters]
        groups = answer_groups(ballot, same)
        if not groups:
            return None
        totals = [0.0] * len(groups)
        for voter in ballot:
            for i, weight in self.weights(voter, groups, same, len(voters)):
                totals[i] += weight
        top = max(totals)
        return rng.choice([g for g, total in zip(groups, totals, strict=True) if total == top])[0]

    def weights(
        self, voter: Cast, groups: list[list[C]], same: Same, voters: int
    ) -> list[tuple[int, float]]:
        """(group index, weight) for what `voter`, one of `voters` voters, gives weight to."""
        raise NotImplementedError

    @staticmethod
    def own(voter: Cast, groups: Sequence[Sequence[Cast]]) -> int | None:
        return next((i for i, g in enumerate(groups) if any(t is voter for t in g)), None)

    @staticmethod
    def named(answer: str, groups: Sequence[Sequence[Cast]], same: Same) -> int | None:
        """The group whose answer a statement names, compared as the kind compares answers."""
        for i, group in enumerate(groups):
            first = group[0].answer
            if first is not None and (answer.strip() == first.strip() or same(answer, first)):
                return i
        return None


class ByConfidence(Weighted):
    name = "confidence"
    description = (
        "each voter's answer weighted by the confidence its reply states (ReConcile); "
        "an unstated or unreadable one counts 0.5"
    )
    needs = ("confidence",)
    fallback = 0.5

    def weights(
        self, voter: Cast, groups: list[list[C]], same: Same, voters: int
    ) -> list[tuple[int, float]]:
        own = self.own(voter, groups)
        if own is None:
            return []
        stated = STATEMENTS.get("confidence").read(getattr(voter, "text", None))
        return [(own, self.fallback if stated is None else float(stated))]


class ByApproval(Weighted):
    name = "approval"
    description = (
        "each voter approves of the answers its reply lists; the most approved answer wins; "
        "an unreadable list approves of the voter's own answer alone"
    )
    needs = ("approval",)

    def weights(
        self, voter: Cast, groups: list[list[C]], same: Same, voters: int
    ) -> list[tuple[int, float]]:
        stated = STATEMENTS.get("approval").read(getattr(voter, "text", None))
        if stated is None:
            own = self.own(voter, groups)
            return [] if own is None else [(own, 1.0)]
        # An answer no voter gave approves of nothing, as MALLM drops a solution out of range.
        chosen = {self.named(answer, groups, same) for answer in stated}
        return [(i, 1.0) for i in chosen if i is not None]


class Cumulative(Weighted):
    name = "cumulative"
    description = (
        "each voter spreads exactly 10 points over the answers; the answer with the most "
        "points wins; points that are unreadable, or given to an answer no voter gave, put all "
        "10 on the voter's own answer"
    )
    needs = ("points",)

    def weights(
        self, voter: Cast, groups: list[list[C]], same: Same, voters: int
    ) -> list[tuple[int, float]]:
        own = self.own(voter, groups)
        stated = STATEMENTS.get("points").read(getattr(voter, "text", None))
        found = [
            (self.named(answer, groups, same), float(points)) for answer, points in stated or []
        ]
        if not found or any(i is None for i, _ in found):
            return [] if own is None else [(own, float(POINTS))]
        return [(i, points) for i, points in found if i is not None]  # all named


class Borda(Weighted):
    name = "borda"
    description = (
        "each voter ranks at most 5 answers; with n voters the first scores min(5, n), the "
        "next one less, ... (MALLM's ranked voting); a ranking that is unreadable, or names an "
        "answer no voter gave, ranks the voter's own answer first alone"
    )
    needs = ("ranking",)

    def weights(
        self, voter: Cast, groups: list[list[C]], same: Same, voters: int
    ) -> list[tuple[int, float]]:
        own = self.own(voter, groups)
        stated = STATEMENTS.get("ranking").read(getattr(voter, "text", None))
        order = [self.named(answer, groups, same) for answer in stated or []]
        if not order or None in order:
            order = [own]
        ranked = list(dict.fromkeys(i for i in order if i is not None))
        top = min(RANKS, voters)
        return [(i, float(top - place)) for place, i in enumerate(ranked)]


RULES: Registry[Rule] = Registry("scoring rule", "mad_eval.rules", holds=Rule)
for _rule in (
    Plurality(),
    Hub(),
    Consensus(),
    Majority(),
    Supermajority(),
    Unanimity(),
    Judge(),
    ByConfidence(),
    ByApproval(),
    Cumulative(),
    Borda(),
):
    RULES.add(_rule.name, _rule)


def get_rule(name: str) -> Rule:
    """The rule named `name`; a RegistryError (a ValueError) in one sentence if there is none."""
    return RULES.get(name)


def default_rule(kind: str) -> str:
    """The rule a protocol that names none is scored by: the kind's own (summaries by
    consensus, answers by plurality)."""
    return get_kind(kind).rule
