"""The one async interface every backend implements, and the guard wrapped around it once."""

from __future__ import annotations

import asyncio
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

from mad_eval.prompts import Messages
from mad_eval.records import Question


class BackendError(Exception):
    """A backend cannot serve at all (bad spec, no server): reported before the run starts."""


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


@dataclass
class Generation:
    text: str | None
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    latency: float = 0.0
    error: str | None = None
    state: dict[str, Any] | None = None


class Backend(ABC):
    """Turns a chat request into a generation. Raising is fine: the guard records the error."""

    spec: str
    # The context length the server reports (vLLM's /v1/models does), known after check().
    max_model_len: int | None = None

    @abstractmethod
    async def generate(self, request: Request) -> Generation: ...

    async def check(self) -> None:
        """Raise BackendError if this backend cannot serve; called once before a run."""

    async def aclose(self) -> None:
        """Release connections."""


class Guarded(Backend):
    """Bounds concurrency and time per request and turns any failure into a failed Generation,
    so one bad request never stops a run and never becomes a graded answer."""

    def __init__(
        self, inner: Backend, slots: int | asyncio.Semaphore, timeout: float | None = None
    ):
        """`slots`: requests in flight at once, or a semaphore shared with the other models
        served by the same endpoint."""
        self.inner = inner
        self.spec = inner.spec
        self.timeout = timeout
        self._slots = asyncio.Semaphore(slots) if isinstance(slots, int) else slots

    async def generate(self, request: Request) -> Generation:
        async with self._slots:
            start = time.perf_counter()
            try:
                generation = await asyncio.wait_for(self.inner.generate(request), self.timeout)
            except Exception as exc:  # recorded in the turn, counted in metrics
                message = str(exc) or type(exc).__name__
                return Generation(
                    text=None,
                    error=f"{type(exc).__name__}: {message}",
                    latency=time.perf_counter() - start,
                )
            if generation.latency == 0.0:
                generation.latency = time.perf_counter() - start
            return generation

    async def check(self) -> None:
        await self.inner.check()
        self.max_model_len = self.inner.max_model_len

    async def aclose(self) -> None:
        await self.inner.aclose()
