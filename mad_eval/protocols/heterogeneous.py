"""Heterogeneous debate: a team of different models, endpoints or sampling settings, on any
of the other topologies. The team comes from --agent/--roster or from the preset itself."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from mad_eval.protocols.base import Decision, Protocol, ProtocolError, Role
from mad_eval.records import Turn, shown


class Heterogeneous(Protocol):
    name = "heterogeneous"
    description = "a mixed team (models, endpoints, sampling) on any topology"

    def __init__(
        self,
        topology: str = "decentralized",
        roster: list[dict[str, Any]] | None = None,
        **topology_params: Any,
    ):
        from mad_eval.protocols import PROTOCOLS

        classes = {name: cls for name, cls in PROTOCOLS.items() if cls is not Heterogeneous}
        if topology not in classes:
            raise ProtocolError(
                f"heterogeneous: topology {shown(topology, 80)} is not one of: "
                f"{', '.join(classes)}."
            )
        try:
            self.topology = classes[topology](**topology_params)
        except TypeError as exc:
            raise ProtocolError(
                f"heterogeneous: the {topology} topology cannot take {topology_params} ({exc})."
            ) from None
        self.roster = roster
        self.hub = self.topology.hub

    def validate(self, n_agents: int) -> None:
        self.topology.validate(n_agents)

    def sees(self, agent: int, n_agents: int) -> list[int]:
        return self.topology.sees(agent, n_agents)

    def voters(self, n_agents: int) -> list[int]:
        return self.topology.voters(n_agents)

    def schedule(self, round_: int, n_agents: int) -> list[list[int]]:
        return self.topology.schedule(round_, n_agents)

    def role(self, agent: int, round_: int, n_agents: int) -> Role | None:
        return self.topology.role(agent, round_, n_agents)

    def asks(self, agent: int, round_: int, n_agents: int) -> list[str]:
        if type(self.topology).asks is not Protocol.asks:  # a judge's verdict, say
            return self.topology.asks(agent, round_, n_agents)
        return super().asks(agent, round_, n_agents)

    def decision(self, n_agents: int) -> Decision:
        # The topology's (a judge decides a judged debate), scored by this instance's rule.
        found = self.topology.decision(n_agents)
        return found if self.score is None else replace(found, rule=self.score)

    def option_order(self, agent: int, n_agents: int, options: int, seed: int) -> list[int] | None:
        return self.topology.option_order(agent, n_agents, options, seed)

    @property
    def reorders(self) -> bool:
        return self.topology.reorders

    def stop(self, rounds: Sequence[Sequence[Turn]]) -> str | None:
        # Its own score (a consensus rule) is this instance's, not the topology's.
        return self.topology.stop(rounds) if self.topology_stops else super().stop(rounds)

    def stop_rule(self, n_agents: int) -> str | None:
        if self.topology_stops:
            return self.topology.stop_rule(n_agents)
        return self.consensus_stop(n_agents)

    @property
    def topology_stops(self) -> bool:
        return type(self.topology).stop is not Protocol.stop

    def params(self) -> dict[str, Any]:
        # The roster is recorded with the run's team, not here.
        return {"topology": self.topology.name, **self.topology.params()}
