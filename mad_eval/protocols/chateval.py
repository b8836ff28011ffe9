"""ChatEval (Chan et al.): agents with different personas discuss one by one (each reads
everything said before it), all at once, or all at once with a summarizer (the last agent)
whose summary of each round is what the others read next."""

from __future__ import annotations

from mad_eval.protocols.base import Protocol, ProtocolError, Role
from mad_eval.records import shown

ORDERS = ("one-by-one", "simultaneous", "summarizer")
PERSONAS = (  # (name, persona)
    (
        "general public",
        "You are one of the general public: you judge by common sense and want plain reasons.",
    ),
    ("critic", "You are a critic: you look for the weakest step in every argument."),
    ("expert", "You are a domain expert: you check each claim against what you know of the field."),
    (
        "psychologist",
        "You are a psychologist: you notice when an argument persuades more than it proves.",
    ),
    ("scientist", "You are a scientist: you test each claim on a small case before you accept it."),
)
SUMMARIZER = (
    "You summarize the discussion: state each answer given, the strongest reason for it, "
    "and the answer the discussion best supports."
)


class ChatEval(Protocol):
    name = "chateval"
    description = (
        "Chan et al.: persona agents talk one-by-one, simultaneous, or simultaneous with a "
        "summarizer (the last agent) whose summary the others read"
    )

    def __init__(self, order: str = "one-by-one", personas: bool = True):
        if order not in ORDERS:
            raise ProtocolError(
                f"chateval: order must be one of {', '.join(ORDERS)}, got {shown(order, 80)}."
            )
        self.order = order
        self.personas = personas

    def summarizer(self, n_agents: int) -> int | None:
        return n_agents - 1 if self.order == "summarizer" else None

    def validate(self, n_agents: int) -> None:
        super().validate(n_agents)
        least = 3 if self.order == "summarizer" else 2
        if n_agents < least:
            what = "two debaters and a summarizer" if least == 3 else "two agents"
            raise ProtocolError(
                f"chateval:order={self.order} needs {what}: --agents {least}, got {n_agents}."
            )

    def debaters(self, n_agents: int) -> list[int]:
        summarizer = self.summarizer(n_agents)
        return [i for i in range(n_agents) if i != summarizer]

    def sees(self, agent: int, n_agents: int) -> list[int]:
        summarizer = self.summarizer(n_agents)
        if summarizer is None or agent == summarizer:
            return self.debaters(n_agents) if agent == summarizer else list(range(n_agents))
        return [summarizer, agent]

    def schedule(self, round_: int, n_agents: int) -> list[list[int]]:
        if self.order == "one-by-one":
            return [[agent] for agent in range(n_agents)]
        if self.order == "summarizer":
            return [self.debaters(n_agents), [n_agents - 1]]
        return [list(range(n_agents))]

    def role(self, agent: int, round_: int, n_agents: int) -> Role | None:
        if not self.personas:
            return None
        if agent == self.summarizer(n_agents):
            return Role(persona=SUMMARIZER, name="summarizer")
        name, persona = PERSONAS[agent % len(PERSONAS)]
        return Role(persona=persona, name=name)

    def voters(self, n_agents: int) -> list[int]:
        return self.debaters(n_agents)
