"""Decentralized debate: everyone reads everyone, as in Du et al. (2023)."""

from __future__ import annotations

from mad_eval.protocols.base import Protocol


class Decentralized(Protocol):
    name = "decentralized"
    description = "every agent reads all agents' previous responses, its own marked as its own"

    def sees(self, agent: int, n_agents: int) -> list[int]:
        # The same order for everyone, so all N prompts share everything but their last lines.
        return list(range(n_agents))
