"""What an agent reads when it speaks: the latest reply of each agent, which is this round's
where that agent spoke in an earlier wave of the round, else the round before's. The engine
builds prompts from a Reading and the replay rebuilds the same Reading from the records."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

if TYPE_CHECKING:
    from mad_eval.settings.templates import Template


class Spoken(Protocol):
    @property
    def failed(self) -> bool: ...

    @property
    def sees(self) -> list[int]: ...


T = TypeVar("T", bound=Spoken)
Waves = Callable[[int], Sequence[Sequence[int]]]  # a round's speaking order (Protocol.schedule)


@dataclass(frozen=True)
class Reading(Generic[T]):
    """What one agent's prompt in round `round` is built from: `views` (what it could read in
    each round so far, `views`), `sees` (whose replies of the last view it quotes), `opening`
    (round 0's earlier waves, under a template with history) and `said` (every earlier reply
    in order, for a template that quotes them all)."""

    round: int
    views: list[Mapping[int, T]]
    sees: list[int]
    opening: dict[int, T] | None
    said: list[tuple[int, T]]

    @property
    def read(self) -> Mapping[int, T]:
        """The replies it could read as it spoke, by agent (its own previous too)."""
        return self.views[-1] if self.views else {}

    @property
    def history(self) -> list[Mapping[int, T]]:
        """The rounds build_prompt renders: none in round 0 when its own messages quote the
        earlier waves (`opening`)."""
        return [] if self.round == 0 and self.opening is not None else self.views


def reading(
    agent: int,
    round_: int,
    rounds: Sequence[Mapping[int, T]],
    now: Mapping[int, T],
    waves: Waves,
    template: Template,
    reads: set[int],
    choose: Callable[[list[Mapping[int, T]]], list[int]],
) -> Reading[T]:
    """What `agent` reads when it speaks in `round_`: `rounds` holds the earlier rounds'
    replies and `now` this round's so far, by agent; `reads` whom the protocol lets it read
    (itself among them); `choose` picks whose replies it quotes from its views."""
    said = {j: now[j] for j in spoke_before(agent, waves(round_)) if j in now}
    found = views(agent, round_, rounds, said, waves)
    sees = choose(found)
    first = opening(template.history, agent, round_, rounds, found, sees)
    whole = transcript(agent, round_, rounds, said, waves, reads) if template.transcript else []
    return Reading(round_, found, sees, first, whole)


def spoke_before(agent: int, waves: Sequence[Sequence[int]]) -> list[int]:
    """The agents who speak in a wave before `agent`'s."""
    before: list[int] = []
    for wave in waves:
        if agent in wave:
            return before
        before += wave
    return before


def views(
    agent: int,
    round_: int,
    rounds: Sequence[Mapping[int, T]],
    said: Mapping[int, T],
    waves: Waves,
) -> list[Mapping[int, T]]:
    """What `agent` read in each round up to `round_`, as build_prompt takes it: item k holds,
    by agent, the latest reply it could read when it spoke in round k + 1 (`rounds`: the
    earlier rounds' replies; `said`: this round's so far). In round 0 it reads only earlier
    waves, quoted as a debate round quotes them."""
    found: list[Mapping[int, T]] = []
    for k in range(1, round_ + 1):
        before = spoke_before(agent, waves(k))
        now = said if k == round_ else rounds[k]
        previous = rounds[k - 1]
        found.append({**previous, **{j: now[j] for j in before}} if before else previous)
    if round_ == 0 and said:
        found.append({j: said[j] for j in spoke_before(agent, waves(0)) if j in said})
    return found


def transcript(
    agent: int,
    round_: int,
    rounds: Sequence[Mapping[int, T]],
    said: Mapping[int, T],
    waves: Waves,
    reads: set[int],
) -> list[tuple[int, T]]:
    """Every reply said before `agent` speaks in `round_` by the agents it reads (`reads`,
    itself among them), in speaking order (round by round, wave by wave), failures left
    out: what a template that shows the whole conversation (`said`) quotes."""
    spoken = [
        (j, turns[j])
        for k, turns in enumerate(rounds)
        for wave in waves(k)
        for j in wave
        if j in turns
    ]
    spoken += [(j, said[j]) for j in spoke_before(agent, waves(round_)) if j in said]
    return [(j, turn) for j, turn in spoken if j in reads and not turn.failed]


def opening(
    history_template: bool,
    agent: int,
    round_: int,
    rounds: Sequence[Mapping[int, T]],
    history: Sequence[Mapping[int, T]],
    sees: list[int],
) -> dict[int, T] | None:
    """For a template with history, whose every prompt starts with round 0's messages: the
    replies the agent read in round 0 (of earlier waves; none in one wave), which round 0's
    messages quote; None for a template without history, which reads them as a debate round."""
    if not history_template:
        return None
    if round_ == 0:
        return {j: history[-1][j] for j in sees} if history else {}
    first = rounds[0]
    return {j: first[j] for j in first[agent].sees}
