"""Runs every (run, question) debate at once under each endpoint's concurrency limit.

There is no global round barrier: round t of one question starts as soon as round t-1 of
that question is done, so a slow question never idles the server.

A run stops as a whole: the first error that is not a turn's own (a full disk, a broken
cache) or a cancellation (Ctrl-C) cancels every debate in flight, and only turns that were
answered are ever recorded, so resuming asks exactly what is missing.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from functools import partial
from typing import Any, TypeVar

from mad_eval.backends import Backend, Generation, Request, Sampling
from mad_eval.backends.base import every
from mad_eval.debate.context import ContextError, EstimateCounter, Fitted, Fitter, prefix_tokens
from mad_eval.debate.prompts import Speaker, read_prompt
from mad_eval.debate.reading import Reading, reading
from mad_eval.debate.seats import Seat
from mad_eval.grading import grader as grading
from mad_eval.grading.kinds import get_kind
from mad_eval.grading.kinds.choice import in_order, letter_back
from mad_eval.protocols import Protocol
from mad_eval.records import Question, Stop, Turn, TurnKey, derive_seed, messages_hash
from mad_eval.settings.config import RunConfig
from mad_eval.settings.templates import Template, load_template
from mad_eval.voting.groups import AnswerClasses

T = TypeVar("T")
Item = TypeVar("Item")
# Debates in flight per request slot (engine.window).
WINDOW = 4
DebateTask = tuple["Engine", int, Question]  # an engine, a run, a question: one debate to run


class Engine:
    def __init__(
        self,
        config: RunConfig,
        protocol: Protocol,
        seats: list[Seat],
        done: Mapping[TurnKey, Turn],
        on_turn: Callable[[Turn], None],
        on_progress: Callable[[int], None] = lambda turns: None,
        templates: Mapping[str, Template] | None = None,
        stops: Mapping[tuple[int, str], Stop] | None = None,
        on_stop: Callable[[Stop], None] = lambda stop: None,
    ):
        if any(seat.agent.max_tokens is None for seat in seats):
            raise ValueError("resolve max_tokens (the benchmark's budget) before running")
        self.config = config
        self.protocol = protocol
        self.seats = seats
        self.done = done
        self.on_turn = on_turn
        self.on_progress = on_progress
        self.stops = dict(stops or {})  # the debates recorded as ended early
        self.on_stop = on_stop
        # The prompt templates the protocol's roles name, by name (loaded when missing).
        self.templates = dict(templates or {})
        # Replies are recorded as written only where someone reads them so (--quote verbatim).
        self.verbatim = any(seat.speaker.quote.how == "verbatim" for seat in seats)
        self.reorders = protocol.reorders  # agents see a choice question's options reordered

    async def run(self, questions: list[Question]) -> None:
        await run_all([[(self, questions)]], window(self.seats, self.config.concurrency))

    async def debate(self, run: int, question: Question) -> list[Turn]:
        """All rounds of one debate, each spoken in the protocol's waves, until the last
        round or the protocol stops it; returns its last round's turns (none when it was
        finished before)."""
        n, last = len(self.seats), self.config.rounds
        if self.finished(run, question):  # resumed: nothing to ask, nothing to read
            self.on_progress(n * (last + 1))
            return []
        classes = None  # the answers' equivalence classes, for a kind that votes
        if get_kind(question.kind).voted:
            classes = AnswerClasses(grading.same_answer(question.kind, question.answer))
        rounds: list[list[Turn]] = []
        for round_ in range(last + 1):
            said: dict[int, Turn] = {}  # this round's turns so far, by agent
            for wave in self.protocol.schedule(round_, n):
                turns = await self.wave(run, question, round_, wave, rounds, said, classes)
                said.update(zip(wave, turns, strict=True))
            rounds.append([said[agent] for agent in range(n)])
            why = self.protocol.stop(rounds) if round_ < last else None
            if why:
                if (run, question.id) not in self.stops:
                    stop = Stop(run, question.id, round_, stop_reason(self.protocol, why))
                    self.stops[(run, question.id)] = stop
                    self.on_stop(stop)
                self.on_progress(n * (last - round_))  # the rounds it ends without
                break
        return rounds[-1]

    def finished(self, run: int, question: Question) -> bool:
        """Whether every turn of a debate is recorded, to its last round or to the round
        it was recorded to stop after (its records are not read)."""
        stop = self.stops.get((run, question.id))
        last = self.config.rounds if stop is None else stop.round
        return all(
            (run, question.id, round_, seat.agent.index) in self.done
            for round_ in range(last + 1)
            for seat in self.seats
        )

    async def wave(
        self,
        run: int,
        question: Question,
        round_: int,
        wave: list[int],
        rounds: list[list[Turn]],
        said: dict[int, Turn],
        classes: AnswerClasses | None,
    ) -> list[Turn]:
        """The turns of agents who speak at once, each reading what was said before it."""
        seats = [self.seated(agent, round_) for agent in wave]
        viewed = [self.view(run, question, agent) for agent in wave]
        earlier = [dict(enumerate(turns)) for turns in rounds]
        # Decided once per agent: the prompt is built from it and the turn records it.
        readings = [self.reading(seat, round_, earlier, said) for seat in seats]
        if all((run, question.id, round_, agent) in self.done for agent in wave):
            prompts: list[Fitted | ContextError | None] = [None] * len(wave)
        else:
            asked = [view for view, _ in viewed]
            if all(isinstance(seat.fitter.counter, EstimateCounter) for seat in seats):
                prompts = self.prompts(asked, seats, readings)  # counting characters: quick
            else:  # a tokenizer counts: off the event loop
                prompts = await asyncio.to_thread(self.prompts, asked, seats, readings)
        prefixes = self.shared_prefixes(seats, prompts)
        asks = [
            Ask(seat, round_, found.sees, found.read, prompt, prefix, *view)
            for seat, found, prompt, prefix, view in zip(
                seats, readings, prompts, prefixes, viewed, strict=True
            )
        ]
        order = None
        if classes is not None:
            # Recorded classes are facts: known before any new answer of the wave is classed.
            for agent in wave:
                recorded = self.done.get((run, question.id, round_, agent))
                if recorded is not None:
                    classes.seen(recorded, recorded.answer_class)
            order = InOrder(len(asks))
        return await every(
            self.turn(run, question, ask, classes, order, place) for place, ask in enumerate(asks)
        )

    def view(self, run: int, question: Question, agent: int) -> tuple[Question, list[int] | None]:
        """The question as `agent` reads it, and the order of its options there where the
        protocol gives it its own (None: as listed)."""
        if not self.reorders:
            return question, None
        seed = derive_seed(self.config.seed, "options", run, question.id, agent)
        order = self.protocol.option_order(agent, len(self.seats), len(question.options), seed)
        return (question, None) if order is None else (in_order(question, order), order)

    def seated(self, agent: int, round_: int) -> Seat:
        """The agent's seat, its speaker as the protocol's role for the round says."""
        seat = self.seats[agent]
        role = self.protocol.role(agent, round_, len(self.seats))
        asks = tuple(self.protocol.asks(agent, round_, len(self.seats)))
        if asks != seat.speaker.asks:
            seat = replace(seat, speaker=replace(seat.speaker, asks=asks))
        if role is None:
            return seat
        speaker = seat.speaker
        if role.persona is not None:
            speaker = replace(speaker, persona=role.persona)
        if role.template is not None:
            if role.template not in self.templates:
                self.templates[role.template] = load_template(role.template)
            speaker = replace(speaker, template=self.templates[role.template])
        return replace(seat, speaker=speaker)

    def reading(
        self, seat: Seat, round_: int, rounds: list[dict[int, Turn]], said: Mapping[int, Turn]
    ) -> Reading[Turn]:
        """What the seat's agent reads when it speaks in `round_` (reading.reading)."""
        agent = seat.agent.index
        reads = {*self.protocol.sees(agent, len(self.seats)), agent}
        template = seat.speaker.template
        return reading(
            agent, round_, rounds, said, self.waves, template, reads, partial(self.visible, agent)
        )

    def waves(self, round_: int) -> list[list[int]]:
        return self.protocol.schedule(round_, len(self.seats))

    def visible(self, agent: int, history: list[Mapping[int, Turn]]) -> list[int]:
        """Whose replies go into the prompt: the protocol's choice of those said, less failures."""
        if not history:
            return []
        read = history[-1]
        seen = self.protocol.sees(agent, len(self.seats))
        return [j for j in seen if j in read and not read[j].failed]

    def prompts(
        self, questions: list[Question], seats: list[Seat], readings: list[Reading[Turn]]
    ) -> list[Fitted | ContextError | None]:
        """Each seat's prompt of its question, fitted to its context budget."""
        prompts: list[Fitted | ContextError | None] = []
        for question, seat, found in zip(questions, seats, readings, strict=True):
            try:
                prompts.append(read_prompt(seat.speaker, question, found, seat.fitter, seat.budget))
            except ContextError as exc:
                prompts.append(exc)
        return prompts

    def shared_prefixes(
        self, seats: list[Seat], prompts: list[Fitted | ContextError | None]
    ) -> list[int | None]:
        """Tokens each prompt shares with a lower-numbered agent's prompt of the same wave
        sent to the same backend: a prefix cache lives in one server."""
        shared: list[int | None] = [None] * len(prompts)
        by_backend: dict[int, list[int]] = {}
        for i, (seat, prompt) in enumerate(zip(seats, prompts, strict=True)):
            if isinstance(prompt, Fitted):
                by_backend.setdefault(id(seat.backend), []).append(i)
        for members in by_backend.values():
            fitted = [prompts[i] for i in members]
            counts = prefix_tokens(fitted, seats[members[0]].fitter.counter)  # type: ignore[arg-type]
            for i, count in zip(members, counts, strict=True):
                shared[i] = count
        return shared

    async def turn(
        self,
        run: int,
        question: Question,
        ask: Ask,
        classes: AnswerClasses | None = None,
        order: InOrder | None = None,
        place: int = 0,
    ) -> Turn:
        """One agent's turn: the recorded one when resumed, else asked, graded and recorded;
        its answer classed (`classes`) when the turns before it in its wave (`order`,
        `place`) are."""
        try:
            return await self._turn(run, question, ask, classes, order, place)
        finally:
            if order is not None:
                order.done(place)

    async def _turn(
        self,
        run: int,
        question: Question,
        ask: Ask,
        classes: AnswerClasses | None,
        order: InOrder | None,
        place: int,
    ) -> Turn:
        key = (run, question.id, ask.round, ask.seat.agent.index)
        if key in self.done:
            turn = self.done[key]  # its class was seen as its wave began
        else:
            assert ask.prompt is not None, "a prompt is built for every turn not yet done"
            sampling = self.sampling(key, ask.seat)
            shown = ask.question or question  # its own view of the question, where it has one
            generation = await self.generate(ask, sampling, shown)
            graded = await grade(generation, shown)
            if ask.order is not None:
                graded = graded_back(graded, question, ask.order)
            turn = Turn.from_generation(
                key,
                generation,
                graded,
                **self.asked(ask, sampling),
                # Replies are recorded as written only where someone reads them so.
                reply=generation.reply if self.verbatim else None,
            )
            if classes is not None:
                if order is not None:
                    await order.before(place)
                turn.answer_class = await classify(classes, turn)
            self.on_turn(turn)
        self.on_progress(1)
        return turn

    def sampling(self, key: TurnKey, seat: Seat) -> Sampling:
        agent = seat.agent
        return Sampling(
            temperature=agent.temperature,
            top_p=agent.top_p,
            max_tokens=agent.max_tokens,  # type: ignore[arg-type]
            seed=derive_seed(self.config.seed, *key),
        )

    @staticmethod
    async def generate(ask: Ask, sampling: Sampling, question: Question) -> Generation:
        """The backend's answer to the prompt, or a ContextError's: a prompt over its budget
        is never sent (the server would refuse it)."""
        if isinstance(ask.prompt, ContextError):
            return Generation(text=None, error=f"ContextError: {ask.prompt}", attempts=0)
        agent = ask.seat.agent
        own = ask.read.get(agent.index)
        state = own.state if own is not None else None
        quoted = tuple(ask.read[j].text or "" for j in ask.sees)
        messages = ask.prompt.messages  # type: ignore[union-attr]
        request = Request(
            messages, sampling, question, state, quoted, agent.extra_body, ask.seat.speaker.asks
        )
        return await ask.seat.backend.generate(request)

    @staticmethod
    def asked(ask: Ask, sampling: Sampling) -> dict[str, Any]:
        """What a turn records of its request besides the answer: model, sampling, prompt."""
        fitted = ask.prompt if isinstance(ask.prompt, Fitted) else None
        return {
            "model": ask.seat.agent.model,
            "seed": sampling.seed,
            "temperature": sampling.temperature,
            "top_p": sampling.top_p,
            "max_tokens": sampling.max_tokens,
            "messages_hash": messages_hash(fitted.messages if fitted else []),
            "sees": ask.sees,
            "context_tokens": fitted.tokens if fitted else None,
            "cut_tokens": fitted.cut if fitted else 0,
            "prefix_tokens": ask.prefix,
            "option_order": ask.order,
        }


@dataclass(frozen=True)
class Ask:
    """One turn to ask: whose, in which round, whom it reads and the prompt built so."""

    seat: Seat
    round: int
    sees: list[int]
    read: Mapping[int, Turn]  # the replies it could read, by agent (its own previous too)
    prompt: Fitted | ContextError | None  # None: the turn is recorded already
    prefix: int | None = None  # tokens shared with an earlier prompt of its wave
    question: Question | None = None  # its own view of the question (None: as asked)
    order: list[int] | None = None  # the order of the options in that view


def stop_reason(protocol: Protocol, why: str | bool) -> str:
    """The sentence a stop records: the protocol's own, or one naming it."""
    return why if isinstance(why, str) else f"{protocol.name} ended the debate"


def graded_back(graded: grading.Grade, question: Question, order: list[int]) -> grading.Grade:
    """A grade read in an agent's view of a choice question, its letter mapped back to the
    question's own and graded against its gold."""
    answer = letter_back(graded.answer, order)
    return get_kind(question.kind).grade(answer, question.gold)


async def grade(generation: Generation, question: Question) -> grading.Grade:
    """A reply's grade; none for a failed request."""
    if generation.error is not None:
        return grading.Grade(None, None)
    # Cut off inside its reasoning: no final answer to read, whatever came before.
    text = "" if generation.truncated else generation.text or ""
    # The final content, its reasoning split off already (reasoning.split_reply).
    how = (text, question.gold, question.kind, question.options, question.answer, False)
    quick = grading.grade_inline(*how)
    return quick if quick is not None else await asyncio.to_thread(grading.grade, *how)


def window(seats: Iterable[Seat], concurrency: int) -> int:
    """Debates in flight at once: enough to fill every endpoint's concurrency limit several
    times over (a debate has at most one request per agent in flight), few enough that
    memory follows the work in flight, not the number of questions."""
    slots = {slot for seat in seats for slot in seat.agent.slots}
    return WINDOW * concurrency * len(slots)


async def run_all(
    groups: list[Iterable[tuple[Engine, list[Question]]]],
    limit: int,
    on_finished: Callable[[Engine], Any] = lambda engine: None,
) -> None:
    """Every debate of every engine, at most `limit` in flight. Within a group (the runs on
    one set of endpoints) an engine's debates follow another's, so the next run starts while
    the last debates of the one before are still in flight; the groups' debates take turns,
    so every group's servers stay busy. A group's work is drawn from only as its debates are
    reached (a run folder may be opened then); `on_finished(engine)` follows an engine's
    last debate."""
    left: dict[int, int] = {}

    def debates(work: Iterable[tuple[Engine, list[Question]]]) -> Iterator[DebateTask]:
        for engine, questions in work:
            left[id(engine)] = engine.config.runs * len(questions)
            if not left[id(engine)]:
                on_finished(engine)
            for run in range(engine.config.runs):
                for question in questions:
                    yield engine, run, question

    async def debate(item: DebateTask) -> None:
        engine, run, question = item
        await engine.debate(run, question)
        left[id(engine)] -= 1
        if not left[id(engine)]:
            on_finished(engine)

    await each(interleave([debates(group) for group in groups]), debate, limit)


def interleave(streams: list[Iterator[T]]) -> Iterator[T]:
    """One item of each stream in turn, until all are spent."""
    active = collections.deque(streams)
    while active:
        stream = active.popleft()
        try:
            item = next(stream)
        except StopIteration:
            continue
        active.append(stream)
        yield item


class InOrder:
    """A wave's turns classed in agent order, whatever order their replies come in: a
    debate's answer classes, and the comparisons made to find them, are then the same in
    every run of it (a re-run asks math-verify nothing its verdict cache holds)."""

    def __init__(self, count: int):
        self._classed = [asyncio.Event() for _ in range(count)]

    async def before(self, place: int) -> None:
        """Wait until the turns before `place` are classed (or have failed)."""
        if place:
            await self._classed[place - 1].wait()

    def done(self, place: int) -> None:
        self._classed[place].set()


async def classify(classes: AnswerClasses, turn: Turn) -> int | None:
    """The turn's answer class: on the event loop when no math-verify worker is needed, else
    in a thread; one turn of a debate at a time, so its classes stay one numbering."""
    async with classes.lock:
        try:
            with grading.inline():
                return classes.assign(turn)
        except grading.NeedsWorker:
            return await asyncio.to_thread(classes.assign, turn)


def to_ask_again(done: Mapping[TurnKey, Turn], protocol: Protocol, agents: int) -> set[TurnKey]:
    """For --retry-failed: every failed turn, and every later turn of its debate that was
    built without it. A turn was, when an agent it reads (or the agent itself, whose own
    previous turn it continues) is to be asked again: in the round before, or in an earlier
    wave of its own round."""
    by_debate: dict[tuple[int, str], dict[int, set[int]]] = {}
    for (run, question, round_, agent), turn in done.items():
        if turn.failed:
            by_debate.setdefault((run, question), {}).setdefault(round_, set()).add(agent)
    reads = [{*protocol.sees(i, agents), i} for i in range(agents)]
    stale: set[TurnKey] = set()
    last = max((key[2] for key in done), default=0)
    for (run, question), failed in by_debate.items():
        again: set[int] = set()
        for round_ in range(min(failed), last + 1):
            before, now = again, set(failed.get(round_, set()))
            spoken: set[int] = set()  # earlier waves of this round
            for wave in protocol.schedule(round_, agents):
                now |= {i for i in wave if reads[i] & ((before - spoken) | (now & spoken))}
                spoken |= set(wave)
            again = now
            stale |= {(run, question, round_, i) for i in again}
    return {key for key in stale if key in done}


async def each(items: Iterable[Item], do: Callable[[Item], Awaitable[Any]], limit: int) -> None:
    """do(item) for every item, at most `limit` at a time, in order of the items, with
    every's failure rules; items are drawn only as a place frees up."""
    items = iter(items)

    async def worker() -> None:
        for item in items:  # shared by the workers: each takes the next item
            await do(item)

    await every(worker() for _ in range(max(1, limit)))


def shared_seats(config: RunConfig, backend: Backend) -> list[Seat]:
    """Every agent of `config` on one backend, prompt lengths estimated, no context budget:
    the simplest table, for scripts and tests that build an Engine by hand."""
    fitter = Fitter(EstimateCounter(), strip_think=config.strip_think)
    team = config.team()
    template = load_template(config.prompt_style)
    return [
        Seat(
            agent,
            backend,
            fitter,
            None,
            Speaker(template, agent.index, len(team), quote=agent.quote),
        )
        for agent in team
    ]
