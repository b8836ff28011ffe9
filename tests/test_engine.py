"""The engine's schedule: a bounded window of debates in flight, and finished debates of a
resumed run skipped without asking anything."""

from __future__ import annotations

import asyncio

from mad_eval.backends import Backend, Generation, Request, make_backend
from mad_eval.debate.engine import Engine, shared_seats
from mad_eval.protocols import resolve
from mad_eval.records import Question, Turn
from mad_eval.settings.config import RunConfig

DECENTRALIZED = resolve("decentralized").protocol
QUESTIONS = [Question(f"q{i}", f"What is {i} + 1?", str(i + 1)) for i in range(40)]


class Watching(Backend):
    """The simulated agents, counting the debates with a request in flight. With `hold`,
    no request is answered until that many debates have one in flight (an event, not a
    sleep: how the event loop interleaves the debates cannot change the count)."""

    spec = "sim"

    def __init__(self, hold: int = 0) -> None:
        self.inner = make_backend("sim")
        self.in_flight: dict[str, int] = {}
        self.most_debates = 0
        self.asked = 0
        self.hold = hold
        self.filled: asyncio.Event | None = None

    async def generate(self, request: Request):
        qid = request.question.id
        self.asked += 1
        self.in_flight[qid] = self.in_flight.get(qid, 0) + 1
        self.most_debates = max(self.most_debates, len(self.in_flight))
        if self.hold:
            self.filled = self.filled or asyncio.Event()
            if len(self.in_flight) >= self.hold:
                self.filled.set()
            # A generous bound, only reached when the window never fills (the test fails).
            await asyncio.wait_for(self.filled.wait(), timeout=120)
        generation = await self.inner.generate(request)
        self.in_flight[qid] -= 1
        if not self.in_flight[qid]:
            del self.in_flight[qid]
        return generation


def run(config: RunConfig, backend: Backend, done: dict | None = None) -> list[Turn]:
    turns: list[Turn] = []
    engine = Engine(config, DECENTRALIZED, shared_seats(config, backend), done or {}, turns.append)
    asyncio.run(engine.run(QUESTIONS))
    return turns


def test_a_window_of_debates_is_in_flight_not_every_question():
    """Concurrency 2 on one endpoint: a window of 4 x 2 debates, filled (no request is
    answered before 8 debates have one in flight) but never exceeded."""
    config = RunConfig(agents=3, rounds=2, max_tokens=64, concurrency=2)
    backend = Watching(hold=8)
    turns = run(config, backend)
    assert len(turns) == 40 * 3 * 3
    assert backend.most_debates == 8


def test_a_resumed_run_asks_only_its_unfinished_debates():
    config = RunConfig(agents=3, rounds=2, max_tokens=64)
    first = run(config, Watching())
    # Half the debates finished; of one more, only round 0 is on disk.
    finished = {q.id for q in QUESTIONS[:20]}
    done = {
        t.key: t for t in first if t.question in finished or (t.question == "q20" and t.round == 0)
    }
    backend = Watching()
    again = run(config, backend, done)
    assert backend.asked == 20 * 3 * 3 - 3  # nothing of the finished debates, q20's round 0 kept
    assert {t.key: t.text for t in again} | {k: t.text for k, t in done.items()} == {
        t.key: t.text for t in first
    }


class LastFirst(Backend):
    """Holds each wave's requests until all of its agents have asked, then answers the last
    agent's first; agent k's answer is the wrong 100 + k."""

    spec = "sim"

    def __init__(self, agents: int) -> None:
        self.agents = agents
        self.waiting: list[asyncio.Future[None]] = []

    async def generate(self, request: Request) -> Generation:
        arrived = asyncio.get_running_loop().create_future()
        self.waiting.append(arrived)
        place = len(self.waiting) - 1
        if len(self.waiting) == self.agents:
            for future in reversed(self.waiting):
                future.set_result(None)
            self.waiting = []
        await arrived
        return Generation(text=f"\\boxed{{{100 + place}}}", finish_reason="stop")


def test_a_waves_answers_are_classed_in_agent_order_whatever_order_they_arrive_in():
    config = RunConfig(agents=3, rounds=1, max_tokens=64)
    turns: list[Turn] = []
    seats = shared_seats(config, LastFirst(3))
    asyncio.run(Engine(config, DECENTRALIZED, seats, {}, turns.append).run(QUESTIONS[:1]))
    assert [(t.round, t.agent) for t in turns] == [(r, a) for r in range(2) for a in range(3)]
    assert [t.answer_class for t in turns] == [1, 2, 3] * 2


class Says(Backend):
    """Answers every request at once (it never waits) with the same wrong number."""

    spec = "sim"

    def __init__(self, answer: str) -> None:
        self.answer = answer

    async def generate(self, request: Request) -> Generation:
        return Generation(text=f"\\boxed{{{self.answer}}}", finish_reason="stop")


def test_recorded_classes_are_known_before_a_new_answer_of_their_wave_is_classed():
    config = RunConfig(agents=2, rounds=0, max_tokens=64)
    recorded: list[Turn] = []
    seats = shared_seats(config, Says("100"))
    asyncio.run(Engine(config, DECENTRALIZED, seats, {}, recorded.append).run(QUESTIONS[:1]))
    kept = next(t for t in recorded if t.agent == 1)  # agent 0's turn is asked again
    done = {kept.key: kept}
    turns: list[Turn] = []
    seats = shared_seats(config, Says("200"))
    asyncio.run(Engine(config, DECENTRALIZED, seats, done, turns.append).run(QUESTIONS[:1]))
    [asked] = turns
    # "100" holds class 1 in the records: the new "200" is another class, never 1 as well.
    assert (kept.answer, kept.answer_class) == ("100", 1)
    assert (asked.answer, asked.answer_class) == ("200", 2)
