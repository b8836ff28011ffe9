"""The one async interface every backend implements, and the guard wrapped around it once.

What a failure becomes depends on who failed:
- TransientError (rate limit, server error, timeout, dropped connection, a garbled 200): the
  request is asked again, with backoff, on whichever replica is least busy.
- RequestError (the server refused the request or answered it unusably): a failed turn,
  recorded with its reason, never graded.
- anything else is this process's own fault (a closed client, a broken cache, a bug): it
  stops the run, and the turn is not recorded, so resuming asks it again.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import random
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Coroutine, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any, TypeVar

from mad_eval.errors import UserError
from mad_eval.grading.reasoning import split_reply
from mad_eval.records import Messages, Question
from mad_eval.sanitize import redact
from mad_eval.words import counted

log = logging.getLogger("mad_eval")
T = TypeVar("T")
Render = Callable[[Messages, Mapping[str, Any]], str]
Warn = Callable[[str], None]


def _unheard(why: str) -> None:
    pass


class BackendError(UserError):
    """A backend cannot serve at all (bad spec, no server): reported before the run starts."""


class RequestError(Exception):
    """The server answered this request with a refusal or an unusable answer that asking
    again would not change: the turn fails, with this message as its error."""


# How a request failed that is asked again, in words that follow a count on the progress line
# ("3 timed out, 1 rate limited, asked again").
TIMED_OUT = "timed out"
RATE_LIMITED = "rate limited"
SERVER_ERROR = "failed on the server"
DISCONNECTED = "disconnected"
GARBLED = "answered garbled"


class TransientError(Exception):
    """A request failed in a way that may pass: rate limit, server error, timeout, dropped
    connection. `retry_after` is the wait the server asked for, in seconds, if it did; `why`
    says how it failed, in words that follow a count (TIMED_OUT, RATE_LIMITED, ...)."""

    def __init__(self, message: str, retry_after: float | None = None, why: str = SERVER_ERROR):
        super().__init__(message)
        self.retry_after = retry_after
        self.why = why


@dataclass(frozen=True)
class Sampling:
    temperature: float
    top_p: float
    max_tokens: int
    seed: int


@dataclass(frozen=True)
class Request:
    messages: Messages
    sampling: Sampling
    # Real backends ignore the question; the simulated agents need its gold answer.
    question: Question
    # What this agent's previous turn left behind (see Turn.state); None in round 0.
    state: dict[str, Any] | None = None
    # The texts of the turns the prompt quotes (the agents' previous responses; for a judge,
    # the responses the judged agent read), as data: the simulated agents and judge read
    # them here, so no backend ever parses prompt text, whatever the template.
    quoted: tuple[str, ...] = ()
    # Fields merged into the request as the server takes them (top_k, chat_template_kwargs,
    # stop, ...): --extra-body and a roster group's extra_body.
    extra_body: Mapping[str, Any] = field(default_factory=dict)
    # What the prompt asks the reply to state besides its answer (voting.statements): the
    # simulated agents write it from their beliefs; a model reads the prompt's sentence.
    asks: tuple[str, ...] = ()


@dataclass
class Generation:
    text: str | None  # the final content (reasoning.split_reply)
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    latency: float = 0.0
    error: str | None = None
    state: dict[str, Any] | None = None
    endpoint: str | None = None  # the replica that answered (credentials hidden)
    served_model: str | None = None  # the model the server says answered, when it says
    attempts: int = 1  # requests sent for this answer: 1 plus retries (0 if it was cached)
    cached: bool = False
    reasoning: str | None = None
    reasoning_tokens: int | None = None
    truncated: bool = False  # stopped at the token limit inside its reasoning
    refusal: str | None = None  # the model declined to answer, in these words
    usage_invalid: bool = False  # the server's token counts were no counts: recorded unknown
    # The content as received, where splitting the reasoning off changed it (None: `text` is
    # the content as received): what --quote verbatim quotes.
    reply: str | None = None


def answered(
    content: str | None,
    reasoning: str | None = None,
    *,
    finish_reason: str | None,
    opened: bool = False,
    **counts: Any,
) -> Generation:
    """A model's answer as every backend records it: the final content apart from the
    reasoning (the server's own field, or <think> blocks; `opened`: the prompt ended inside
    one), and whether it was cut off while reasoning (reasoning.split_reply)."""
    split = split_reply(content, reasoning, finish_reason, opened)
    return Generation(
        text=split.text,
        reasoning=split.reasoning,
        reply=content if content is not None and content != split.text else None,
        truncated=split.truncated,
        finish_reason=finish_reason,
        **counts,
    )


class Backend(ABC):
    """Turns a chat request into a generation. Raise TransientError for failures worth
    retrying, RequestError for the server's refusals; anything else stops the run."""

    spec: str
    # The context length the server reports (vLLM's /v1/models does), known after check().
    max_model_len: int | None = None

    @abstractmethod
    async def generate(self, request: Request) -> Generation: ...

    async def check(self) -> None:
        """Raise BackendError if this backend cannot serve; called once before a run."""

    async def probe(self, request: Request) -> None:
        """Send `request` once, straight to the model (no retry, no cache), to learn whether
        it is refused: RequestError if so, TransientError if that cannot be told now."""
        await self.generate(request)

    async def aclose(self) -> None:
        """Release connections."""


@dataclass(frozen=True)
class Where:
    """Where a backend is built: what the run says about how it is reached and fed."""

    base_url: str | None = None
    timeout: float = 600.0
    api: str = "chat"
    # Messages and the chat template's switches (chat_template_kwargs) -> prompt text.
    render: Render | None = None
    engine: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class BackendType:
    """What a type of backend (the part of a model spec before its colon) can do: the rest of
    the harness asks this, never the spec's spelling. A new backend is one module that
    declares `TYPE = BackendType(...)`, and its entry in backends.BACKENDS (or another
    package's `mad_eval.backends` entry point)."""

    name: str
    usage: str  # its spec's form and what it is, for the unknown-spec error
    build: Callable[[str, str, Where], Backend]  # (the spec, the part after the colon, where)
    text_apis: frozenset[str] = frozenset()  # --api values under which it is sent our text
    context_length: bool = False  # a model with a context window, that it may report
    extra_body: bool = False  # takes request fields beyond the sampling (--extra-body)
    tokenizer: bool = False  # a real model: prompts are counted with its tokenizer if found
    needs_name: bool = False  # the spec must name a model after the colon
    requires: str | None = None  # a package it imports, checked before anything loads
    install_hint: str = ""
    identity: tuple[str, ...] = ()  # run settings that change its answers (the cache key)

    def renders_text(self, api: str) -> bool:
        """Whether it is sent prompt text we render (so the manifest records the template)."""
        return api in self.text_apis


def served_name(checkpoint: str) -> str:
    """The name a server started for `checkpoint` answers to: its last path part
    (/ckpts/qwen-sdrl/ -> qwen-sdrl, Qwen/Qwen3-8B -> Qwen3-8B)."""
    return PurePosixPath(checkpoint.rstrip("/")).name or checkpoint


@dataclass(frozen=True)
class RetryPolicy:
    """Bounded retries with exponential backoff and jitter; a server's Retry-After wins, up
    to the backoff's own longest wait (`cap`)."""

    retries: int = 5
    base: float = 1.0  # seconds before the first retry, doubled each time
    cap: float = 60.0
    rng: Callable[[], float] = field(default=random.random, compare=False)

    def wait(self, retry: int, retry_after: float | None) -> float:
        """Seconds to wait before retry number `retry` (0-based)."""
        if retry_after is not None and retry_after >= 0:  # NaN is not a wait
            return min(retry_after, self.cap)
        ceiling = min(self.cap, self.base * 2**retry)
        # Half fixed, half random: clients that failed together do not return together.
        return ceiling / 2 * (1 + self.rng())


@dataclass(eq=False)
class Replica:
    """One endpoint serving the model, with its own limit on requests in flight (shared with
    the other models that endpoint serves)."""

    backend: Backend
    slots: asyncio.Semaphore
    endpoint: str | None  # as recorded (credentials hidden)
    outstanding: int = 0  # requests picked for it and not yet answered, queued ones included
    failures: int = 0  # transient failures in a row
    resting_until: float = 0.0  # after a transient failure, other replicas go first until then


def _stable_hash(text: str) -> int:
    """The same number for the same text in every process (Python's hash() is salted), spread
    evenly even over names that differ in one character (which CRC32's low bits are not)."""
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")


class Guarded(Backend):
    """One model behind one or more replicas. Each request goes to its question's replica
    (a stable hash of the question id: the prompts of one debate share most of their text,
    which that server's prefix cache then holds), unless that replica has more than
    `margin` outstanding requests above the least busy one, or is resting after a failure;
    then to the replica with the fewest outstanding requests (`margin` None: always so).
    It waits for a slot there and is bounded in time; transient failures are retried (on
    another replica first) with backoff. Whatever still fails becomes a failed Generation,
    so one bad request never stops a run and never becomes a graded answer."""

    def __init__(
        self,
        replicas: list[Replica],
        timeout: float | None = None,
        retry: RetryPolicy | None = None,
        margin: int | None = None,
        warn: Warn = log.warning,
        retried: Warn | None = None,
    ):
        if not replicas:
            raise ValueError("a guarded backend needs at least one replica")
        self.replicas = replicas
        self.spec = replicas[0].backend.spec
        self.timeout = timeout
        self.retry = retry or RetryPolicy()
        self.margin = margin
        self.warn = warn  # what a run should hear of while it goes on (a listener's warning)
        # Told how each request asked again failed (a listener's retried).
        self.retried = retried or _unheard
        self._turn = 0  # rotates which replica wins a tie
        self._capped: set[int] = set()  # replicas already warned of a Retry-After cut short
        self._said: set[str] = set()  # the ways of failing already warned of, once each
        self._slowest = 0.0  # seconds the slowest answer so far took
        self._in_flight = 0  # requests sent and not yet answered, on every replica

    async def generate(self, request: Request) -> Generation:
        start = time.perf_counter()
        failed_on: set[int] = set()  # replicas this request failed on: try the others first
        for attempt in range(1, self.retry.retries + 2):
            replica = self._pick(failed_on, request.question.id)
            replica.outstanding += 1
            try:
                async with replica.slots, asyncio.timeout(self.timeout):
                    self._in_flight += 1
                    try:
                        generation = await replica.backend.generate(request)
                    finally:
                        self._in_flight -= 1
            except (TransientError, TimeoutError) as exc:
                _unless_cancelled()
                if isinstance(exc, TransientError):
                    error = str(exc)  # says what failed, e.g. "RateLimitError: HTTP 429: ..."
                    why = exc.why
                else:
                    error = f"TimeoutError: no answer within {self.timeout:g} s"
                    why = TIMED_OUT
                if attempt <= self.retry.retries:
                    self._heard(why, error, replica)
                retry_after = getattr(exc, "retry_after", None)
                self._check_retry_after(replica, retry_after)
                wait = self.retry.wait(attempt - 1, retry_after)
                # A replica failing again and again rests longer and longer.
                replica.failures += 1
                rest = self.retry.wait(replica.failures - 1, retry_after)
                replica.resting_until = time.monotonic() + rest
                failed_on.add(id(replica))
            except RequestError as exc:  # the server's own answer: recorded in the turn
                _unless_cancelled()
                return _failed(str(exc), start, attempt)
            else:
                replica.failures = 0
                generation.endpoint = replica.endpoint
                generation.attempts = attempt
                if generation.latency == 0.0:
                    generation.latency = time.perf_counter() - start
                self._slowest = max(self._slowest, generation.latency)
                return generation
            finally:
                replica.outstanding -= 1
            if attempt <= self.retry.retries:
                await pause(wait)
        tries = self.retry.retries + 1
        return _failed(f"{error} (gave up after {tries} attempts)", start, tries)

    def _heard(self, why: str, error: str, replica: Replica) -> None:
        """A request about to be asked again: counted as it happens, and the first of each
        way of failing warned of in a sentence (the first timeout with what to change)."""
        self.retried(why)
        if why in self._said:
            return
        self._said.add(why)
        where = f" at {replica.endpoint}" if replica.endpoint else ""
        if why != TIMED_OUT or self.timeout is None:
            self.warn(
                f"a request to {self.spec}{where} failed ({redact(error)}) and is asked again, up "
                f"to {counted(self.retry.retries, 'time')}; the progress line counts such "
                f"requests as '{why}'."
            )
            return
        # Counted before this request's own slot is given back: it was one of them.
        sent = self._in_flight + 1
        took = f"{self._slowest:.0f}" if self._slowest >= 10 else f"{self._slowest:.1f}"
        slowest = f"the slowest answer so far took {took} s; " if self._slowest else ""
        self.warn(
            f"a request to {self.spec}{where} got no answer within {self.timeout:g} s (--timeout) "
            f"with {counted(sent, 'request')} in flight, and is asked again from the start, "
            f"redoing its whole generation; {slowest}a server this slow finishes sooner asked "
            f"fewer at a time (--concurrency {max(1, sent // 4)}) or given longer "
            f"(--timeout {2 * self.timeout:g})."
        )

    def _check_retry_after(self, replica: Replica, retry_after: float | None) -> None:
        """Warn, once per replica, of a Retry-After longer than the backoff's longest wait
        (a far date, 1e309) or no wait at all (NaN, negative): the wait is cut to the
        backoff's, never honoured for as long as a server says."""
        if retry_after is None or id(replica) in self._capped:
            return
        if 0 <= retry_after <= self.retry.cap:
            return
        self._capped.add(id(replica))
        where = f"the server at {replica.endpoint}" if replica.endpoint else "the server"
        instead = (
            f"waiting {self.retry.cap:g} s at most, the backoff's longest wait"
            if retry_after > self.retry.cap
            else "waiting as the backoff would"
        )
        self.warn(
            f"{where} asked to wait {retry_after:g} s before asking again (Retry-After); {instead}."
        )

    def _pick(self, failed_on: set[int], question: str) -> Replica:
        """The question's own replica while it is usable and not busier than the least busy
        by more than the margin; else the replica with the fewest outstanding requests
        among those not resting after a failure, preferring ones this request has not
        failed on; ties take turns."""
        if len(self.replicas) == 1:
            return self.replicas[0]
        now, n = time.monotonic(), len(self.replicas)
        if self.margin is not None and not failed_on:
            home = self.replicas[_stable_hash(question) % n]
            if home.resting_until <= now:
                least = min(r.outstanding for r in self.replicas if r.resting_until <= now)
                if home.outstanding <= least + self.margin:
                    return home
        self._turn += 1
        order = range(self._turn, self._turn + n)
        return min(
            (self.replicas[i % n] for i in order),
            key=lambda r: (id(r) in failed_on, r.resting_until > now, r.outstanding),
        )

    async def probe(self, request: Request) -> None:
        for replica in self.replicas:  # each endpoint may run another server
            async with replica.slots, asyncio.timeout(self.timeout):
                await replica.backend.probe(request)

    async def check(self) -> None:
        for replica in self.replicas:
            await replica.backend.check()
        lengths = {
            r.backend.max_model_len for r in self.replicas if r.backend.max_model_len is not None
        }
        # Replicas of one model should agree; if not, the smallest context is the safe one.
        self.max_model_len = min(lengths) if lengths else None

    async def aclose(self) -> None:
        for replica in self.replicas:
            await replica.backend.aclose()


async def pause(seconds: float) -> None:
    """The wait between a request's attempts (a name of its own, so a test can see the waits
    asked for without waiting them)."""
    await asyncio.sleep(seconds)


def _unless_cancelled() -> None:
    """Re-raise a cancellation that arrived while a request failed: libraries may turn it
    into an error of their own, and a stopping run must not retry or record the request."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError


def _failed(error: str, start: float, attempts: int) -> Generation:
    return Generation(
        text=None, error=redact(error), latency=time.perf_counter() - start, attempts=attempts
    )


# Concurrent requests, awaited so that one failure stops the rest (the engine, the judge).
async def every(work: Iterable[Coroutine[Any, Any, T]]) -> list[T]:
    """Await all of `work` concurrently, results in order. Unlike gather, the first failure
    cancels the rest and waits for them, so nothing runs on after its caller has stopped;
    the failure itself is raised, not wrapped in an ExceptionGroup."""
    try:
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(coroutine) for coroutine in work]
    except BaseExceptionGroup as failures:
        raise _first(failures) from None
    return [task.result() for task in tasks]


def _first(group: BaseExceptionGroup) -> BaseException:
    inner = group.exceptions[0]
    return _first(inner) if isinstance(inner, BaseExceptionGroup) else inner
