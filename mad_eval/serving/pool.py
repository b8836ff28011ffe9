"""Packing the models mad-eval serves over a pool of GPUs on one node: which GPUs the pool
holds, the order servers start in (long work first, so the last server does not run alone),
and running them side by side while GPUs are free, never more than the pool holds."""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import re
import subprocess
from collections import Counter
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mad_eval.children import program
from mad_eval.errors import UserError
from mad_eval.words import counted

log = logging.getLogger("mad_eval")

_SPAN = re.compile(r"(\d{1,4})(?:-(\d{1,4}))?")  # one index or a range: 3, 0-3
_SMI_GPU = re.compile(r"GPU (\d{1,4}):")  # a line of `nvidia-smi -L`; its MIG lines are skipped
_EVERY_ORDER = 7  # up to this many models, plan tries every order
_SEARCH_STEPS = 4000  # orders tried by plan's local search beyond that


class PoolError(UserError):
    """The GPU pool or a model's place in it cannot work."""


class PoolFailed(PoolError):
    """Some models' serve() failed; the others were served. `failures`: label -> error."""

    def __init__(self, failures: Mapping[str, BaseException]):
        self.failures = dict(failures)
        parts = "; ".join(f"'{label}': {_said(error)}" for label, error in self.failures.items())
        count = len(self.failures)
        super().__init__(f"{count} model{'s' * (count > 1)} could not be served ({parts})")


def _said(error: BaseException) -> str:
    if isinstance(error, asyncio.CancelledError):
        return "its serving was cancelled"
    text = str(error).rstrip(".") or "no message"
    return text if isinstance(error, UserError) else f"{type(error).__name__}: {text}"


@dataclass(frozen=True)
class Work:
    """One model to serve: `replicas` servers of `gpus` GPUs each, all at once, and its
    unfinished turns (its work, spread over its replicas)."""

    label: str
    gpus: int
    replicas: int
    turns: int

    def __post_init__(self) -> None:
        if self.gpus < 1 or self.replicas < 1 or self.turns < 0:
            raise PoolError(
                f"model '{self.label}' asks for {self.replicas} replicas of {self.gpus} GPUs"
                f" with {self.turns} turns: replicas and GPUs must be at least 1, turns at least 0."
            )

    @property
    def width(self) -> int:
        """GPUs it holds while served."""
        return self.gpus * self.replicas

    @property
    def duration(self) -> float:
        """Its expected time in turn units: the turns are shared by its replicas."""
        return self.turns / self.replicas


@dataclass(frozen=True)
class Slot:
    """Where and when a simulated schedule serves one model."""

    work: Work
    gpus: tuple[int, ...]
    start: float
    end: float


# --- the pool --------------------------------------------------------------------------


def gpu_pool(
    arg: str | Sequence[int] | None,
    env: Mapping[str, str] = os.environ,
    note: Callable[[str], None] | None = None,
) -> list[int]:
    """The GPUs to pack servers on: `--gpus` (0,1,2,3 or 0-3), else CUDA_VISIBLE_DEVICES,
    else what `nvidia-smi -L` lists, else none: [] is one CPU slot (servers one at a time,
    with no CUDA_VISIBLE_DEVICES set; `slots` gives the scheduler its one slot)."""
    if arg is not None:
        return _parse(arg if isinstance(arg, str) else ",".join(map(str, arg)), "--gpus")
    visible = env.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip() not in ("", "-1"):
        return _parse(visible, "CUDA_VISIBLE_DEVICES")
    found = [] if visible is not None else _driver_gpus(env)
    if found:
        return found
    why = "CUDA_VISIBLE_DEVICES hides every GPU" if visible is not None else "no GPU was found"
    (note or log.info)(
        f"{why} (no --gpus given): the pool is one CPU slot, so servers run one at a time"
    )
    return []


def slots(pool: Sequence[int]) -> list[int]:
    """The pool as the scheduler counts it: no GPU is one CPU slot."""
    return list(pool) or [0]


def _parse(text: str, where: str) -> list[int]:
    ids: list[int] = []
    for part in text.split(","):
        match = _SPAN.fullmatch(part.strip())
        if match is None or (match[2] is not None and int(match[2]) < int(match[1])):
            raise PoolError(
                f"{where} {text!r} is not a list of GPU indices: give indices and rising ranges"
                " such as 0,1,2,3 or 0-3 or 0-1,4."
            )
        first, last = int(match[1]), int(match[2] or match[1])
        ids += range(first, last + 1)
    repeated = [gpu for gpu, count in Counter(ids).items() if count > 1]
    if repeated:
        raise PoolError(f"{where} {text!r} names GPU {repeated[0]} twice: name each GPU once.")
    return ids


def _driver_gpus(env: Mapping[str, str]) -> list[int]:
    """The GPU indices `nvidia-smi -L` lists; none when it is missing or fails."""
    smi = program("nvidia-smi", env.get("PATH"))
    if smi is None:
        return []
    try:
        listing = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return []
    return parse_smi(listing.stdout) if listing.returncode == 0 else []


def parse_smi(listing: str) -> list[int]:
    """GPU indices from `nvidia-smi -L` ("GPU 0: NVIDIA H100 (UUID: ...)" lines)."""
    found = (_SMI_GPU.match(line) for line in listing.splitlines())
    return [int(match[1]) for match in found if match]


def refusal(work: Work, pool: Sequence[int]) -> PoolError | None:
    """Why `work` can never be served on `pool`, or None when it fits."""
    if work.width <= len(pool):
        return None
    return PoolError(
        f"model '{work.label}' needs {work.width} GPUs at once ({work.replicas} replicas x"
        f" {work.gpus} GPUs) but the pool holds {len(pool)} (GPUs {_ids(pool)}): lower its"
        " replicas or parallel size, or give more GPUs with --gpus."
    )


# --- the order --------------------------------------------------------------------------


def plan(works: Sequence[Work], pool: Sequence[int]) -> list[Work]:
    """The order servers start in, the one whose simulated makespan is shortest: every order
    for a few models, else the best longest-first order improved by moves that shorten it.
    Models with no turns left go last (they are not served)."""
    _check(works, pool)
    for work in works:
        if (error := refusal(work, pool)) is not None:
            raise error
    todo = [work for work in works if work.turns > 0]
    idle = sorted((work for work in works if work.turns == 0), key=lambda work: work.label)
    starts = [
        sorted(todo, key=lambda w: (-w.duration, -w.width, w.label)),  # LPT
        sorted(todo, key=lambda w: (-w.duration * w.width, -w.duration, w.label)),  # area
        sorted(todo, key=lambda w: (-w.width, -w.duration, w.label)),  # widest first
    ]
    best = min(starts, key=lambda order: makespan(order, todo, pool))  # ties: LPT
    search = _every_order if len(todo) <= _EVERY_ORDER else _improve
    return search(best, pool) + idle


def _every_order(first: list[Work], pool: Sequence[int]) -> list[Work]:
    """The shortest of all orders (models alike in GPUs and duration tried once)."""
    best, cost, seen = first, makespan(first, first, pool), set()
    for order in itertools.permutations(first):
        shape = tuple((work.width, work.duration) for work in order)
        if shape in seen:
            continue
        seen.add(shape)
        if (new := makespan(order, order, pool)) < cost:
            best, cost = list(order), new
    return best


def _improve(order: list[Work], pool: Sequence[int]) -> list[Work]:
    """Move one model to another place while that shortens the simulated makespan (a
    bounded number of tries)."""
    cost, steps, better = makespan(order, order, pool), 0, True
    while better and steps < _SEARCH_STEPS:
        better = False
        for i, j in itertools.permutations(range(len(order)), 2):
            steps += 1
            trial = order.copy()
            trial.insert(j, trial.pop(i))
            if (new := makespan(trial, trial, pool)) < cost:
                order, cost, better = trial, new, True
    return order


def _check(works: Sequence[Work], pool: Sequence[int]) -> None:
    if not pool:
        raise PoolError("the GPU pool is empty: give at least one GPU with --gpus.")
    if len(set(pool)) != len(pool):
        raise PoolError(f"the GPU pool {_ids(pool)} names a GPU twice: name each GPU once.")
    twice = sorted(label for label, count in Counter(w.label for w in works).items() if count > 1)
    if twice:
        raise PoolError(f"model '{twice[0]}' is given twice: give each model one label.")


def simulate(order: Sequence[Work | str], works: Sequence[Work], pool: Sequence[int]) -> list[Slot]:
    """List scheduling in `order` (labels or works), each model taking turns / replicas time
    units: at time 0 and whenever servers finish, every waiting model that fits starts."""
    by_label = {work.label: work for work in works}
    queue = [by_label[item] if isinstance(item, str) else item for item in order]
    queue = [work for work in queue if work.turns > 0]
    place = {work.label: index for index, work in enumerate(queue)}
    free, now = list(pool), 0.0
    slots: list[Slot] = []
    running: list[Slot] = []
    while queue or running:
        for work in list(queue):
            if work.width <= len(free):
                queue.remove(work)
                gpus = take(free, work, pool)
                running.append(Slot(work, tuple(gpus), now, now + work.duration))
        if not running:  # the whole pool is free and the head still does not fit
            raise refusal(queue[0], pool) or PoolError("unreachable")
        now = min(slot.end for slot in running)
        for slot in [slot for slot in running if slot.end == now]:
            running.remove(slot)
            slots.append(slot)
            give_back(free, slot.gpus, pool)
    return sorted(slots, key=lambda slot: (slot.start, place[slot.work.label]))


def makespan(order: Sequence[Work | str], works: Sequence[Work], pool: Sequence[int]) -> float:
    """When the last model finishes if list scheduling serves them in `order`."""
    return max((slot.end for slot in simulate(order, works, pool)), default=0.0)


def describe(order: Sequence[Work], pool: Sequence[int]) -> list[str]:
    """The dry run's lines: which model on which GPUs, in which order, its turns, and its
    simulated start and end in turn units."""
    slots = simulate(order, order, pool)
    width = max((len(work.label) for work in order), default=0)
    digits = max((len(str(work.turns)) for work in order), default=0)
    lines = [
        f"serving plan on GPUs {_ids(pool)}: "
        f"{counted(sum(w.turns > 0 for w in order), 'server')} to start,"
        f" estimated end at {max((s.end for s in slots), default=0):g} turn units"
    ]
    for number, slot in enumerate(slots, 1):
        work = slot.work
        shape = (
            f"{work.replicas} replica{'s' * (work.replicas > 1)} x {work.gpus}"
            f" GPU{'s' * (work.gpus > 1)}"
        )
        lines.append(
            f"  {number}. {work.label:<{width}}  GPUs {_ids(slot.gpus):<8}  {shape:<19}"
            f"  {work.turns:>{digits}} turns  t={slot.start:g}..{slot.end:g}"
        )
    lines += [f"  -  {w.label:<{width}}  no turns left: not served" for w in order if not w.turns]
    return lines


def _ids(gpus: Sequence[int]) -> str:
    return ",".join(map(str, gpus))


# --- GPUs taken and given back ----------------------------------------------------------


def take(free: list[int], work: Work, pool: Sequence[int]) -> list[int]:
    """`work.width` GPUs out of `free` (kept in pool order), each replica's block of
    `work.gpus` on consecutive GPU ids where a free run holds it (the shortest such run)."""
    taken: list[int] = []
    for _ in range(work.replicas):
        runs = _runs(free)
        fitting = [run for run in runs if len(run) >= work.gpus]
        block = _aligned(min(fitting, key=len), work.gpus) if fitting else free[: work.gpus]
        taken += block
        for gpu in block:
            free.remove(gpu)
    return taken


def _aligned(run: list[int], size: int) -> list[int]:
    """`size` GPUs of `run`, starting at an id that is a multiple of `size` where one can
    (tensor-parallel pairs on 0,1 and 2,3 rather than 1,2)."""
    starts = [i for i in range(len(run) - size + 1) if run[i] % size == 0] or [0]
    return run[starts[0] : starts[0] + size]


def _runs(free: list[int]) -> list[list[int]]:
    """`free` cut into runs of consecutive ids, in pool order."""
    runs: list[list[int]] = []
    for gpu in free:
        if runs and runs[-1][-1] + 1 == gpu:
            runs[-1].append(gpu)
        else:
            runs.append([gpu])
    return runs


def give_back(free: list[int], gpus: Sequence[int], pool: Sequence[int]) -> None:
    """Return `gpus` to `free`, which stays in pool order."""
    place = {gpu: index for index, gpu in enumerate(pool)}
    free += gpus
    free.sort(key=place.__getitem__)


# --- running ----------------------------------------------------------------------------

Serve = Callable[[Work, list[int]], Coroutine[Any, Any, None]]
Progress = Callable[[str, Work, Sequence[int]], None]  # event, model, its GPUs


async def run_pool(
    works: Sequence[Work], pool: Sequence[int], serve: Serve, *, progress: Progress | None = None
) -> None:
    """Serve every model with turns left, `serve(work, gpus)` started in plan order whenever
    its GPUs are free (a later model may pass one that does not fit yet). A failed serve
    frees its GPUs and the rest go on; PoolFailed names the failures at the end.
    Cancelling this cancels every running serve() and waits for each to stop.

    Progress events: "starting", "finished", "failed" (with the model's GPUs), and
    "skipped" (no turns left, no GPUs)."""
    order = plan(works, pool)
    tell = progress or (lambda event, work, gpus: None)
    for work in order:
        if work.turns == 0:
            tell("skipped", work, [])
    queue = [work for work in order if work.turns > 0]
    free = list(pool)
    running: dict[asyncio.Task[None], tuple[Work, list[int]]] = {}
    failures: dict[str, BaseException] = {}
    try:
        while queue or running:
            for work in list(queue):
                if work.width <= len(free):
                    queue.remove(work)
                    gpus = take(free, work, pool)
                    tell("starting", work, gpus)
                    task = asyncio.create_task(serve(work, list(gpus)), name=f"serve {work.label}")
                    running[task] = (work, gpus)
            done, _ = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
            for task in sorted(done, key=lambda task: running[task][0].label):
                work, gpus = running.pop(task)
                give_back(free, gpus, pool)
                error = asyncio.CancelledError() if task.cancelled() else task.exception()
                if error is not None and not isinstance(error, Exception | asyncio.CancelledError):
                    raise error  # KeyboardInterrupt, SystemExit: stop everything below
                if error is not None:
                    failures[work.label] = error
                tell("failed" if error is not None else "finished", work, gpus)
    finally:
        await _stop(running)
    if failures:
        raise PoolFailed(failures)


async def _stop(running: Mapping[asyncio.Task, object]) -> None:
    """Cancel the running serve() calls and wait until each has stopped, even when this is
    cancelled again meanwhile: a second Ctrl-C must not cut short a server's own stop."""
    pending = set(running)
    for task in pending:
        task.cancel()
    interrupted = None
    while pending:
        try:
            _, pending = await asyncio.wait(pending)
        except asyncio.CancelledError as again:
            interrupted = again
    if interrupted is not None:
        raise interrupted
