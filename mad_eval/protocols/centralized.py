"""Centralized debate: a hub reads everyone; everyone else reads the hub and themselves."""

from __future__ import annotations

from mad_eval.protocols.base import Protocol, ProtocolError
from mad_eval.records import shown


class Centralized(Protocol):
    name = "centralized"
    description = "a hub agent reads every response; the others read the hub's and their own"
    hub: int  # always one here

    def __init__(self, hub: int = 0):
        if not isinstance(hub, int) or isinstance(hub, bool) or hub < 0:
            raise ProtocolError(
                f"centralized: hub must be an agent index >= 0, got {shown(hub, 80)}."
            )
        self.hub = hub

    def validate(self, n_agents: int) -> None:
        super().validate(n_agents)
        if n_agents < 2:
            raise ProtocolError(
                f"centralized needs at least 2 agents (a hub and one other), got {n_agents}."
            )
        if self.hub >= n_agents:
            raise ProtocolError(
                f"centralized: hub {self.hub} is not an agent index 0..{n_agents - 1}."
            )

    def sees(self, agent: int, n_agents: int) -> list[int]:
        # The hub's response first in every prompt: that is the prefix all agents share.
        if agent == self.hub:
            return [self.hub, *(j for j in range(n_agents) if j != self.hub)]
        return [self.hub, agent]
