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
from typing import Any, TypeVar

from mad_eval.backends import Backend, Generation, Request, Sampling
from mad_eval.backends.base import every
from mad_eval.debate.context import ContextError, EstimateCounter, Fitted, Fitter, prefix_tokens
from mad_eval.debate.prompts import RoundReplies, Speaker, build_prompt
from mad_eval.debate.seats import Seat
from mad_eval.grading import grader as grading
from mad_eval.grading.kinds import get_kind
from mad_eval.protocols import Protocol
from mad_eval.records import Messages, Question, Turn, TurnKey, derive_seed, messages_hash
from mad_eval.setup.config import RunConfig
from mad_eval.setup.templates import load_template
from mad_eval.voting.groups import AnswerClasses

T = TypeVar("T")
Item = TypeVar("Item")
# Debates in flight per request slot (engine.window).
WINDOW = 4
Debate = tuple["Engine", int, Question]  # an engine, a run, a question


class Engine:
    def __init__(
        self,
        config: RunConfig,
        protocol: Protocol,
        seats: list[Seat],
        done: Mapping[TurnKey, Turn],
        on_turn: Callable[[Turn], None],
        on_progress: Callable[[int], None] = lambda turns: None,
    ):
        if any(seat.agent.max_tokens is None for seat in seats):
            raise ValueError("resolve max_tokens (the benchmark's budget) before running")
        self.config = config
        self.protocol = protocol
        self.seats = seats
        self.done = done
        self.on_turn = on_turn
        self.on_progress = on_progress
        # Replies are recorded as written only where someone reads them so (--quote verbatim).
        self.verbatim = any(seat.speaker.quote.how == "verbatim" for seat in seats)

    async def run(self, questions: list[Question]) -> None:
        await run_all([[(self, questions)]], window(self.seats, self.config.concurrency))

    async def debate(self, run: int, question: Question) -> list[Turn]:
        """All rounds of one debate; returns the last round's turns (none when it was
        finished before)."""
        if self.finished(run, question):  # resumed: nothing to ask, nothing to read
            self.on_progress(len(self.seats) * (self.config.rounds + 1))
            return []
        history: list[list[Turn]] = []
        classes = None  # the answers' equivalence classes, for a kind that votes
        if get_kind(question.kind).voted:
            classes = AnswerClasses(grading.same_answer(question.kind, question.answer))
        for round_ in range(self.config.rounds + 1):
            previous = history[-1] if history else []
            # Decided once per agent: the prompt is built from it and the turn records it.
            sees = [self.visible(seat.agent.index, previous) for seat in self.seats]
            keys = [(run, question.id, round_, seat.agent.index) for seat in self.seats]
            if all(key in self.done for key in keys):
                prompts: list[Fitted | ContextError | None] = [None] * len(self.seats)
            else:
                rounds = [dict(enumerate(turns)) for turns in history]
                prompts = await asyncio.to_thread(self.round_prompts, question, rounds, sees)
            shared = self.shared_prefixes(prompts)
            history.append(
                await every(
                    self.turn(run, question, round_, seat, previous, seen, prompt, prefix, classes)
                    for seat, seen, prompt, prefix in zip(
                        self.seats, sees, prompts, shared, strict=True
                    )
                )
            )
        return history[-1]

    def finished(self, run: int, question: Question) -> bool:
        """Whether every turn of a debate is recorded (its records are not read)."""
        return all(
            (run, question.id, round_, seat.agent.index) in self.done
            for round_ in range(self.config.rounds + 1)
            for seat in self.seats
        )

    def round_prompts(
        self, question: Question, history: list[RoundReplies], sees: list[list[int]]
    ) -> list[Fitted | ContextError | None]:
        """Every agent's prompt for the next round, fitted to its context budget."""
        prompts: list[Fitted | ContextError | None] = []
        for seat, seen in zip(self.seats, sees, strict=True):
            try:
                prompts.append(
                    build_prompt(seat.speaker, question, history, seen, seat.fitter, seat.budget)
                )
            except ContextError as exc:
                prompts.append(exc)
        return prompts

    def shared_prefixes(self, prompts: list[Fitted | ContextError | None]) -> list[int | None]:
        """Tokens each prompt shares with a lower-numbered agent's prompt of the same round
        sent to the same backend: a prefix cache lives in one server."""
        shared: list[int | None] = [None] * len(prompts)
        by_backend: dict[int, list[int]] = {}
        for i, (seat, prompt) in enumerate(zip(self.seats, prompts, strict=True)):
            if isinstance(prompt, Fitted):
                by_backend.setdefault(id(seat.backend), []).append(i)
        for members in by_backend.values():
            fitted = [prompts[i] for i in members]
            counts = prefix_tokens(fitted, self.seats[members[0]].fitter.counter)  # type: ignore[arg-type]
            for i, count in zip(members, counts, strict=True):
                shared[i] = count
        return shared

    async def turn(
        self,
        run: int,
        question: Question,
        round_: int,
        seat: Seat,
        previous: list[Turn],
        sees: list[int],
        prompt: Fitted | ContextError | None,
        prefix: int | None,
        classes: AnswerClasses | None = None,
    ) -> Turn:
        agent = seat.agent
        key = (run, question.id, round_, agent.index)
        if key in self.done:
            done = self.done[key]
            if classes is not None:
                classes.seen(done, done.answer_class)
            self.on_progress(1)
            return done
        assert prompt is not None, "a prompt is built for every turn not yet done"

        sampling = Sampling(
            temperature=agent.temperature,
            top_p=agent.top_p,
            max_tokens=agent.max_tokens,  # type: ignore[arg-type]
            seed=derive_seed(self.config.seed, run, question.id, round_, agent.index),
        )
        if isinstance(prompt, ContextError):  # never sent: the server would refuse it
            messages: Messages = []
            generation = Generation(text=None, error=f"ContextError: {prompt}", attempts=0)
        else:
            messages = prompt.messages
            state = previous[agent.index].state if previous else None
            quoted = tuple(previous[j].text or "" for j in sees)
            request = Request(messages, sampling, question, state, quoted, agent.extra_body)
            generation = await seat.backend.generate(request)
        graded = grading.Grade(None, None)
        if generation.error is None:
            # Cut off inside its reasoning: no final answer to read, whatever came before.
            text = "" if generation.truncated else generation.text or ""
            gold = question.gold
            # The final content, its reasoning split off already (reasoning.split_reply).
            how = (text, gold, question.kind, question.options, question.answer, False)
            quick = grading.grade_inline(*how)
            graded = quick if quick is not None else await asyncio.to_thread(grading.grade, *how)

        fitted = prompt if isinstance(prompt, Fitted) else None
        turn = Turn(
            run=run,
            question=question.id,
            round=round_,
            agent=agent.index,
            model=agent.model,
            seed=sampling.seed,
            temperature=sampling.temperature,
            top_p=sampling.top_p,
            max_tokens=sampling.max_tokens,
            messages_hash=messages_hash(messages),
            sees=sees,
            text=generation.text,
            reasoning=generation.reasoning,
            reasoning_tokens=generation.reasoning_tokens,
            truncated_in_reasoning=generation.truncated,
            refusal=generation.refusal,
            usage_invalid=generation.usage_invalid,
            reply=generation.reply if self.verbatim else None,
            answer=graded.answer,
            correct=graded.correct,
            rouge=graded.rouge,
            grade_timed_out=graded.timed_out,
            finish_reason=generation.finish_reason,
            prompt_tokens=generation.prompt_tokens,
            completion_tokens=generation.completion_tokens,
            latency=round(generation.latency, 4),
            error=generation.error,
            served_model=generation.served_model,
            state=generation.state,
            endpoint=generation.endpoint,
            attempts=generation.attempts,
            cached=generation.cached,
            context_tokens=fitted.tokens if fitted else None,
            cut_tokens=fitted.cut if fitted else 0,
            prefix_tokens=prefix,
        )
        if classes is not None:
            turn.answer_class = await classify(classes, turn)
        self.on_turn(turn)
        self.on_progress(1)
        return turn

    def visible(self, agent: int, previous: list[Turn]) -> list[int]:
        """Whose previous-round turns go into the prompt: the protocol's choice, less failures."""
        if not previous:
            return []
        return [j for j in self.protocol.sees(agent, len(self.seats)) if not previous[j].failed]


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

    def debates(work: Iterable[tuple[Engine, list[Question]]]) -> Iterator[Debate]:
        for engine, questions in work:
            left[id(engine)] = engine.config.runs * len(questions)
            if not left[id(engine)]:
                on_finished(engine)
            for run in range(engine.config.runs):
                for question in questions:
                    yield engine, run, question

    async def debate(item: Debate) -> None:
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
    previous turn it continues) is to be asked again in the round before."""
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
            again = failed.get(round_, set()) | {i for i in range(agents) if reads[i] & again}
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
