"""Sparse debate: each agent reads itself and a few neighbours on a ring, or on a given graph."""

from __future__ import annotations

from typing import Any

from mad_eval.protocols.base import Protocol, ProtocolError


class Sparse(Protocol):
    name = "sparse"
    description = "each agent reads itself and its ring neighbours (i-1, i+1 by default)"

    def __init__(self, degree: int = 2, graph: list[list[int]] | None = None):
        """`degree` neighbours on a ring, nearest first, alternating right and left
        (i+1, i-1, i+2, i-2, ...); or an explicit `graph`: graph[i] lists whom agent i reads."""
        if not isinstance(degree, int) or isinstance(degree, bool) or degree < 0:
            raise ProtocolError(f"sparse: degree must be a whole number >= 0, got {degree!r}.")
        if graph is not None and not (
            isinstance(graph, list) and all(isinstance(row, list) for row in graph)
        ):
            raise ProtocolError(
                f"sparse: graph must be a list of neighbour lists, e.g. [[1], [0, 2], [1]], "
                f"got {graph!r}."
            )
        self.degree = degree
        self.graph = graph

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
                            f"sparse: graph[{agent}] names {j!r}, which is not an agent index "
                            f"0..{n_agents - 1}."
                        )
        elif self.degree > n_agents - 1:
            raise ProtocolError(
                f"sparse with degree {self.degree} needs at least {self.degree + 1} agents, "
                f"got {n_agents}; lower the degree (sparse:degree=K) or add agents."
            )

    def sees(self, agent: int, n_agents: int) -> list[int]:
        if self.graph is not None:
            neighbours = set(self.graph[agent])
        else:
            neighbours = set()
            step = 1
            while len(neighbours) < self.degree:
                for j in ((agent + step) % n_agents, (agent - step) % n_agents):
                    if j != agent and len(neighbours) < self.degree:
                        neighbours.add(j)
                step += 1
        return sorted(neighbours | {agent})

    def params(self) -> dict[str, Any]:
        return {"degree": self.degree} if self.graph is None else {"graph": self.graph}
