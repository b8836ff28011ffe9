"""An experiment as the rest of mad-eval sees it: its cells (each one run's settings and
the grid values that make it), and its tables and figures (which cells, how their rows
and columns are named). experiments/parse.py reads a file into one."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mad_eval.errors import UserError
from mad_eval.foreign import read_json
from mad_eval.reporting.layouts import FORMATS
from mad_eval.serving.spec import ServeSpec
from mad_eval.settings.config import MAX_AGENTS, MAX_ROUNDS, ConfigError, RunConfig, is_single
from mad_eval.store.names import EXPERIMENT_FILE

if TYPE_CHECKING:
    from mad_eval.measure.prices import Prices

# A grid's axes: the key that lists its values, and the setting each value fills.
AXES = {
    "models": "model",
    "protocols": "protocol",
    "agents": "agents",
    "rounds": "rounds",
    "benchmarks": "benchmark",
    "prompt_templates": "prompt_template",
    "answer_protocols": "answer_protocol",
}
SINGLE = "single"  # the single-agent block's cells are its grid

# What an experiment may ask for unless its [experiment] table raises a limit, so a file
# from anyone is refused at once instead of planning for hours: runs (every grid and
# [single], counted before exclusions), each agents, rounds and samples value, and the
# turns of all runs together. The limits a value may be raised to: a run's own.
LIMITS = {
    "max_cells": 1000,
    "max_agents": 64,
    "max_rounds": 50,
    "max_samples": 256,
    "max_turns": 10_000_000,
}
CEILINGS = {"max_agents": MAX_AGENTS, "max_rounds": MAX_ROUNDS, "max_samples": MAX_AGENTS}
# A table's or figure's name becomes a file name: no path, no hidden file, not too long.
VIEW_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}")
LONGEST_FOLDER = 200  # a cell's folder name, well under the 255 bytes file systems allow


class ExperimentError(ConfigError):
    """The experiment file cannot work; the message names the file, the key and the fix."""


@dataclass(frozen=True)
class Cell:
    """One run of the experiment: its folder's name, the grid values that make it, and
    every setting its run is planned with."""

    name: str
    axes: dict[str, Any]  # axis setting -> value (the model as its label)
    settings: dict[str, Any]

    @property
    def single(self) -> bool:
        """K independent samples per question, no debate (settings.config.is_single)."""
        rounds = self.settings.get("rounds", RunConfig.rounds)
        return is_single(protocol_class(self.settings["protocol"]), rounds)


@dataclass(frozen=True)
class View:
    """A table or a figure to make: which cells, how its rows are named, in which forms."""

    name: str
    grid: str
    layout: str
    rows: tuple[str, ...]  # axis settings naming a row, in order
    columns: tuple[str, ...]  # axis settings that split a benchmark's columns, in order
    only: dict[str, list[Any]]  # axis setting -> the values kept
    labels: dict[str, str]  # a generated row name -> the name printed
    formats: tuple[str, ...] = FORMATS
    error: str = "std"
    baseline: str | None = None


@dataclass
class Experiment:
    path: Path
    name: str
    out: Path
    description: str
    cells: list[Cell]
    order: dict[str, list[str]]  # each grid's cells (by name) in its own order
    tables: list[View] = field(default_factory=list)
    figures: list[View] = field(default_factory=list)
    prices: Prices | None = None  # what its tables price tokens at (cost layout)
    # A budget table's single cells (by name), one per model and benchmark of its cells.
    pools: dict[str, list[str]] = field(default_factory=dict)
    max_turns: int = LIMITS["max_turns"]
    # serve:CHECKPOINT models by their spec: what mad-eval serves for their cells.
    serving: dict[str, ServeSpec] = field(default_factory=dict)
    # Trackers its cells are sent to ([experiment] log: "wandb:project=p", ...), as written.
    log: list[str] = field(default_factory=list)

    def folder(self, cell: Cell) -> Path:
        return self.out / cell.name

    def grids(self, cell: Cell) -> tuple[str, ...]:
        """The grids that hold a cell ("single" for the single-agent block), and the budget
        budget tables it serves as a pool ("budget table")."""
        found = tuple(grid for grid, names in self.order.items() if cell.name in names)
        pools = tuple(f"{t} table" for t, names in self.pools.items() if cell.name in names)
        return found + pools

    def memberships(self) -> dict[str, tuple[str, ...]]:
        """Every cell's grids (by name), as grids() finds them, in one pass over the grids:
        for a loop over 1,000 cells."""
        found: dict[str, tuple[str, ...]] = {}
        for grid, names in self.order.items():
            for name in dict.fromkeys(names):
                found[name] = (*found.get(name, ()), grid)
        for table, names in self.pools.items():
            for name in dict.fromkeys(names):
                found[name] = (*found.get(name, ()), f"{table} table")
        return found

    def pool_cells(self, view: View) -> list[Cell]:
        """The single cells a budget table pairs its debate cells with."""
        by_name = {cell.name: cell for cell in self.cells}
        return [by_name[name] for name in self.pools.get(view.name, [])]

    def rows(self, view: View) -> tuple[str, ...]:
        """The axes naming a view's rows: its own, else those that vary among its cells."""
        if view.rows:
            return view.rows
        cells = [cell for cell in self.cells if cell.name in self.order[view.grid]]
        varying = [
            axis
            for axis in AXES.values()
            if axis != "benchmark"
            and axis not in view.columns
            and len({str(c.axes.get(axis)) for c in cells}) > 1
        ]
        return tuple(varying) or ("model",)

    def row(self, cell: Cell, view: View) -> str:
        """A cell's row name in a view, before the view's labels rename it."""
        return describe(cell, self.rows(view))

    def column(self, cell: Cell, view: View) -> str:
        """What, besides its benchmark, names a cell's column group in a view."""
        return describe(cell, view.columns) if view.columns else ""

    def labels(self, view: View) -> dict[str, str]:
        """Each of the view's cells (by name) -> its row's printed name."""
        return {
            cell.name: view.labels.get(self.row(cell, view), self.row(cell, view))
            for cell in self.of(view)
        }

    def of(self, view: View) -> list[Cell]:
        """The cells a table or figure shows, in the grid's order."""
        by_name = {cell.name: cell for cell in self.cells}
        return [
            cell
            for cell in (by_name[name] for name in self.order[view.grid])
            if all(cell.axes.get(axis) in values for axis, values in view.only.items())
        ]


# Settings of a debate cell that a single cell, like `mad-eval single`, does without.
DEBATE_SETTINGS = ("protocol", "agents", "rounds", "prompt_template", "strip_think", "quote")


def pool_for(cells: list[Cell], experiment: Experiment) -> tuple[Cell, bool]:
    """The single cell a budget table pairs debate cells of one model and benchmark with:
    K = the largest N(T+1) among them. An experiment's single cell with the same settings
    and at least that K serves (the largest one); else a new cell is made (True)."""
    first = cells[0]
    samples = max(c.settings.get("agents", 5) * (c.settings.get("rounds", 3) + 1) for c in cells)
    wanted = {key: v for key, v in first.settings.items() if key not in DEBATE_SETTINGS}

    def same(cell: Cell) -> bool:
        mine = {key: v for key, v in cell.settings.items() if key not in DEBATE_SETTINGS}
        return cell.single and mine == wanted and cell.settings["agents"] >= samples

    found = [cell for cell in experiment.cells if same(cell)]
    if found:
        return max(found, key=lambda cell: cell.settings["agents"]), False
    axes = {key: first.axes.get(key) for key in ("model", "benchmark", "answer_protocol")}
    axes = {key: value for key, value in axes.items() if value is not None}
    axes["samples"] = samples
    settings = {**wanted, "protocol": SINGLE, "agents": samples, "rounds": 0}
    return Cell(cell_name(axes, True), axes, settings), True


def describe(cell: Cell, axes: tuple[str, ...]) -> str:
    """A cell's values on some axes, as a table prints them (N=5, T=3, the model label)."""
    parts = []
    for axis in axes:
        value = cell.axes.get(axis)
        if axis == "agents":
            parts.append(f"N={value}")
        elif axis == "rounds":
            parts.append(f"T={value}")
        elif axis == "prompt_template" and value:
            parts.append(Path(str(value)).stem)
        else:
            parts.append(str(value) if value is not None else "default")
    return " ".join(parts)


def cell_name(axes: dict[str, Any], single: bool) -> str:
    """A cell's folder: its benchmark, protocol, N, T and model label, as a run's default
    folder is named; a prompt template or answer protocol, when given, too."""
    bench = (
        Path(str(axes["benchmark"])).stem
        if str(axes["benchmark"]).endswith((".jsonl", ".toml"))
        else str(axes["benchmark"])
    )
    if single:
        name = f"{bench}-single-k{axes['samples']}-{axes['model']}"
    else:
        name = f"{bench}-{axes['protocol']}-n{axes['agents']}-t{axes['rounds']}-{axes['model']}"
    if axes.get("prompt_template"):
        name += f"-{Path(str(axes['prompt_template'])).stem}"
    if axes.get("answer_protocol"):
        name += f"-{axes['answer_protocol']}"
    return clean(name)


def protocol_class(text: str) -> str | None:
    """The class `--protocol TEXT` resolves to; None where it resolves to none (planning
    the cell says why)."""
    try:
        return _resolved_class(text, Path.cwd())  # a preset of the working directory's
    except ConfigError:
        return None


@functools.cache
def _resolved_class(text: str, where: Path) -> str:
    from mad_eval.protocols import resolve

    return resolve(text).cls


def clean(text: str) -> str:
    """Text as a folder name holds it: only letters, digits and ._=+- (others become _),
    never a hidden name."""
    cleaned = re.sub(r"[^A-Za-z0-9._=+-]+", "_", re.sub(r"[:=,]", "_", text))
    return "_" + cleaned[1:] if cleaned.startswith(".") else cleaned


def recorded_name(folder: Path) -> str | None:
    """The experiment name an experiment folder's experiment.json records (None: no
    experiment's folder, or one written before it recorded its name)."""
    try:
        found = read_json(folder / EXPERIMENT_FILE)
    except (OSError, ValueError, UserError):
        return None
    name = found.get("name") if isinstance(found, dict) else None
    return name if isinstance(name, str) and name else None
