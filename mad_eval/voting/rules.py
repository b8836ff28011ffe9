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


RULES: Registry[Rule] = Registry("scoring rule", "mad_eval.rules", holds=Rule)
for _rule in (Plurality(), Hub(), Consensus()):
    RULES.add(_rule.name, _rule)


def get_rule(name: str) -> Rule:
    """The rule named `name`; a RegistryError (a ValueError) in one sentence if there is none."""
    return RULES.get(name)


def default_rule(kind: str) -> str:
    """The rule a protocol that names none is scored by: the kind's own (summaries by
    consensus, answers by plurality)."""
    return get_kind(kind).rule
