"""GroupDebate (Liu et al.): the agents debate in groups of `size`; each round one agent of
every group (its first) speaks after the others and summarizes its group's replies, and
those summaries are all that the other groups read of a group."""

from __future__ import annotations

from mad_eval.protocols.base import Protocol, ProtocolError, Role
from mad_eval.records import shown

SUMMARIZER = (
    "You speak for your group: summarize its replies, the answers given and the best reason "
    "for each, and give the answer your group's discussion best supports."
)


class Group(Protocol):
    name = "group"
    description = (
        "GroupDebate: groups of `size` debate within the group; each group's first agent "
        "summarizes it after the others speak, and groups read each other's summaries"
    )

    def __init__(self, size: int = 2, personas: bool = True):
        if not isinstance(size, int) or isinstance(size, bool) or size < 1:
            raise ProtocolError(f"group: size must be a whole number >= 1, got {shown(size, 80)}.")
        self.size = size
        self.personas = personas
        self.agents = 2 * size  # two groups, unless --agents says otherwise

    def validate(self, n_agents: int) -> None:
        super().validate(n_agents)
        if n_agents % self.size or n_agents == self.size:
            raise ProtocolError(
                f"group: groups of {self.size} must divide the {n_agents} agents into two or "
                f"more groups; pass --agents {2 * self.size} (or another multiple) or "
                "group:size=K."
            )

    def leaders(self, n_agents: int) -> list[int]:
        return list(range(0, n_agents, self.size))

    def members(self, agent: int) -> list[int]:
        first = agent - agent % self.size
        return list(range(first, first + self.size))

    def sees(self, agent: int, n_agents: int) -> list[int]:
        own = self.members(agent)
        others = [leader for leader in self.leaders(n_agents) if leader not in own]
        if agent in self.leaders(n_agents):
            return own  # its group, this round: what it summarizes
        return others + own  # the other groups' summaries, then its group

    def schedule(self, round_: int, n_agents: int) -> list[list[int]]:
        leaders = self.leaders(n_agents)
        rest = [agent for agent in range(n_agents) if agent not in leaders]
        return [rest, leaders] if rest else [leaders]

    def role(self, agent: int, round_: int, n_agents: int) -> Role | None:
        if self.personas and agent % self.size == 0 and self.size > 1:
            return Role(persona=SUMMARIZER, name="summarizer")
        return None
