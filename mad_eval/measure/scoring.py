"""How a run's answers are scored, read once from its manifest and handed to every counter
and formula: its agents, rounds, voters, kind, seed, hub and scoring rule."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Self

from mad_eval.grading.grader import same_answer
from mad_eval.grading.kinds import get_kind
from mad_eval.records import shown
from mad_eval.store.files import StoreError
from mad_eval.voting.groups import Same
from mad_eval.voting.rules import RULES, default_rule

if TYPE_CHECKING:
    from mad_eval.records import Stop
    from mad_eval.store.manifest import RunManifest


@dataclass(frozen=True)
class Scoring:
    """How a run's answers are scored, so no signature restates (or silently defaults) any
    of it."""

    agents: int
    rounds: int
    voters: tuple[int, ...]  # whose answers make the system's vote
    kind: str  # how answers are graded and compared (grading.kinds)
    seed: int  # the run's seed: ties in a vote are broken by it
    hub: int | None = None
    rule: str = ""  # the scoring rule (voting.rules.RULES); "" : the kind's default
    answer: str | None = None  # the answer protocol; None: the kind's default
    # The last round of each debate its protocol ended early, by (run, question): its
    # answers there count as its answers of every later round (stops.jsonl).
    stops: Mapping[tuple[int, str], int] = field(default_factory=dict, compare=False)
    # What may end a debate early (the manifest's protocol.ends); None: nothing does.
    ends: str | None = None

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

    def stopped(self, run: int, question: str) -> int | None:
        """The round a debate was ended after, or None where it went to the last round."""
        return self.stops.get((run, question))

    @classmethod
    def from_manifest(
        cls, manifest: RunManifest, stops: Mapping[tuple[int, str], Stop] | None = None
    ) -> Self:
        """A run's scoring, from its manifest and its stops (RunStore.stops): the one place
        a reader takes it from. The rule is the one the protocol named (`score`), else, as
        for every run made before rules existed, the kind's default; a rule the manifest
        cannot have is a StoreError."""
        named, hub = manifest.protocol.score, manifest.protocol.hub
        if named is not None and named not in RULES:
            known = ", ".join(RULES)
            raise StoreError(
                f"the manifest names scoring rule {shown(named)}, not one of: {known}."
            )
        if named is not None and RULES.get(named).needs_hub and hub is None:
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
            stops={debate: stop.round for debate, stop in (stops or {}).items()},
            ends=manifest.protocol.ends,
        )
