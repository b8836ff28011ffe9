"""Single-model baselines from DebateLLM (Smit et al., "Should we be going MAD?") that are no
debate: Medprompt's choice-shuffle ensemble (each agent reads the options in its own seeded
order) and Ensemble Refinement (independent samples, then aggregations that read them all).
Solo Performance Prompting is `single` with the spp prompt template."""

from __future__ import annotations

import random
from collections.abc import Sequence

from mad_eval.protocols.base import Protocol
from mad_eval.protocols.single import Single
from mad_eval.records import Turn


class Shuffled(Single):
    name = "medprompt"
    description = (
        "no debate: each agent answers alone, a choice question's options in its own seeded "
        "order (Medprompt's choice shuffle); answers mapped back, then voted"
    )

    def option_order(self, agent: int, n_agents: int, options: int, seed: int) -> list[int]:
        order = list(range(options))
        random.Random(seed).shuffle(order)
        return order


class Refinement(Protocol):
    name = "ensemble_refinement"
    description = (
        "Ensemble Refinement: independent samples in round 0, then in round 1 each agent "
        "aggregates them all; round 1 is voted and the debate ends there"
    )

    def sees(self, agent: int, n_agents: int) -> list[int]:
        return list(range(n_agents))

    def stop(self, rounds: Sequence[Sequence[Turn]]) -> str | None:
        return "ensemble refinement ends after its aggregation round" if len(rounds) > 1 else None

    def stop_rule(self, n_agents: int) -> str | None:
        return "ensemble refinement aggregates its samples in round 1"
