"""The protocol interface: the shape of a debate. Who reads whom, who speaks when within a
round, what each agent is told it is, when the debate stops, and how its answer is chosen;
every hook but `sees` has a default that is the plain simultaneous debate."""

from __future__ import annotations

import inspect
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from mad_eval.errors import UserError
from mad_eval.records import shown
from mad_eval.voting.rules import get_rule

if TYPE_CHECKING:
    from mad_eval.records import Turn


class ProtocolError(UserError, ValueError):
    """A protocol cannot run with the requested settings."""


@dataclass(frozen=True)
class Role:
    """What an agent is in one round, where it differs from its seat: a persona its template
    may show (None: the agent's own --persona), a prompt template by name or file (None:
    the agent's own --prompt-template), and a short name the manifest and the viewer show
    ("judge", "critic")."""

    persona: str | None = None
    template: str | None = None
    name: str | None = None


@dataclass(frozen=True)
class Decision:
    """How a debate's answer is chosen: the scoring rule `rule` (voting.rules; None: the
    benchmark kind's default) over the answers of `voters`, where `agent` is the one whose
    own answer the rule `hub` takes: a hub, or a judge seated as an agent that reads the
    debaters in a later wave and votes alone (voters [judge], rule hub)."""

    rule: str | None
    voters: list[int]
    agent: int | None = None


class Protocol(ABC):
    """A debate's shape. Subclass it, set `name` and `description`, implement `sees`.

    `sees` also fixes the order in which responses are quoted. Put the responses that many
    agents see first and agent-specific ones last: agents whose prompts start alike share a
    prefix that vLLM's prefix cache computes once.
    """

    name: str
    description: str
    # An agent whose own accuracy metrics.json reports next to the vote (centralized's hub).
    hub: int | None = None
    # The scoring rule that picks the system's answer (mad_eval.voting.rules); None: the
    # benchmark kind's default (plurality; consensus for summaries).
    score: str | None = None
    # A team this protocol brings with it (heterogeneous presets); --agent/--roster override it.
    roster: list[dict[str, Any]] | None = None
    # The number of agents it is written for (a judged debate's three), taken when neither
    # --agents nor a team says; None: the project's default.
    agents: int | None = None

    def validate(self, n_agents: int) -> None:
        """Raise ProtocolError if this topology makes no sense for n_agents."""
        if n_agents < 1:
            raise ProtocolError(f"--agents must be at least 1, got {n_agents}.")

    @abstractmethod
    def sees(self, agent: int, n_agents: int) -> list[int]:
        """The agents whose responses `agent` reads, in prompt order: each one's latest, so
        its reply of this round where it spoke in an earlier wave (`schedule`), else its
        reply of the round before (none in round 0)."""

    def schedule(self, round_: int, n_agents: int) -> list[list[int]]:
        """Who speaks when in round `round_`: waves in speaking order, every agent in exactly
        one; the agents of a wave speak at once and read what earlier waves said. One wave
        of everyone: the simultaneous round; [[0], [1], ...]: one by one; groups in turn."""
        return [list(range(n_agents))]

    def role(self, agent: int, round_: int, n_agents: int) -> Role | None:
        """What `agent` is told it is in round `round_`; None: its seat's own persona and
        prompt template, in every round."""
        return None

    def stop(self, rounds: Sequence[Sequence[Turn]]) -> str | None:
        """Why a debate ends after its last round so far (`rounds`: each round's turns in
        agent order, round 0 first) rather than going on to --rounds, in one sentence
        (stops.jsonl records it); None: it goes on. Never asked after the last round.
        Decide from the turns alone, so a resumed debate stops where it did. By default a
        consensus rule (score=unanimity, supermajority) ends it once its voters agree."""
        decision = self.decision(len(rounds[-1]))
        rule = get_rule(decision.rule) if decision.rule else None
        if rule is None or rule.ends is None:
            return None
        live = [t for t in rounds[-1] if not t.failed]
        if not rule.reached(live, decision.voters, _same_text):
            return None
        return f"the voters reached {rule.name} in round {len(rounds) - 1}"

    def stop_rule(self, n_agents: int) -> str | None:
        """What ends this protocol's debates early, in a few words (None: nothing does):
        an overridden `stop`, or a consensus decision rule."""
        if type(self).stop is not Protocol.stop:
            return f"{self.name} ends debates early"
        return self.consensus_stop(n_agents)

    def consensus_stop(self, n_agents: int) -> str | None:
        """What ends a debate once its voters agree (a consensus rule), or None."""
        rule = self.decision(n_agents).rule
        if rule and get_rule(rule).ends is not None:
            return f"score={rule} ends a debate once its voters agree"
        return None

    def asks(self, agent: int, round_: int, n_agents: int) -> list[str]:
        """What `agent`'s reply must state in round `round_` besides its answer
        (voting.statements): by default what the decision rule reads from its voters."""
        decision = self.decision(n_agents)
        if decision.rule is None or agent not in decision.voters:
            return []
        return list(get_rule(decision.rule).needs)

    def option_order(self, agent: int, n_agents: int, options: int, seed: int) -> list[int] | None:
        """The order `agent` is shown a choice question's `options` options in, its own view
        of the question: item i is the index of the option it reads as letter i, and its
        answer is mapped back to the question's letters before it is graded and voted (the
        turn records the order). `seed` is derived from the run's seed, the run, the question
        and the agent, so a resumed run shows the same order. None (the default): as listed."""
        return None

    @property
    def reorders(self) -> bool:
        """Whether this protocol gives agents their own order of a question's options."""
        return type(self).option_order is not Protocol.option_order

    def decision(self, n_agents: int) -> Decision:
        """How the debate's answer is chosen: `score` over the answers of `voters`, `hub`
        the agent a hub rule takes."""
        return Decision(self.score, self.voters(n_agents), self.hub)

    def voters(self, n_agents: int) -> list[int]:
        """The agents whose answers make the system's vote."""
        return list(range(n_agents))

    def params(self) -> dict[str, Any]:
        """The parameters this instance was built with, recorded in the manifest: each
        keyword of `__init__` that the instance keeps as a same-named attribute (override
        to record them otherwise)."""
        found = {}
        for parameter in inspect.signature(type(self).__init__).parameters.values():
            if parameter.name == "self" or parameter.kind in (
                parameter.VAR_POSITIONAL,
                parameter.VAR_KEYWORD,
            ):
                continue
            if hasattr(self, parameter.name):
                found[parameter.name] = getattr(self, parameter.name)
        return found


def _same_text(a: str, b: str) -> bool:
    """Answers the engine gave no class (a kind that is not voted): equal text is agreement."""
    return " ".join(a.split()) == " ".join(b.split())


def check_protocol(protocol: Protocol, n_agents: int, rounds: int = 0) -> None:
    """Validate a protocol for n_agents and `rounds` debate rounds and check that what it
    returns is usable, so a faulty plug-in fails before the first request with a sentence
    naming the bad value."""
    protocol.validate(n_agents)
    label = getattr(protocol, "name", type(protocol).__name__)
    agents = range(n_agents)
    for agent in agents:
        _check_indices(protocol.sees(agent, n_agents), n_agents, f"{label}: sees({agent})")
    for round_ in range(rounds + 1):
        _check_schedule(
            protocol.schedule(round_, n_agents), n_agents, f"{label}: schedule({round_})"
        )
        for agent in agents:
            role = protocol.role(agent, round_, n_agents)
            if role is not None and not isinstance(role, Role):
                raise ProtocolError(
                    f"{label}: role({agent}, {round_}) returned {shown(role, 80)}; it must "
                    "return a Role or None."
                )
    if protocol.reorders:
        for agent in agents:
            order = protocol.option_order(agent, n_agents, 4, 0)
            if order is not None and not _is_order(order, 4):
                raise ProtocolError(
                    f"{label}: option_order({agent}, {n_agents}, 4, 0) returned "
                    f"{shown(order, 80)}; it must return None or an order of the option "
                    "indices 0..3."
                )
    decision = protocol.decision(n_agents)
    if not isinstance(decision, Decision):
        raise ProtocolError(f"{label}: decision() returned {shown(decision, 80)}, not a Decision.")
    _check_indices(decision.voters, n_agents, f"{label}: voters()")
    if not decision.voters:
        raise ProtocolError(f"{label}: voters() is empty; at least one agent must vote.")
    for hub, what in ((protocol.hub, "hub"), (decision.agent, "decision agent")):
        if hub is not None and hub not in agents:
            raise ProtocolError(f"{label}: {what} {hub} is not an agent index 0..{n_agents - 1}.")
    if decision.rule is not None:
        try:
            rule = get_rule(decision.rule)
        except ValueError as exc:
            raise ProtocolError(f"{label}: {exc}") from None
        if rule.needs_hub and decision.agent is None:
            who = (
                "a judge, such as judged" if rule.name == "judge" else "a hub, such as centralized"
            )
            raise ProtocolError(
                f"score={decision.rule} needs a protocol with {who}; {label} has none."
            )
    ends = protocol.stop_rule(n_agents) if rounds == 0 else None
    if ends:
        raise ProtocolError(f"{ends}, which needs debate rounds: pass --rounds 1 or more.")


def debate_shape(protocol: Protocol, n_agents: int, rounds: int) -> dict[str, Any]:
    """What the manifest records of a debate's shape beyond its reading graph, so a replay
    rebuilds every prompt and the viewer shows it from the records alone; each None where it
    is the plain simultaneous debate: `waves` (each round's speaking order), `roles` (each
    round's Role per agent, as a table or null), `asks` (what each agent's reply must state,
    per round) and `ends` (what may end a debate early)."""
    each = range(rounds + 1)
    agents = range(n_agents)
    waves = [protocol.schedule(r, n_agents) for r in each]
    roles = [[protocol.role(a, r, n_agents) for a in agents] for r in each]
    asks = [[protocol.asks(a, r, n_agents) for a in agents] for r in each]
    together = [[list(agents)]] * (rounds + 1)
    return {
        "waves": waves if waves != together else None,
        "roles": [[asdict(role) if role else None for role in row] for row in roles]
        if any(any(row) for row in roles)
        else None,
        "asks": asks if any(any(row) for row in asks) else None,
        "ends": protocol.stop_rule(n_agents) if rounds else None,
    }


def role_templates(protocol: Protocol, n_agents: int, rounds: int) -> list[str]:
    """The prompt templates the protocol's roles name, in first use: a run loads, checks and
    records them with its agents' own."""
    found = (
        protocol.role(agent, round_, n_agents)
        for round_ in range(rounds + 1)
        for agent in range(n_agents)
    )
    return list(dict.fromkeys(role.template for role in found if role and role.template))


def _is_order(value: Any, n: int) -> bool:
    """Whether `value` is a list of the indices 0..n-1, each once."""
    return (
        isinstance(value, list)
        and all(type(i) is int for i in value)
        and sorted(value) == list(range(n))
    )


def _check_schedule(waves: Any, n_agents: int, where: str) -> None:
    if not isinstance(waves, list) or not all(isinstance(wave, list) and wave for wave in waves):
        raise ProtocolError(
            f"{where} returned {shown(waves, 80)}; it must return a list of non-empty lists "
            "of agent indices (the waves that speak in turn)."
        )
    for wave in waves:
        _check_indices(wave, n_agents, where)
    spoken = sorted(agent for wave in waves for agent in wave)
    if spoken != list(range(n_agents)):
        raise ProtocolError(
            f"{where} returned {shown(waves, 80)}; every agent 0..{n_agents - 1} must speak "
            "exactly once a round."
        )


def _check_indices(value: Any, n_agents: int, where: str) -> None:
    if not isinstance(value, list) or not all(
        isinstance(i, int) and not isinstance(i, bool) for i in value
    ):
        raise ProtocolError(
            f"{where} returned {shown(value, 80)}; it must return a list of agent indices."
        )
    bad = [i for i in value if not 0 <= i < n_agents]
    if bad:
        raise ProtocolError(
            f"{where} returned {bad[0]}, which is not an agent index 0..{n_agents - 1}."
        )
    if len(set(value)) != len(value):
        raise ProtocolError(f"{where} returned {value}, which repeats an agent.")
