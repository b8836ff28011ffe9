"""The protocol interface: who sees whom between rounds, and whose answers make the vote."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

from mad_eval.errors import UserError
from mad_eval.records import shown
from mad_eval.voting.rules import get_rule


class ProtocolError(UserError, ValueError):
    """A protocol cannot run with the requested settings."""


class Protocol(ABC):
    """A debate topology. Subclass it, set `name` and `description`, implement `sees`.

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

    def validate(self, n_agents: int) -> None:
        """Raise ProtocolError if this topology makes no sense for n_agents."""
        if n_agents < 1:
            raise ProtocolError(f"--agents must be at least 1, got {n_agents}.")

    @abstractmethod
    def sees(self, agent: int, n_agents: int) -> list[int]:
        """The agents whose previous-round responses `agent` reads, in prompt order."""

    def voters(self, n_agents: int) -> list[int]:
        """The agents whose answers make the system's vote."""
        return list(range(n_agents))

    def params(self) -> dict[str, Any]:
        """The parameters this instance was built with, recorded in the manifest."""
        return {}


def check_protocol(protocol: Protocol, n_agents: int) -> None:
    """Validate a protocol for n_agents and check that what it returns is usable, so a faulty
    plug-in fails before the first request with a sentence naming the bad value."""
    protocol.validate(n_agents)
    label = getattr(protocol, "name", type(protocol).__name__)
    agents = range(n_agents)
    for agent in agents:
        _check_indices(protocol.sees(agent, n_agents), n_agents, f"{label}: sees({agent})")
    voters = protocol.voters(n_agents)
    _check_indices(voters, n_agents, f"{label}: voters()")
    if not voters:
        raise ProtocolError(f"{label}: voters() is empty; at least one agent must vote.")
    if protocol.hub is not None and protocol.hub not in agents:
        raise ProtocolError(f"{label}: hub {protocol.hub} is not an agent index 0..{n_agents - 1}.")
    score = getattr(protocol, "score", None)
    if score is not None:
        try:
            rule = get_rule(score)
        except ValueError as exc:
            raise ProtocolError(f"{label}: {exc}") from None
        if rule.needs_hub and protocol.hub is None:
            raise ProtocolError(
                f"score={score} needs a protocol with a hub, such as centralized; {label} has none."
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
