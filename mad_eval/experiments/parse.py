"""An experiment file: a paper's whole evaluation in one TOML file. It names the models once
(each with a label, such as DAPO or SDRL-freq), then grids of settings (models x protocols
x N x T x benchmarks x prompt templates x answer protocols), a single-agent block for
mean@K and maj@K, named exclusions, and the tables and figures to make. Each cell of a
grid is an ordinary run folder under the experiment's folder, named from its settings.

Every problem is found before the first request and said in one sentence naming the file,
the key and the fix."""

from __future__ import annotations

import math
from itertools import product
from pathlib import Path
from typing import Any

from mad_eval.errors import UserError
from mad_eval.experiments.cells import (
    AXES,
    CEILINGS,
    LIMITS,
    LONGEST_FOLDER,
    SINGLE,
    VIEW_NAME,
    Cell,
    Experiment,
    ExperimentError,
    View,
    cell_name,
    clean,
    pool_for,
)
from mad_eval.measure.prices import Prices, PricesError, load_prices
from mad_eval.reporting.layouts import ERRORS, FORMATS, LAYOUTS
from mad_eval.serving.spec import KEYS as SERVING_KEYS
from mad_eval.serving.spec import ServeSpec, is_served, parse_serve
from mad_eval.settings.config import OPERATIONAL, RESULTS_ROOT, ConfigError, run_defaults
from mad_eval.settings.keywords import check_names, check_types
from mad_eval.settings.tomlfile import TomlFileError, read_toml

# The values an axis a grid does not list takes (unless [settings] gives one).
DEFAULT_AXES = {"protocols": ["decentralized"], "agents": [5], "rounds": [3]}
# Settings that decide how requests travel: one value for the whole experiment, so its runs
# can share every endpoint's request limit and the request cache; every operational setting
# but the endpoints, which a model's own table names.
SHARED = tuple(name for name in OPERATIONAL if name != "base_urls")
SECTIONS = ("experiment", "settings", "models", "grids", "single", "exclude", "tables", "figures")
# Settings each part of the file refuses, since another part decides them.
IN_SETTINGS = ("model", "agent", "roster")
IN_MODELS = ("protocol", "agents", "rounds", "benchmark")
IN_GRIDS = (*AXES.values(), "agent", "roster")
PATH_SETTINGS = ("data_dir", "roster", "cache")  # read relative to the experiment file
LIMITED = {"agents": "max_agents", "rounds": "max_rounds"}  # axis setting -> its limit
# A grid as checked before any of its cells is made: its name, its table as the file gives
# it, its values on each axis, and the settings it sets for all its cells.
Shape = tuple[str, dict[str, Any], dict[str, list[Any]], dict[str, Any]]


def load_experiment(path: Path) -> Experiment:
    path = Path(path)
    try:
        raw = read_toml(path)
    except FileNotFoundError:
        raise ExperimentError(
            f"{path} does not exist; give the path of an experiment file."
        ) from None
    except TomlFileError as exc:
        raise ExperimentError(f"{path} cannot be an experiment file: {exc}; fix it.") from None
    return Parser(path, raw).experiment()


class Parser:
    def __init__(self, path: Path, raw: dict[str, Any]):
        self.path, self.raw = path, raw
        self.base = path.parent

    def fail(self, where: str, problem: str) -> ExperimentError:
        return ExperimentError(f"{self.path}: {where}: {problem}.")

    def experiment(self) -> Experiment:
        self.known(self.raw, SECTIONS, "the file")
        head = self.table(self.raw.get("experiment", {}), "[experiment]")
        self.known(head, ("name", "out", "description", "prices", "log", *LIMITS), "[experiment]")
        self.limits = self.read_limits(head)
        name = str(head.get("name", self.path.stem))
        out = self.out(head)
        given = self.table(self.raw.get("settings", {}), "[settings]")
        self.common = self.settings(given, "[settings]", IN_SETTINGS, "name models in [models]")
        self.serving: dict[str, ServeSpec] = {}
        self.models = self.model_settings()
        cells, order = self.cells()
        tables = [
            self.view(t, f"tables[{i}]", True) for i, t in enumerate(self.table_list("tables"))
        ]
        figures = [
            self.view(f, f"figures[{i}]", False) for i, f in enumerate(self.table_list("figures"))
        ]
        self.check_names(tables, figures)
        experiment = Experiment(
            self.path, name, out, str(head.get("description", "")), cells, order, tables, figures
        )
        experiment.max_turns = self.limits["max_turns"]
        experiment.serving = self.serving
        if "prices" in head:
            experiment.prices = self.prices(head["prices"])
        experiment.log = self.log(head.get("log", []))
        for view in [*tables, *figures]:
            self.check_rows(experiment, view)
        for view in tables:
            if LAYOUTS.get(view.layout).paired:
                self.add_pools(experiment, view)
        if len(experiment.cells) > self.limits["max_cells"]:
            raise self.fail(
                "[[tables]]",
                f"with its budget tables' single runs the experiment makes "
                f"{len(experiment.cells):,} runs, more than [experiment] max_cells = "
                f"{self.limits['max_cells']:,} allows; cut a grid or raise max_cells",
            )
        return experiment

    def log(self, given: Any) -> list[str]:
        """[experiment] log: a tracker, or a list of them, as --log takes them (checked
        before the first request, when the experiment runs)."""
        listed = [given] if isinstance(given, str) else given
        if not isinstance(listed, list) or not all(isinstance(t, str) for t in listed):
            raise self.fail(
                "[experiment] log",
                'give a tracker or a list of them, e.g. log = ["wandb:project=p", '
                '"mlflow:tracking_uri=sqlite:///mlflow.db"]',
            )
        return list(listed)

    def read_limits(self, head: dict[str, Any]) -> dict[str, int]:
        """[experiment] max_cells, max_agents, ...: each a whole number, within a run's own
        limits."""
        found = {}
        for key, default in LIMITS.items():
            value = head.get(key, default)
            ceiling = CEILINGS.get(key)
            if type(value) is not int or value < 1 or (ceiling is not None and value > ceiling):
                allowed = f"from 1 to {ceiling:,}" if ceiling else "of at least 1"
                raise self.fail(
                    f"[experiment] {key}", f"it must be a whole number {allowed}, got {value!r}"
                )
            found[key] = value
        return found

    def out(self, head: dict[str, Any]) -> Path:
        """The experiment's folder: [experiment] out, else results/<file name>; never a
        hidden or unnamed folder."""
        if "out" in head:
            value = head["out"]
            if not isinstance(value, str) or not value.strip() or unprintable(value):
                raise self.fail(
                    "[experiment] out", "it must be a folder path without control characters"
                )
            return Path(value)
        stem = self.path.stem
        if stem.startswith(".") or unprintable(stem):
            raise self.fail(
                "the file name",
                f"{stem!r} would name a hidden or unusable folder under {RESULTS_ROOT}; "
                "rename the file or set [experiment] out",
            )
        return RESULTS_ROOT / stem

    def check_names(self, tables: list[View], figures: list[View]) -> None:
        """Two tables (or two figures) of one name would write one file; a budget table
        draws a figure of its name too. Names differing only in case clash on macOS and
        Windows."""
        seen: dict[tuple[str, str], str] = {}
        views = [("tables", f"tables[{i}]", v) for i, v in enumerate(tables)]
        views += [
            ("figures", f"tables[{i}]", v)
            for i, v in enumerate(tables)
            if LAYOUTS.get(v.layout).paired
        ]
        views += [("figures", f"figures[{i}]", v) for i, v in enumerate(figures)]
        for folder, where, view in views:
            key = (folder, view.name.casefold())
            if key in seen and seen[key] != where:
                raise self.fail(
                    f"{seen[key]} and {where}",
                    f"both write {folder}/{view.name}; give them different names",
                )
            seen[key] = where

    def add_pools(self, experiment: Experiment, view: View) -> None:
        """A budget table's single cells, one per model and benchmark (and answer protocol)
        of its cells, made where the file has none with enough samples (cells.pool_for)."""
        cells = experiment.of(view)
        if any(cell.single for cell in cells):
            raise self.fail(
                f"tables '{view.name}'.layout",
                "a budget table sets debates against single runs; give it a debate grid",
            )
        groups: dict[tuple[Any, ...], list[Cell]] = {}
        for cell in cells:
            key = tuple(cell.axes.get(a) for a in ("model", "benchmark", "answer_protocol"))
            groups.setdefault(key, []).append(cell)
        names = []
        for group in groups.values():
            pool, new = pool_for(group, experiment)
            known = {cell.name: cell for cell in experiment.cells}
            if new and pool.name in known:
                raise self.fail(
                    f"tables '{view.name}'",
                    f"its single cell {pool.name} would differ from the file's own cell of "
                    "that name in its settings; give [single] the debate grid's settings",
                )
            if new:
                where = f"tables '{view.name}' (its single run K = N(T+1))"
                self.within(pool.settings["agents"], "max_samples", where)
                experiment.cells.append(pool)
            names.append(pool.name)
        experiment.pools[view.name] = names

    def prices(self, value: object) -> Prices:
        """[experiment] prices: a prices file, relative to the experiment file."""
        if not isinstance(value, str):
            raise self.fail("[experiment] prices", "must be the path of a prices file")
        try:
            return load_prices(self.base / value)
        except PricesError as exc:
            raise self.fail("[experiment] prices", str(exc).rstrip(".")) from None

    def check_rows(self, experiment: Experiment, view: View) -> None:
        """A view's rows must tell its cells apart, and its labels and baseline name rows."""
        where = f"{'tables' if view in experiment.tables else 'figures'} '{view.name}'"
        cells = experiment.of(view)
        if not cells:
            raise self.fail(where, "it selects no cell; fix its grid or its filters")
        labels = experiment.labels(view)
        seen: dict[tuple[str, Any, str], str] = {}
        for cell in cells:
            key = (labels[cell.name], cell.axes["benchmark"], experiment.column(cell, view))
            if key in seen:
                raise self.fail(
                    f"{where}.rows",
                    f"cells {seen[key]} and {cell.name} are both row '{key[0]}'; add the axis "
                    "that tells them apart to rows, or filter one out",
                )
            seen[key] = cell.name
        generated = {experiment.row(cell, view) for cell in cells}
        for given in view.labels:
            if given not in generated:
                known = ", ".join(sorted(generated))
                raise self.fail(f"{where}.labels", f"'{given}' is not a row of it ({known})")
        if view.baseline is not None and view.baseline not in set(labels.values()):
            known = ", ".join(sorted(set(labels.values())))
            raise self.fail(f"{where}.baseline", f"'{view.baseline}' is not a row ({known})")

    # --- sections -----------------------------------------------------------------------

    def model_settings(self) -> dict[str, dict[str, Any]]:
        models = self.table(self.raw.get("models", {}), "[models]")
        if not models:
            raise self.fail("[models]", "no model is named; add e.g. [models.base] model = 'sim'")
        found = {}
        for label, given in models.items():
            where = f"models.{label}"
            if isinstance(given, str):
                given = {"model": given}
            given = dict(self.table(given, where))
            if not any(k in given for k in ("model", "agent", "roster")):
                raise self.fail(where, "it needs model = SPEC (or agent = [...] or roster = FILE)")
            self.serve(label, given, where)
            found[label] = self.settings(given, where, IN_MODELS, "list it in a grid instead")
        self.check_labels(list(found))
        return found

    def serve(self, label: str, given: dict[str, Any], where: str) -> None:
        """A serve:CHECKPOINT model's serving keys (next to `model`) taken off its settings
        and checked now, before anything starts; refused on any other model."""
        keys = {key: given.pop(key) for key in SERVING_KEYS if key in given}
        model = given.get("model")
        if not is_served(model):
            if keys:
                raise self.fail(where, f"{next(iter(keys))} is for a serve:CHECKPOINT model")
            return
        if "base_url" in given:
            raise self.fail(where, "a serve: model is served on its own URLs; drop base_url")
        length = given.get("max_model_len", self.common.get("max_model_len"))
        try:
            spec = parse_serve(model, keys, label=label, where=f"{self.path}: {where}",
                               max_model_len=length if type(length) is int else None)  # fmt: skip
        except UserError as exc:
            raise ExperimentError(str(exc)) from None
        if self.serving.setdefault(model, spec) != spec:
            raise self.fail(where, f"{model} is served under another label with other settings")

    def check_labels(self, labels: list[str]) -> None:
        """Labels name cell folders as clean() writes them: two that clean to one folder
        name (or to names differing only in case, one folder on macOS and Windows) would
        put two models' runs in one folder."""
        seen: dict[str, str] = {}
        for label in labels:
            folder = clean(label)
            if not label or unprintable(label) or len(folder) > 100:
                raise self.fail(
                    f"models.{label!r}",
                    "a label must be 1 to 100 printable characters; rename it",
                )
            other = seen.setdefault(folder.casefold(), label)
            if other != label:
                raise self.fail(
                    "[models]",
                    f"labels '{other}' and '{label}' both name run folders '...-{folder}' "
                    "(a folder name keeps only letters, digits and ._=+-, and macOS and "
                    "Windows ignore case); rename one of them",
                )

    def cells(self) -> tuple[list[Cell], dict[str, list[str]]]:
        grids = self.table(self.raw.get("grids", {}), "[grids]")
        exclusions = self.exclusions(grids)
        cells: dict[str, tuple[Cell, str]] = {}  # by name: the cell, the grid that made it
        order: dict[str, list[str]] = {}
        sources: list[tuple[str, dict[str, Any]]] = [
            (name, self.table(g, f"grids.{name}")) for name, g in grids.items()
        ]
        if "single" in self.raw:
            sources.append((SINGLE, self.table(self.raw["single"], "[single]")))
        if not sources:
            raise self.fail("the file", "it has no [grids.NAME] table and no [single] block")
        shapes = [(grid, given, *self.axis_values(grid, given)) for grid, given in sources]
        self.check_size(shapes)
        for grid, given, values, scalars in shapes:
            made = self.grid(grid, given, values, scalars)
            made = [c for c in made if not self.excluded(c, grid, exclusions)]
            if not made:
                raise self.fail(self.where(grid), "it has no cell left; widen it or its exclusions")
            order[grid] = [cell.name for cell in made]
            for cell in made:
                self.add(cells, cell, grid)
        for rule, used in exclusions:
            if not used:
                raise self.fail(f"exclude '{rule['name']}'", "it matches no cell; fix its keys")
        return [cell for cell, _ in cells.values()], order

    def check_size(self, shapes: list[Shape]) -> None:
        """The runs of every grid, counted from its axes' lengths before any is made."""
        sizes = {grid: math.prod(len(v) for v in values.values()) for grid, _, values, _ in shapes}
        total, limit = sum(sizes.values()), self.limits["max_cells"]
        if total <= limit:
            return
        grid = max(sizes, key=lambda g: sizes[g])
        values = next(values for g, _, values, _ in shapes if g == grid)
        axes = " x ".join(f"{len(v)} {AXIS_NAMES[setting]}" for setting, v in values.items())
        also = f" ({total:,} with the other grids)" if len(sizes) > 1 else ""
        raise self.fail(
            self.where(grid),
            f"it makes {sizes[grid]:,} runs ({axes}){also}, more than [experiment] "
            f"max_cells = {limit:,} allows; cut the grid, split the file or raise max_cells",
        )

    def axis_values(
        self, grid: str, given: dict[str, Any]
    ) -> tuple[dict[str, list[Any]], dict[str, Any]]:
        """A grid's values on each axis, each checked, and its scalar settings."""
        where = self.where(grid)
        single = grid == SINGLE
        axes_keys = ("models", "benchmarks", "answer_protocols") if single else tuple(AXES)
        own = ("samples",) if single else ()
        axes = {key: given.get(key) for key in axes_keys if key in given}
        rest = {k: v for k, v in given.items() if k not in axes and k not in own}
        scalars = self.settings(rest, where, IN_GRIDS, "list it as an axis: NAMEs = [...]")
        values: dict[str, list[Any]] = {}
        for key in axes_keys:
            setting = AXES[key]
            listed = axes.get(key)
            origin = f"{where}.{key}"
            if listed is None and setting in self.common:  # one value for every grid
                listed, origin = [self.common[setting]], f"[settings] {setting}"
            if listed is None:
                listed = list(self.models) if key == "models" else DEFAULT_AXES.get(key)
                listed = None if single and key != "models" else listed
            if listed is None:
                continue
            listed = listed if isinstance(listed, list) else [listed]
            if not listed:
                raise self.fail(f"{where}.{key}", "the list is empty; give at least one value")
            checked = []
            for value in listed:
                if key == "models" and value not in self.models:
                    known = ", ".join(self.models)
                    raise self.fail(
                        f"{where}.models", f"'{value}' is not one of [models] ({known})"
                    )
                if key != "models":  # a template file is read relative to the experiment's
                    value = self.settings({setting: value}, origin, (), "")[setting]
                if setting in LIMITED:
                    self.within(value, LIMITED[setting], origin)
                checked.append(value)
            values[setting] = checked
        if "benchmark" not in values:
            raise self.fail(where, "it names no benchmarks; add benchmarks = [...]")
        if single:
            for benchmark in values["benchmark"]:
                self.samples(given.get("samples", 4), benchmark, where)
        return values, scalars

    def within(self, value: int, limit: str, where: str) -> None:
        """An agents, rounds or samples value within the experiment's limit for it."""
        if value > self.limits[limit]:
            what = limit.removeprefix("max_")
            raise self.fail(
                where,
                f"{value:,} {what} is more than [experiment] {limit} = {self.limits[limit]:,} "
                "allows; "
                f"use less or raise {limit} (at most {CEILINGS[limit]:,})",
            )

    def grid(
        self,
        grid: str,
        given: dict[str, Any],
        values: dict[str, list[Any]],
        scalars: dict[str, Any],
    ) -> list[Cell]:
        """A grid's cells: every combination of its axes' values."""
        where, single = self.where(grid), grid == SINGLE
        samples = given.get("samples", 4) if single else None
        made = []
        names = list(values)
        for combination in product(*values.values()):
            axes_values = dict(zip(names, combination, strict=True))
            settings = {**self.common, **self.models[axes_values["model"]], **scalars}
            settings.update({k: v for k, v in axes_values.items() if k != "model"})
            if single:
                k = self.samples(samples, axes_values["benchmark"], where)
                settings.update(protocol="single", agents=k, rounds=0)
                axes_values["samples"] = k
            name = cell_name(axes_values, single)
            if len(name) > LONGEST_FOLDER:
                raise self.fail(
                    where,
                    f"its run folder {name[:40]}... would be {len(name)} characters long, more "
                    f"than {LONGEST_FOLDER}; shorten the model label, benchmark or template name",
                )
            made.append(Cell(name, axes_values, settings))
        return made

    def samples(self, given: Any, benchmark: str, where: str) -> int:
        """[single] samples: one K, or a K per benchmark (4 on MATH500, 32 on AIME)."""
        k = given.get(benchmark) if isinstance(given, dict) else given
        if type(k) is not int or k < 1:
            raise self.fail(
                f"{where}.samples", f"K for {benchmark} must be an integer >= 1, got {k!r}"
            )
        self.within(k, "max_samples", f"{where}.samples")
        return k

    def add(self, cells: dict[str, tuple[Cell, str]], cell: Cell, grid: str) -> None:
        """A cell two grids share is run once (as the first grid made it); two different
        runs in one folder (or in names differing only in case, one folder on macOS and
        Windows) are refused."""
        other, first = cells.setdefault(cell.name.casefold(), (cell, grid))
        if other.name == cell.name and other.settings == cell.settings:
            return
        where = self.where(grid) if first == grid else f"{self.where(first)} and {self.where(grid)}"
        axes = [a for a in AXES.values() if cell.axes.get(a) != other.axes.get(a)]
        if axes:
            mine, theirs = (
                ", ".join(f"{AXIS_NAMES[a]} {c.axes.get(a)!r}" for a in axes) for c in (other, cell)
            )
            raise self.fail(
                where,
                f"its runs of {mine} and of {theirs} would share the folder {cell.name} (a "
                "folder name keeps only letters, digits and ._=+-, and macOS and Windows "
                "ignore case); rename one of them",
            )
        differ = sorted(
            k
            for k in {*cell.settings, *other.settings}
            if cell.settings.get(k) != other.settings.get(k)
        )
        raise self.fail(
            where,
            f"both make folder {cell.name} with different {', '.join(differ)}; "
            "give the grids the same settings or set them in [settings]",
        )

    def exclusions(self, grids: dict[str, Any]) -> list[tuple[dict[str, Any], list[bool]]]:
        found: list[tuple[dict[str, Any], list[bool]]] = []
        for i, rule in enumerate(self.table_list("exclude")):
            where = f"exclude[{i}]"
            self.known(rule, ("name", "grid", *AXES), where)
            if "name" not in rule:
                raise self.fail(where, "give it a name = '...' saying why it is left out")
            grid = rule.get("grid")
            if grid is not None and grid not in grids and grid != SINGLE:
                raise self.fail(f"exclude '{rule['name']}'", f"grid '{grid}' is not defined")
            found.append((rule, []))
        return found

    def excluded(
        self, cell: Cell, grid: str, exclusions: list[tuple[dict[str, Any], list[bool]]]
    ) -> bool:
        for rule, used in exclusions:
            if rule.get("grid", grid) != grid:
                continue
            keys = [k for k in AXES if k in rule]
            if keys and all(
                cell.axes.get(AXES[k]) in (rule[k] if isinstance(rule[k], list) else [rule[k]])
                for k in keys
            ):
                used.append(True)
                return True
        return False

    def view(self, given: Any, where: str, table: bool) -> View:
        given = self.table(given, where)
        keys = ("name", "grid", "rows", "columns", "labels", *AXES)
        keys += ("layout", "formats", "error", "baseline") if table else ()
        self.known(given, keys, where)
        name = given.get("name")
        if not isinstance(name, str) or not VIEW_NAME.fullmatch(name):
            raise self.fail(
                f"{where}.name",
                f"{name!r} cannot name a file; give it 1 to 100 letters, digits, '-', '_' or "
                "'.', starting with a letter, digit or '_'",
            )
        where = f"{'tables' if table else 'figures'} '{name}'"
        grids = {*self.table(self.raw.get("grids", {}), "[grids]")}
        grids |= {SINGLE} if "single" in self.raw else set()
        grid = given.get("grid", next(iter(grids)) if len(grids) == 1 else None)
        if grid not in grids:
            raise self.fail(where, f"grid {grid!r} is not one of {', '.join(sorted(grids))}")
        rows, columns = (self.axes(given, key, where) for key in ("rows", "columns"))
        if "benchmarks" in rows:
            raise self.fail(f"{where}.rows", "benchmarks are the columns; leave them out of rows")
        columns = [axis for axis in columns if axis != "benchmarks"]  # always columns
        both = set(rows) & set(columns)
        if both:
            raise self.fail(where, f"{', '.join(sorted(both))} cannot be both rows and columns")
        only = {AXES[k]: (v if isinstance(v, list) else [v]) for k, v in given.items() if k in AXES}
        layout = given.get("layout", "single" if grid == SINGLE else "debate")
        formats = tuple(given.get("formats", FORMATS))
        error = given.get("error", "std")
        for value, allowed, key in (
            (layout, tuple(LAYOUTS), "layout"),
            (error, ERRORS, "error"),
            *((f, FORMATS, "formats") for f in formats),
        ):
            if value not in allowed:
                raise self.fail(f"{where}.{key}", f"{value!r} is not one of {', '.join(allowed)}")
        labels = self.table(given.get("labels", {}), f"{where}.labels")
        return View(
            name,
            grid,
            layout,
            tuple(AXES[a] for a in rows),
            tuple(AXES[a] for a in columns),
            only,
            {str(k): str(v) for k, v in labels.items()},
            formats,
            error,
            given.get("baseline"),
        )

    # --- checks -------------------------------------------------------------------------

    def settings(
        self, given: dict[str, Any], where: str, refused: tuple[str, ...], instead: str
    ) -> dict[str, Any]:
        """Run settings, checked by name and type, paths made relative to the file; a
        setting that belongs elsewhere in the file (`refused`) is sent there."""
        try:
            check_names(given, run_defaults(), where)
            check_types(given, where)
        except ConfigError as exc:
            raise ExperimentError(f"{self.path}: {exc}") from None
        for key in given:
            if key in SHARED and where != "[settings]":
                raise self.fail(f"{where}.{key}", "set it once for the experiment, in [settings]")
            if key in refused:
                raise self.fail(f"{where}.{key}", f"it does not belong here; {instead}")
        found = dict(given)
        for key in PATH_SETTINGS:
            if isinstance(found.get(key), str):
                found[key] = str(self.base / found[key])
        template = found.get("prompt_template")
        if isinstance(template, str) and template.endswith(".toml"):
            found["prompt_template"] = str(self.base / template)
        return found

    def known(self, given: dict[str, Any], accepted: Any, where: str) -> None:
        try:
            check_names(given, dict.fromkeys(accepted), where)
        except ConfigError as exc:
            raise ExperimentError(f"{self.path}: {exc}") from None

    def table(self, value: Any, where: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(where, f"it must be a table of keys, not {type(value).__name__}")
        return value

    def table_list(self, section: str) -> list[dict[str, Any]]:
        value = self.raw.get(section, [])
        if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
            raise self.fail(f"[[{section}]]", "write each one as a [[" + section + "]] table")
        return value

    def axes(self, given: dict[str, Any], key: str, where: str) -> list[str]:
        """A view's rows or columns: axis names, as a grid lists them (models, agents, ...)."""
        found = given.get(key, [])
        found = [found] if isinstance(found, str) else found
        for axis in found:
            if axis not in AXES:
                raise self.fail(f"{where}.{key}", f"'{axis}' is not an axis ({', '.join(AXES)})")
        return found

    def where(self, grid: str) -> str:
        return "[single]" if grid == SINGLE else f"grids.{grid}"


# Each axis setting as the file lists it: agents, rounds, models, ...
AXIS_NAMES = {setting: key for key, setting in AXES.items()}


def unprintable(text: str) -> bool:
    """Whether text holds a control character (NUL, a newline, ...), which no file name,
    label or folder should."""
    return any(not char.isprintable() for char in text)
