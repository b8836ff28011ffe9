"""MALLM's discussion paradigms (Becker et al.): `relay` (one by one, each agent reading only
the one who spoke before it), `memory` (one by one, everyone reading everything said so far)
and `report` (the others speak, then a moderator, agent 0, reads them all; the others read
only the moderator)."""

from __future__ import annotations

from mad_eval.protocols.base import Protocol, ProtocolError


class OneByOne(Protocol):
    """A round spoken one agent after another, in agent order."""

    def validate(self, n_agents: int) -> None:
        super().validate(n_agents)
        if n_agents < 2:
            raise ProtocolError(f"{self.name} needs at least 2 agents, got {n_agents}.")

    def schedule(self, round_: int, n_agents: int) -> list[list[int]]:
        return [[agent] for agent in range(n_agents)]


class Relay(OneByOne):
    name = "relay"
    description = "MALLM relay: one by one, each agent reads only the agent who spoke before it"

    def sees(self, agent: int, n_agents: int) -> list[int]:
        return [(agent - 1) % n_agents]


class Memory(OneByOne):
    name = "memory"
    description = "MALLM memory: one by one, everyone reads everything said so far"

    def sees(self, agent: int, n_agents: int) -> list[int]:
        return list(range(n_agents))


class Report(Protocol):
    name = "report"
    description = (
        "MALLM report: the others speak, then a moderator (agent 0) reads them all; the "
        "others read only the moderator"
    )

    def validate(self, n_agents: int) -> None:
        super().validate(n_agents)
        if n_agents < 2:
            raise ProtocolError(
                f"report needs a moderator and at least one other agent, got {n_agents}."
            )

    def sees(self, agent: int, n_agents: int) -> list[int]:
        return list(range(n_agents)) if agent == 0 else [0, agent]

    def schedule(self, round_: int, n_agents: int) -> list[list[int]]:
        return [list(range(1, n_agents)), [0]]
