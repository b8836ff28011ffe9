"""An experiment's cells carried out: planned together on one Shared (each endpoint's request
limit and the request cache shared by every cell), scheduled through one engine window so
no server idles between cells, each cell resumed from its own folder; or, for a dry run,
what each cell needs and already holds."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from mad_eval.backends.cache import RequestCache
from mad_eval.data.benchmarks import load_questions
from mad_eval.debate.execute import Job, execute
from mad_eval.debate.plan import Shared, make_plan
from mad_eval.errors import UserError
from mad_eval.experiments.cells import Cell, Experiment, ExperimentError
from mad_eval.progress import Listener
from mad_eval.sanitize import redact, remember
from mad_eval.setup.config import run_defaults
from mad_eval.store.files import refuse_records
from mad_eval.store.folder import Recorded, RunStore, write_json


@dataclass(frozen=True)
class CellState:
    cell: Cell
    folder: Path
    questions: int
    requests: int  # turns the finished cell holds
    done: int  # turns already recorded


def plan_cells(experiment: Experiment, cache: bool = True) -> list[Job]:
    """Every cell planned, each problem named with its cell, before any request; the
    turns of all counted first, so an experiment over its limit is refused at once."""
    settings = experiment.cells[0].settings
    path = settings.get("cache")
    shared = Shared(RequestCache(path) if path and cache else None)
    count_turns(experiment, shared)
    grids = experiment.memberships()
    jobs = []
    for cell in experiment.cells:
        where = f"{experiment.path}: cell {cell.name} ({', '.join(grids[cell.name])})"
        try:
            plan = make_plan(cell.settings, shared)
        except UserError as exc:
            raise ExperimentError(f"{where}: {exc}") from None
        jobs.append(Job(plan, RunStore(experiment.folder(cell)), where=where))
    return jobs


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
                lambda b=benchmark, d=data_dir, n=limit: load_questions(b, d, n),
            )
        except UserError as exc:
            where = f"{experiment.path}: cell {cell.name} ({', '.join(grids[cell.name])})"
            raise ExperimentError(f"{where}: {exc}") from None
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
class Plan:
    """An experiment and what each of its cells needs and holds (a dry run)."""

    experiment: Experiment
    states: list[CellState]

    @property
    def needed(self) -> int:
        return sum(s.requests for s in self.states)

    @property
    def held(self) -> int:
        return sum(min(s.done, s.requests) for s in self.states)


def dry_run(experiment: Experiment) -> list[CellState]:
    """What each cell needs and holds, asking no server and writing nothing."""
    states = []
    for cell, job in zip(experiment.cells, plan_cells(experiment, cache=False), strict=True):
        turns = job.store.turns_path
        # Read only: a run writing there now may be mid-line, which repairing would cut.
        done = len(Recorded.index(turns, repair=False)) if turns.exists() else 0
        states.append(CellState(cell, job.store.root, len(job.plan.questions), job.requests, done))
    return states


async def run_experiment(experiment: Experiment, listener: Listener) -> None:
    """Run (or resume) every cell; the file's copy in the experiment folder records what
    the cells were asked."""
    refuse_records(experiment.out, f"{experiment.path}: out =")
    jobs = plan_cells(experiment)
    try:
        experiment.out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ExperimentError(f"cannot create {experiment.out} ({exc.strerror}).") from None
    # The file's text with its secrets hidden (sanitize.redact): each cell's URL passwords
    # and extra bodies' secret values, wherever the text writes them.
    remember([cell.settings for cell in experiment.cells])
    write_json(
        experiment.out / "experiment.json",
        {
            "file": str(experiment.path),
            "text": redact(experiment.path.read_text(encoding="utf-8")),
            "cells": {cell.name: list(experiment.grids(cell)) for cell in experiment.cells},
        },
        "free space and run the same command again.",
    )
    listener.say(
        f"{experiment.name}: {len(jobs)} runs -> {experiment.out}{os.sep}, "
        f"{sum(job.requests for job in jobs)} turns in all (those recorded before are skipped)"
    )
    await execute(jobs, listener)
