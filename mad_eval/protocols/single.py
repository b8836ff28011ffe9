"""No debate: every agent answers the question alone, an independent sample (mad-eval single)."""

from __future__ import annotations

from mad_eval.protocols.base import Protocol


class Single(Protocol):
    name = "single"
    description = "no debate: K independent samples per question, voted (mean@K, maj@K)"

    def sees(self, agent: int, n_agents: int) -> list[int]:
        return []
