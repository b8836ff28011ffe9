"""An experiment's tables and figures, written into its folder from the cells' records alone
(every number is a cell's metrics.json number), with a summary.md that links them."""

from __future__ import annotations

from pathlib import Path

from mad_eval.errors import for_keywords
from mad_eval.experiments.cells import Cell, Experiment, ExperimentError, View
from mad_eval.measure.bootstrap import REPLICATES
from mad_eval.reporting.layouts import LAYOUTS
from mad_eval.reporting.pairing import pair
from mad_eval.reporting.results import Run, load_run, load_runs
from mad_eval.settings.config import RunConfig, run_defaults
from mad_eval.store.files import (
    StoreError,
    make_folder,
    refuse_link,
    refuse_records,
    write_atomically,
)
from mad_eval.store.folder import RunStore
from mad_eval.store.names import METRICS_FILE
from mad_eval.words import counted

EXTENSIONS = {"csv": "csv", "latex": "tex", "md": "md"}
THEN = "free space and run the same command again."


def view_runs(experiment: Experiment, view: View, replicates: int = REPLICATES) -> list[Run]:
    """The runs a view shows, each named for its row; a budget table's each paired with
    its single cell."""
    cells = experiment.of(view)
    labels = experiment.labels(view)
    pools = experiment.pool_cells(view)
    _check_records(experiment, view, [*cells, *pools])
    folders = [experiment.folder(cell) for cell in cells]
    groups = {str(experiment.folder(c)): experiment.column(c, view) for c in cells}
    try:
        names = {str(experiment.folder(c)): labels[c.name] for c in cells}
        runs = load_runs(folders, names, groups, experiment.prices)
        if pools:
            singles = [load_run(experiment.folder(c), experiment.prices) for c in pools]
            pair(runs, singles, replicates)
        return runs
    except (StoreError, ValueError) as exc:
        raise ExperimentError(f"{experiment.path}: '{view.name}': {exc}") from None


def _check_records(experiment: Experiment, view: View, cells: list[Cell]) -> None:
    missing = [c.name for c in cells if not RunStore(experiment.folder(c)).has_turns()]
    if missing:
        more = f" and {len(missing) - 1} more, which hold" if len(missing) > 1 else ", which holds"
        raise ExperimentError(
            f"{experiment.path}: '{view.name}' needs cell {missing[0]}{more} no records yet; "
            f"run `mad-eval experiment run {experiment.path}` first."
        )


def write_tables(experiment: Experiment, replicates: int = REPLICATES) -> list[Path]:
    """Every declared table in every declared format, every figure, and summary.md."""
    from mad_eval.reporting.plots import draw, draw_budget  # matplotlib loads only when drawing
    from mad_eval.reporting.tables import render, tidy

    refuse_records(experiment.out, f"{experiment.path}: out =")
    refuse_link(experiment.out)  # named by the file, not on the command line
    written: list[Path] = []
    sections = []
    figures = []
    for view in experiment.tables:
        runs = view_runs(experiment, view, replicates)
        try:
            frame = tidy(runs, view.layout, view.baseline, replicates)
        except ValueError as exc:
            raise ExperimentError(f"{experiment.path}: table '{view.name}': {exc}") from None
        files = {}
        for fmt in view.formats:
            path = experiment.out / "tables" / f"{view.name}.{EXTENSIONS[fmt]}"
            write(experiment, path, render(frame, fmt, view.error))
            files[fmt] = path
        written += files.values()
        seeds = [run.metrics["runs"] for run in runs]
        sections.append(_table_section(experiment, view, files, seeds))
        if LAYOUTS.get(
            view.layout
        ).paired:  # as `report --single` would; and accuracy against tokens
            for run in runs:
                RunStore(run.root, named=True).write_metrics(run.metrics)
            path = draw_budget(runs, figures_folder(experiment, view))
            written.append(path)
            figures.append(_figure_section(experiment, view, [path]))
    for view in experiment.figures:
        runs = view_runs(experiment, view)
        paths = draw(runs, figures_folder(experiment, view), replicates)
        written += paths
        sections.append(_figure_section(experiment, view, paths))
    summary = experiment.out / "summary.md"
    write(experiment, summary, _summary(experiment, sections + figures))
    return [*written, summary]


def write(experiment: Experiment, path: Path, text: str) -> None:
    """A file of the experiment's folder, in a folder of mad-eval's naming (never a link)."""
    make_folder(path.parent, THEN, below=experiment.out)
    write_atomically(path, text.encode("utf-8"), THEN)


def figures_folder(experiment: Experiment, view: View) -> Path:
    """figures/<name> in the experiment's folder, made (neither folder a link)."""
    folder = experiment.out / "figures" / view.name
    make_folder(folder, THEN, below=experiment.out)
    return folder


def _link(experiment: Experiment, path: Path) -> str:
    return path.relative_to(experiment.out).as_posix()


def folders_of(seeds: list[int]) -> str:
    """'3 run folders (2 seeded runs each)': run folders, each holding its seeded runs."""
    kinds = sorted(set(seeds))
    if len(kinds) == 1:
        each = f"{counted(kinds[0], 'seeded run')} each"
    else:
        each = f"{', '.join(map(str, kinds[:-1]))} or {kinds[-1]} seeded runs each"
    return f"{counted(len(seeds), 'run folder')} ({each})" if seeds else "no run folder"


def _table_section(
    experiment: Experiment, view: View, files: dict[str, Path], seeds: list[int]
) -> str:
    links = ", ".join(f"[{fmt}]({_link(experiment, p)})" for fmt, p in files.items())
    lines = [
        f"## Table: {view.name}",
        "",
        f"{view.layout} layout, {folders_of(seeds)}; {links}.",
        "",
    ]
    if "md" in files:
        lines += [files["md"].read_text(encoding="utf-8").rstrip(), ""]
    return "\n".join(lines)


def _figure_section(experiment: Experiment, view: View, paths: list[Path]) -> str:
    """Each figure with its caption below it (a paper-style figure has no title of its own)."""
    from mad_eval.reporting.plots import CAPTIONS

    lines = [f"## Figure: {view.name}", ""]
    for p in paths:
        caption = " ".join(CAPTIONS.get(p.stem, "").split())
        lines += [f"![{p.stem}]({_link(experiment, p)})", ""]
        lines += [f"*{caption}*", ""] if caption else []
    return "\n".join(lines)


def _summary(experiment: Experiment, sections: list[str]) -> str:
    head = [f"# {experiment.name}", ""]
    if experiment.description:
        head += [experiment.description, ""]
    head += [
        f"From `{experiment.path}`: {folders_of([_seeds(c) for c in experiment.cells])} here "
        "(`mad-eval report FOLDER` recomputes a folder's metrics.json; every number below is "
        "one of them).",
        "",
        "| run folder | grids |",
        "|---|---|",
        *(
            f"| [{c.name}]({c.name}/{METRICS_FILE}) | {', '.join(experiment.grids(c))} |"
            for c in experiment.cells
        ),
        "",
    ]
    alerts = [
        f"- {c.name}: {for_keywords(sentence, run_defaults())}"
        for c in experiment.cells
        for sentence in _alerts(experiment.folder(c))
    ]
    if alerts:
        head += ["Suspicious results (each run's metrics.json `alerts`):", "", *alerts, ""]
    return "\n".join(head + sections)


def _seeds(cell: Cell) -> int:
    """The seeded runs a cell's folder holds."""
    return int(cell.settings.get("runs", RunConfig.runs))


def _alerts(folder: Path) -> list[str]:
    """A run's alerts as its metrics.json holds them (none in one written before them)."""
    return RunStore(folder).alerts() or []
