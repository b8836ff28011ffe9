"""The protocol interface: who sees whom between rounds, and whose answers make the vote."""

from __future__ import annotations

from abc import ABC, abstractmethod


class ProtocolError(ValueError):
    """A protocol cannot run with the requested settings."""


class Protocol(ABC):
    name: str
    description: str

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
