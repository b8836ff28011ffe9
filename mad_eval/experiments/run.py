"""An experiment's cells carried out: planned together on one Shared (each endpoint's request
limit and the request cache shared by every cell), scheduled through one engine window so
no server idles between cells, each cell resumed from its own folder; or, for a dry run,
what each cell needs and already holds."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from mad_eval.backends.base import every
from mad_eval.backends.cache import RequestCache
from mad_eval.data.benchmarks import DataMissingError, load_questions, local_file
from mad_eval.debate.execute import Job, close_shared, execute
from mad_eval.debate.plan import Plan, Shared, make_plan
from mad_eval.errors import UserError
from mad_eval.experiments.cells import Cell, Experiment, ExperimentError
from mad_eval.progress import Listener
from mad_eval.sanitize import redact, remember
from mad_eval.serving.launch import LocalServer, Server
from mad_eval.serving.pool import Work, describe, gpu_pool, plan, run_pool, slots
from mad_eval.serving.session import PLACEHOLDER, Serving, require_vllm
from mad_eval.serving.spec import place, runs_remote_code, shown
from mad_eval.settings.config import run_defaults
from mad_eval.store.files import refuse_link, refuse_records, write_atomically, write_json
from mad_eval.store.folder import RunStore
from mad_eval.store.names import EXPERIMENT_FILE
from mad_eval.store.verdict_file import keep_verdicts_beside
from mad_eval.words import counted


@dataclass(frozen=True)
class CellState:
    cell: Cell
    folder: Path
    questions: int
    requests: int  # turns the finished cell holds
    done: int  # turns already recorded
    failed: int = 0  # of them, failed ones to ask again (counted with --retry-failed only)


def plan_cells(experiment: Experiment, cache: bool = True, retry_failed: bool = False) -> list[Job]:
    """Every cell planned, each problem named with its cell, before any request; the
    turns of all counted first, so an experiment over its limit is refused at once.
    `retry_failed`: each cell asks its failed turns again."""
    settings = experiment.cells[0].settings
    path = settings.get("cache")
    shared = Shared(RequestCache(path) if path and cache else None)
    if path and cache:
        keep_verdicts_beside(path)
    count_turns(experiment, shared)
    grids = experiment.memberships()
    jobs = []
    for cell in experiment.cells:
        where = f"{experiment.path}: cell {cell.name} ({', '.join(grids[cell.name])})"
        try:
            plan = planned(experiment, cell, shared)
        except UserError as exc:
            raise ExperimentError(f"{where}: {_in_file(exc)}") from None
        jobs.append(Job(plan, RunStore(experiment.folder(cell), named=True), retry_failed, where))
    return jobs


def _in_file(exc: UserError) -> UserError:
    """A missing benchmark file advised as an experiment gives its folder: the file's data_dir."""
    return exc.advised("experiment") if isinstance(exc, DataMissingError) else exc


def planned(
    experiment: Experiment, cell: Cell, shared: Shared, urls: list[str] | None = None
) -> Plan:
    """A cell's plan; a served model's on its servers' URLs (stand-ins before they start:
    every setting is checked before any server does), with the server it records."""
    model = cell.settings.get("model")
    spec = experiment.serving.get(model) if isinstance(model, str) else None
    if spec is None:
        return make_plan(cell.settings, shared)
    urls = urls or [PLACEHOLDER] * spec.replicas
    return make_plan({**cell.settings, "base_url": urls}, shared, spec.record())


def count_turns(experiment: Experiment, shared: Shared) -> dict[str, int]:
    """Each cell's turns, runs x questions x agents x (rounds + 1), from its settings and
    each benchmark's questions (read once, as planning reads them); more in all than the
    experiment's max_turns is refused."""
    runs = run_defaults()["runs"]
    grids = experiment.memberships()
    turns = {}
    for cell in experiment.cells:
        given = cell.settings
        benchmark, data_dir, limit = given["benchmark"], given.get("data_dir"), given.get("limit")
        try:
            _, questions = shared.once(
                ("questions", benchmark, str(data_dir), limit),
                functools.partial(load_questions, benchmark, data_dir, limit),
            )
        except UserError as exc:
            where = f"{experiment.path}: cell {cell.name} ({', '.join(grids[cell.name])})"
            raise ExperimentError(f"{where}: {_in_file(exc)}") from None
        turns[cell.name] = (
            given.get("runs", runs) * len(questions) * given["agents"] * (given["rounds"] + 1)
        )
    total = sum(turns.values())
    if total > experiment.max_turns:
        largest = max(turns, key=lambda name: turns[name])
        raise ExperimentError(
            f"{experiment.path}: its {len(turns):,} runs need {total:,} turns (runs x "
            f"questions x agents x (rounds + 1); {largest} alone {turns[largest]:,}), more "
            f"than [experiment] max_turns = {experiment.max_turns:,} allows; cut a grid, set "
            "limit = N in [settings] or raise max_turns."
        )
    return turns


@dataclass(frozen=True)
class Exposure:
    """What an experiment sends where and runs, as its dry run shows it: a file from someone
    else may name any file on this machine as a benchmark, its own server as an endpoint,
    and a checkpoint whose Python code the server runs."""

    # Each URL the questions are sent to (credentials hidden) -> the cells sending them.
    endpoints: dict[str, list[str]] = field(default_factory=dict)
    # Each benchmark file read from outside the experiment file's folder -> its cells.
    files: dict[Path, list[str]] = field(default_factory=dict)
    # Each serve: model -> the `vllm serve` command of its servers (secrets hidden).
    servers: dict[str, str] = field(default_factory=dict)
    # The serve: models whose servers run their checkpoint's own code (--trust-remote-code).
    remote_code: list[str] = field(default_factory=list)


def exposure(experiment: Experiment, jobs: list[Job]) -> Exposure:
    """Where each planned cell's questions come from and go (Exposure)."""
    home = experiment.path.parent.resolve()
    found = Exposure()
    for cell, job in zip(experiment.cells, jobs, strict=True):
        for url in job.plan.endpoints():
            if url != PLACEHOLDER:  # a served model's: its server's command says where
                found.endpoints.setdefault(url, []).append(cell.name)
        file = local_file(job.plan.spec, cell.settings.get("data_dir"))
        if file is not None and not file.resolve().is_relative_to(home):
            found.files.setdefault(file.resolve(), []).append(cell.name)
    for model, spec in experiment.serving.items():
        found.servers[model] = shown(spec.command("PORT"))
        if runs_remote_code(spec.args):
            found.remote_code.append(model)
    return found


@dataclass(frozen=True)
class ExperimentPlan:
    """An experiment and what each of its cells needs and holds (a dry run), the order its
    served models would take the GPUs in (`serving`: the plan's lines, if any), and where
    its questions come from and go (`exposure`)."""

    experiment: Experiment
    states: list[CellState]
    serving: list[str] = field(default_factory=list)
    exposure: Exposure = field(default_factory=Exposure)

    @property
    def needed(self) -> int:
        return sum(s.requests for s in self.states)

    @property
    def held(self) -> int:
        return sum(min(s.done, s.requests) for s in self.states)

    def __repr__(self) -> str:
        """One line, not every cell's settings."""
        return (
            f"ExperimentPlan(experiment={self.experiment.name!r}, runs={len(self.states)}, "
            f"turns={self.needed}, recorded={self.held}, out={str(self.experiment.out)!r})"
        )


def dry_run(experiment: Experiment) -> list[CellState]:
    """What each cell needs and holds, asking no server and writing nothing."""
    return dry_run_exposed(experiment)[0]


def dry_run_exposed(experiment: Experiment) -> tuple[list[CellState], Exposure]:
    """dry_run, and where the cells' questions come from and go."""
    jobs = plan_cells(experiment, cache=False)
    return dry_run_states(experiment, experiment.cells, jobs), exposure(experiment, jobs)


def dry_run_states(experiment: Experiment, cells: list[Cell], jobs: list[Job]) -> list[CellState]:
    """What these cells need and what their folders hold already."""
    states = []
    for cell, job in zip(cells, jobs, strict=True):
        failed = job.failed() if job.retry_failed else 0
        states.append(
            CellState(
                cell, job.store.root, len(job.plan.questions), job.requests, job.held(), failed
            )
        )
    return states


def works(experiment: Experiment, states: list[CellState]) -> list[Work]:
    """Each served model's work: the turns its cells still need (unrecorded, or failed
    ones to ask again)."""
    left: dict[str, int] = {}
    for state in states:
        model = state.cell.settings.get("model")
        if model in experiment.serving:
            todo = max(state.requests - state.done, state.failed, 0)
            left[model] = left.get(model, 0) + todo
    return [
        Work(spec.label, spec.gpus, spec.replicas, left.get(model, 0))
        for model, spec in experiment.serving.items()
    ]


def serving_plan(
    experiment: Experiment,
    states: list[CellState],
    gpus: str | Sequence[int] | None,
    ray: str | None = None,
) -> list[str]:
    """A dry run's serving lines: which model on which GPUs, in which order, its turns."""
    if not experiment.serving:
        return []
    notes: list[str] = []
    if ray is not None:
        refuse_both(gpus)
        from mad_eval.serving.ray_pool import cluster

        with cluster(ray) as gpu_ids:
            notes.append(f"on the Ray cluster {ray}: {len(gpu_ids)} GPUs, placed by Ray")
        pool = slots(gpu_ids)
    else:
        pool = slots(gpu_pool(gpus, note=notes.append))
    todo = works(experiment, states)
    return [f"{note}." for note in notes] + describe(plan(todo, pool), pool)


def refuse_both(gpus: object) -> None:
    """--gpus names this node's GPUs; with --ray the pool is the cluster's."""
    if gpus is not None:
        raise ExperimentError(
            "--ray and --gpus cannot be given together: with --ray the GPUs are the Ray "
            "cluster's, placed by Ray."
        )


async def run_experiment(
    experiment: Experiment,
    listener: Listener,
    gpus: str | Sequence[int] | None = None,
    ray: str | None = None,
    retry_failed: bool = False,
) -> None:
    """Run (or resume) every cell; the file's copy in the experiment folder records what
    the cells were asked. `ray`: serve its serve: models on that Ray cluster;
    `retry_failed`: each cell asks its failed turns again."""
    if ray is not None:
        refuse_both(gpus)
    refuse_records(experiment.out, f"{experiment.path}: out =")
    refuse_link(experiment.out)  # named by the file, not on the command line
    jobs = plan_cells(experiment, retry_failed=retry_failed)
    if experiment.serving and ray is None:  # on Ray, vllm is the nodes' to have
        require_vllm(f"{experiment.path}'s serve: models")
    with copied(experiment, jobs):
        await _run(experiment, jobs, listener, gpus, ray)


@contextmanager
def copied(experiment: Experiment, jobs: list[Job]) -> Iterator[None]:
    """The experiment file's copy (experiment.json) in its folder while its cells run; a
    command that fails or stops before recording a turn leaves the folder's copy as it was
    (none, or an earlier run's), and no folder of its own making left empty."""
    path = experiment.out / EXPERIMENT_FILE
    before = path.read_bytes() if path.is_file() else None
    # The outermost folder this command makes, if any.
    made = next(
        (f for f in [*experiment.out.parents[::-1], experiment.out] if not f.exists()), None
    )
    sizes = [job.store.size() for job in jobs]
    try:
        experiment.out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ExperimentError(f"cannot create {experiment.out} ({exc.strerror}).") from None
    # The file's text with its secrets hidden (sanitize.redact): each cell's URL passwords
    # and extra bodies' secret values, wherever the text writes them.
    remember([cell.settings for cell in experiment.cells])
    then = "free space and run the same command again."
    write_json(
        path,
        {
            "file": str(experiment.path),
            "name": experiment.name,
            "text": redact(experiment.path.read_text(encoding="utf-8")),
            "cells": {cell.name: list(experiment.grids(cell)) for cell in experiment.cells},
        },
        then,
    )
    try:
        yield
    except BaseException:
        if [job.store.size() for job in jobs] == sizes:
            if before is None:
                path.unlink(missing_ok=True)
            else:
                write_atomically(path, before, then)
            folder = experiment.out
            while made is not None and folder.is_dir() and not any(folder.iterdir()):
                folder.rmdir()
                if folder == made:
                    break
                folder = folder.parent
        raise


async def _run(
    experiment: Experiment,
    jobs: list[Job],
    listener: Listener,
    gpus: str | Sequence[int] | None,
    ray: str | None,
) -> None:
    listener.say(
        f"{experiment.name}: {counted(len(jobs), 'run')} -> {experiment.out}{os.sep}, "
        f"{counted(sum(job.requests for job in jobs), 'turn')} in all (those recorded before "
        "are skipped)"
    )
    if not experiment.serving:
        await execute(jobs, listener)
        return
    if ray is None:
        await serve_and_execute(experiment, jobs, listener, gpus)
        return
    from mad_eval.serving.ray_pool import RayServer, cluster, refuse_unplaceable

    with cluster(ray) as pool:
        if pool:  # no GPUs at all: each server one CPU slot, as on one node
            refuse_unplaceable(experiment.serving.values(), ray)
        listener.say(f"Serving: on the Ray cluster {ray}, {len(pool)} GPUs, placed by Ray.")
        await serve_and_execute(experiment, jobs, listener, pool, RayServer)


async def serve_and_execute(
    experiment: Experiment,
    jobs: list[Job],
    listener: Listener,
    gpus: str | Sequence[int] | None,
    make: Callable[..., Server] = LocalServer,
) -> None:
    """The cells of endpoints given by URL at once, as ever; each served model's cells once
    its servers are up, the servers packed over the GPU pool and stopped after its cells.
    `make` starts each server: LocalServer, or RayServer with the Ray cluster's pool."""
    if make is LocalServer or isinstance(gpus, str):
        pool = gpu_pool(gpus, note=lambda text: listener.say(f"Serving: {text}."))
    else:
        pool = list(gpus or [])
    pairs = list(zip(experiment.cells, jobs, strict=True))
    by_label = {spec.label: model for model, spec in experiment.serving.items()}
    served = [(c, j) for c, j in pairs if c.settings.get("model") in experiment.serving]
    plain = [j for c, j in pairs if c.settings.get("model") not in experiment.serving]
    for _, job in served:
        job.check()
    states = dry_run_states(experiment, [c for c, _ in served], [j for _, j in served])

    async def serve(work: Work, gpus_given: list[int]) -> None:
        model = by_label[work.label]
        spec = experiment.serving[model]
        mine = [(c, j) for c, j in served if c.settings.get("model") == model]

        async def run_cells(urls: list[str]) -> None:
            replanned = [
                Job(planned(experiment, c, j.plan.shared, urls), j.store, j.retry_failed, j.where)
                for c, j in mine
            ]  # fmt: skip
            await execute(replanned, listener, close=False)

        placement = place(spec, gpus_given if pool else [])
        task = f"{counted(len(mine), 'cell')}, {counted(work.turns, 'turn')} left"
        servers = experiment.out / "servers"
        await Serving(spec, placement, make).run(run_cells, servers, listener, task=task)

    todo = works(experiment, states)
    plan(todo, slots(pool))  # a model the pool cannot hold: refused before anything starts
    try:
        # One failure (a model that could not be served) raised as itself, not a group.
        runs = [run_pool(todo, slots(pool), serve)]
        await every([*runs, execute(plain, listener, close=False)] if plain else runs)
    finally:  # the executes share one Shared: closed once, after all of them
        await close_shared(jobs[0].plan.shared, listener)
