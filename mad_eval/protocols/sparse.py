"""Sparse debate: each agent reads itself and a few neighbours on a ring, or on a given graph."""

from __future__ import annotations

from typing import Any

from mad_eval.protocols.base import Protocol, ProtocolError
from mad_eval.records import shown

ORDERS = ("agent", "ring")


class Sparse(Protocol):
    name = "sparse"
    description = "each agent reads itself and its ring neighbours (i-1, i+1 by default)"

    def __init__(self, degree: int = 2, graph: list[list[int]] | None = None, order: str = "agent"):
        """`degree` neighbours on a ring, nearest first, alternating right and left
        (i+1, i-1, i+2, i-2, ...); or an explicit `graph`: graph[i] lists whom agent i reads.
        `order`: how they are quoted: in agent order, itself among them (the default, as
        every run before the setting), or `ring`: on the ring, the left neighbour before the
        right, nearest first (i-1, i+1, i-2, ...; a graph's row as written), itself last,
        as Debate-or-Vote quotes them."""
        if not isinstance(degree, int) or isinstance(degree, bool) or degree < 0:
            raise ProtocolError(
                f"sparse: degree must be a whole number >= 0, got {shown(degree, 80)}."
            )
        if order not in ORDERS:
            raise ProtocolError(f"sparse: order must be agent or ring, got {shown(order, 80)}.")
        if graph is not None and not (
            isinstance(graph, list) and all(isinstance(row, list) for row in graph)
        ):
            raise ProtocolError(
                f"sparse: graph must be a list of neighbour lists, e.g. [[1], [0, 2], [1]], "
                f"got {shown(graph, 80)}."
            )
        self.degree = degree
        self.graph = graph
        self.order = order

    def validate(self, n_agents: int) -> None:
        super().validate(n_agents)
        if self.graph is not None:
            if len(self.graph) != n_agents:
                raise ProtocolError(
                    f"sparse: the graph lists neighbours for {len(self.graph)} agents, "
                    f"but the run has {n_agents}."
                )
            for agent, row in enumerate(self.graph):
                for j in row:
                    if not isinstance(j, int) or not 0 <= j < n_agents:
                        raise ProtocolError(
                            f"sparse: graph[{agent}] names {shown(j, 80)}, which is not an agent "
                            f"index 0..{n_agents - 1}."
                        )
        elif self.degree > n_agents - 1:
            raise ProtocolError(
                f"sparse with degree {self.degree} needs at least {self.degree + 1} agents, "
                f"got {n_agents}; lower the degree (sparse:degree=K) or add agents."
            )

    def sees(self, agent: int, n_agents: int) -> list[int]:
        if self.graph is not None:
            neighbours = list(dict.fromkeys(self.graph[agent]))
        else:
            neighbours = []
            step = 1
            while len(neighbours) < self.degree:
                near = ((agent + step) % n_agents, (agent - step) % n_agents)
                for j in near[::-1] if self.order == "ring" else near:
                    if j != agent and j not in neighbours and len(neighbours) < self.degree:
                        neighbours.append(j)
                step += 1
        if self.order == "ring":
            return [j for j in neighbours if j != agent] + [agent]
        return sorted({*neighbours, agent})

    def params(self) -> dict[str, Any]:
        # Not every keyword, as derived: manifests from before `order` existed stay valid.
        found: dict[str, Any] = {"degree": self.degree}
        if self.graph is not None:
            found = {"graph": self.graph}
        if self.order != "agent":  # recorded only when set, so earlier runs resume unchanged
            found["order"] = self.order
        return found
