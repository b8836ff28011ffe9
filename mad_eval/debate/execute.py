"""Planned runs carried out on one event loop: every endpoint checked first, every run folder
opened (resumed where it holds records), then every debate of every run scheduled through
one window, so a server never idles between runs. A single `mad-eval run` is one job; an
experiment is many."""

from __future__ import annotations

import asyncio
import concurrent.futures
import signal
import threading
from _thread import interrupt_main
from collections.abc import Coroutine, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from mad_eval.backends.cache import RequestCache
from mad_eval.data.benchmarks import local_file
from mad_eval.debate.engine import Engine, run_all, to_ask_again, window
from mad_eval.debate.plan import Plan, Shared
from mad_eval.errors import STOPS, Interrupted, UserError, handling
from mad_eval.progress import Listener
from mad_eval.records import Question
from mad_eval.serving.session import Serving
from mad_eval.serving.spec import runs_remote_code
from mad_eval.store.folder import Recorded, RunStore
from mad_eval.words import counted

T = TypeVar("T")


@dataclass(frozen=True)
class Preview:
    """What a run would do, asking nothing and writing nothing (`mad-eval run --dry-run`):
    its folder and turns, where its questions come from and go, and the servers it starts."""

    folder: Path
    questions: int
    turns: int  # the finished run's
    recorded: int  # in its folder already
    endpoints: dict[str, list[str]]  # each URL its questions go to (credentials hidden) -> models
    data_file: Path | None  # the file on this machine its questions are read from, if one
    servers: list[str] = field(default_factory=list)  # each `vllm serve` command, secrets hidden
    remote_code: bool = False  # its server runs the checkpoint's own Python code


def preview(job: Job, served: Serving | None, data_dir: str | Path | None) -> Preview:
    """A planned run's Preview; a served model's questions go to the servers it starts."""
    endpoints = {} if served is not None else job.plan.endpoints()
    return Preview(
        job.store.root,
        len(job.plan.questions),
        job.requests,
        job.held(),
        endpoints,
        local_file(job.plan.spec, data_dir),
        served.commands() if served is not None else [],
        served is not None and runs_remote_code(served.spec.args),
    )


@dataclass
class Job:
    """One run folder to fill: its plan, its store, and whether to ask its failures again."""

    plan: Plan
    store: RunStore
    retry_failed: bool = False
    where: str = ""  # how an error names this job among others (an experiment's cell)

    @property
    def requests(self) -> int:
        """Turns the finished run holds: runs x questions x agents x (rounds + 1)."""
        config = self.plan.config
        return config.runs * len(self.plan.questions) * config.agents * (config.rounds + 1)

    def held(self) -> int:
        """Turns its folder holds now, read only (a run writing there may be mid-line)."""
        return len(self.store.index())

    def failed(self) -> int:
        """Failed turns its folder holds now (each record read: asked for with
        --retry-failed only)."""
        recorded = self.store.index()
        return sum(recorded[key].failed for key in recorded)

    def check(self) -> None:
        """Refuse a folder that holds a run of other settings, before any server starts (the
        team's seats need the servers; a resume compares no seat)."""
        with blamed(self):
            self.store.check(self.plan.config, self.plan.manifest_extra([]))

    def describe(self, resumed: int) -> str:
        config, plan = self.plan.config, self.plan
        team = ", ".join(sorted({a.group for a in plan.team}))
        if plan.single:
            what = f"{counted(config.agents, 'independent sample')} ({team}), no debate"
        else:
            what = (
                f"{counted(config.agents, 'agent')} ({team}), {counted(config.rounds, 'round')}, "
                f"{plan.choice.cls} protocol, {config.prompt_style} prompts"
            )
        return (
            f"{plan.spec.name}: {counted(len(plan.questions), 'question')} x "
            f"{counted(config.runs, 'run')}, "
            f"{what} -> {self.store.root}"
            + (f" (resuming: {counted(resumed, 'turn')} already recorded)" if resumed else "")
        )


async def execute(jobs: list[Job], listener: Listener, close: bool = True) -> None:
    """Run every job to its end; the jobs' plans share one Shared (backends, limits, cache).
    Every endpoint is asked whether it serves, and every run folder whether it holds
    another run, before the first request; a folder is then opened (locked, resumed) only
    when its debates are reached and closed after its last, so an experiment of a
    thousand runs holds a few open. A user error or a stop ends all of them, each run
    folder keeping what it finished."""
    shared = jobs[0].plan.shared
    shared.listener = listener
    opened: dict[int, Job] = {}  # by its engine's id
    try:
        seated = []
        for job in jobs:
            with blamed(job):
                seated.append(await job.plan.seats())
                job.store.check(job.plan.config, job.plan.manifest_extra(seated[-1]))
        for warning in dict.fromkeys(w for job in jobs for w in job.plan.warnings):
            listener.warn("warning", warning)
        sampling = all(job.plan.single for job in jobs)
        counts = [("sampling" if sampling else "debating", sum(j.requests for j in jobs), "turns")]
        if len(jobs) > 1:
            counts.append(("runs", len(jobs), "runs"))
        with listener.tracking(counts) as advances:

            def engines(group: list[int]) -> Iterator[tuple[Engine, list[Question]]]:
                for i in group:
                    job, seats = jobs[i], seated[i]
                    plan = job.plan
                    with blamed(job):
                        done = job.store.open(
                            plan.config, plan.manifest_extra(seats), questions=plan.questions
                        )
                    engine = Engine(
                        plan.config,
                        plan.choice.protocol,
                        seats,
                        done,
                        job.store.append,
                        templates=plan.templates,
                        stops=job.store.stops(),
                        on_stop=job.store.append_stop,
                    )
                    engine.on_progress = advances[0]
                    opened[id(engine)] = job
                    if job.retry_failed:
                        engine.done = ask_again(job, done, listener)
                    if len(jobs) == 1:
                        listener.say(job.describe(len(engine.done)))
                    yield engine, plan.questions

            def finished(engine: Engine) -> None:
                opened.pop(id(engine)).store.close()
                if len(advances) > 1:
                    advances[1](1)

            # The runs on one set of endpoints form a group; the groups take turns.
            groups: dict[frozenset[str], list[int]] = {}
            for i, seats in enumerate(seated):
                slots = frozenset(slot for seat in seats for slot in seat.agent.slots)
                groups.setdefault(slots, []).append(i)
            every_seat = [seat for seats in seated for seat in seats]
            limit = window(every_seat, max(job.plan.config.concurrency for job in jobs))
            await run_all([engines(group) for group in groups.values()], limit, finished)
    finally:
        for job in opened.values():
            job.store.close()
        if close:  # else the caller closes the Shared when its other executes are done
            await close_shared(shared, listener)


async def close_shared(shared: Shared, listener: Listener) -> None:
    """The backends' connections and the request cache, closed once no run needs them."""
    await shared.aclose()
    close_cache(shared.cache, listener)


@contextmanager
def blamed(job: Job) -> Iterator[None]:
    """A user error of one job among many names the job."""
    try:
        yield
    except UserError as exc:
        if not job.where:
            raise
        raise UserError(f"{job.where}: {exc}") from None


def close_cache(cache: RequestCache | None, listener: Listener) -> None:
    if cache is not None:
        listener.say(
            f"Request cache {cache.path}: {counted(cache.hits, 'answer')} reused, "
            f"{cache.stored} new {'one' if cache.stored == 1 else 'ones'} stored."
        )
        cache.close()


def ask_again(job: Job, done: Recorded, listener: Listener) -> Recorded:
    """--retry-failed: move the failed turns, and those built without them, out of the
    records, so the engine asks them again; return what stays done."""
    store, plan = job.store, job.plan
    again = to_ask_again(done, plan.choice.protocol, plan.config.agents)
    failed = sum(1 for key in again if done[key].failed)
    store.supersede(again)
    if again:
        later = len(again) - failed
        listener.say(
            f"Asking again {counted(failed, 'failed turn')} and {counted(later, 'later turn')} "
            "built without them; the old records are in "
            f"{store.superseded_path}."
        )
    else:
        listener.say("No failed turns to ask again.")
    return store.index(repair=True)  # the records left, where they now lie


def drive(work: Coroutine[Any, Any, T], records: object, what: str = "turn") -> T:
    """Run `work` to its end in an event loop of its own, from a script, a training loop or
    a notebook (whose loop is already running: then in a thread). Ctrl-C, and in the main
    thread SIGTERM and SIGHUP, cancel it and raise Interrupted, naming where the finished
    records (turns, verdicts: `what`) are kept."""
    try:
        return _drive(work)
    except Interrupted as exc:
        raise Interrupted(exc.signal, str(records), what) from None
    except KeyboardInterrupt:
        raise Interrupted(signal.SIGINT, str(records), what) from None


def _drive(work: Coroutine[Any, Any, T]) -> T:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:  # a notebook's loop: this call must not block it from inside
        with concurrent.futures.ThreadPoolExecutor(1) as thread:
            return thread.submit(asyncio.run, work).result()
    if threading.current_thread() is not threading.main_thread():
        return asyncio.run(work)
    return asyncio.run(_stoppable(work))


GRACE = 0.5  # seconds a stop waits for the event loop before it stops the step running


async def _stoppable(work: Coroutine[Any, Any, T]) -> T:
    """`work`, cancelled by a stop signal at its next await; a step that keeps the loop for
    a second more (a long render, a long read) is stopped where it runs."""
    from mad_eval.grading.verifier import stop_graders

    loop, task = asyncio.get_running_loop(), asyncio.current_task()
    assert task is not None
    stopped: list[signal.Signals] = []
    heard = threading.Event()
    timers: list[threading.Timer] = []

    def cancel() -> None:
        heard.set()
        task.cancel()

    def stop(number: int, frame: object) -> None:
        if stopped:  # a second signal, or the first unheard for GRACE: stop this step
            raise Interrupted(stopped[0])
        stopped.append(signal.Signals(number))
        loop.call_soon_threadsafe(cancel)

        def unheard() -> None:
            if not heard.is_set():
                interrupt_main(signal.Signals(number))

        timers.append(threading.Timer(GRACE, unheard))
        timers[-1].daemon = True
        timers[-1].start()

    try:
        with handling(stop, STOPS):
            return await work
    except asyncio.CancelledError:
        stop_graders()  # a grade in progress would hold up the exit for seconds
        if stopped:
            raise Interrupted(stopped[0]) from None  # its records are named by drive()
        raise
    except Interrupted:
        stop_graders()
        raise
    finally:
        for timer in timers:
            timer.cancel()
