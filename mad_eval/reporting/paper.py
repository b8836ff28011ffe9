"""A paper table or the figures of several run folders, as `mad-eval table` and `plot` (and
mad_eval.table, mad_eval.plot) make them: options checked, runs read, files written."""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path

from mad_eval.errors import SkippedRun
from mad_eval.measure.bootstrap import REPLICATES
from mad_eval.measure.prices import read_prices
from mad_eval.reporting.layouts import ERRORS, FORMATS, LAYOUTS
from mad_eval.reporting.results import load_runs, parse_labels
from mad_eval.store.files import StoreError, refuse_records, write_atomically
from mad_eval.store.folder import RunStore
from mad_eval.store.names import MANIFEST_FILE

# Fewer resamples give intervals too rough to print.
MIN_REPLICATES = 100

Labels = Mapping[str, str] | Sequence[str] | None  # folder -> name, or RUN=NAME options


class TableError(StoreError):
    """A table or plot option that is not one of those accepted."""


def labels_of(labels: Labels) -> dict[str, str]:
    """--label RUN=NAME options, or a mapping of run folder to name, as a mapping."""
    if labels is None:
        return {}
    if isinstance(labels, Mapping):
        return {str(Path(folder)): name for folder, name in labels.items()}
    return parse_labels(list(labels))


def run_folders(paths: Sequence[Path], judged: bool = False) -> list[Path]:
    """Each path a run folder, or a folder holding run folders at any depth (results/, an
    experiment's folder): those, in name order, never looking inside a run folder. A run
    folder found inside one that holds no turns (a run that crashed before its first), or,
    with `judged`, no judge's verdicts, is skipped with a SkippedRun warning naming it; one
    given itself is kept, for its reader to refuse in one sentence. A folder with no usable
    run is a StoreError naming it; a path that is no folder is left for its reader."""
    found: list[Path] = []
    for path in map(Path, paths):
        if not path.is_dir() or RunStore.holds_run(path):
            found.append(path)
            continue
        inside = []
        for folder, subfolders, files in os.walk(path):
            subfolders.sort()
            if MANIFEST_FILE in files:
                inside.append(Path(folder))
                subfolders.clear()  # a run folder's superseded/ and such are its own
        if not inside:
            raise StoreError(
                f"{path} is not a run directory (no {MANIFEST_FILE}) and holds none below it."
            )
        usable = [folder for folder in inside if _usable(folder, judged)]
        if not usable:
            what = "turns and judge verdicts" if judged else "turns"
            raise StoreError(f"{path} holds no run folder with {what}; each was skipped.")
        found += usable
    return list(dict.fromkeys(found))


def _usable(folder: Path, judged: bool) -> bool:
    """Whether a run folder found inside a given one can be read; if not, a SkippedRun
    warning says why."""
    store = RunStore(folder)
    if not store.size():
        why = "it holds no turns (a run that stopped before its first)"
    elif judged and not _size(store.judge_path):
        why = f"it has no judge verdicts (`mad-eval judge {folder} --judge MODEL` adds them)"
    else:
        return True
    warnings.warn(f"{folder}: {why}.", SkippedRun, stacklevel=3)
    return False


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def _check(layout: str, fmt: str, error: str, replicates: int) -> None:
    for value, allowed, name in (
        (layout, LAYOUTS, "--layout"),
        (fmt, FORMATS, "--format"),
        (error, ERRORS, "--error"),
    ):
        if value not in allowed:
            raise TableError(f"{name} must be one of {', '.join(allowed)}, got '{value}'.")
    if replicates < MIN_REPLICATES:
        raise TableError(f"--replicates must be at least {MIN_REPLICATES}, got {replicates}.")


def make_table(
    run_dirs: Sequence[Path],
    layout: str = "debate",
    fmt: str = "md",
    labels: Labels = None,
    baseline: str | None = None,
    error: str = "std",
    replicates: int | None = None,
    out: Path | None = None,
    prices: Path | None = None,
) -> str:
    """The table's text, also written to `out` when given (never over a run's records)."""
    from mad_eval.reporting.tables import render, tidy  # pandas loads with the table

    replicates = REPLICATES if replicates is None else replicates
    _check(layout, fmt, error, replicates)
    if out is not None:
        refuse_records(out)
    names, costs = labels_of(labels), read_prices(prices)
    run_dirs = run_folders(run_dirs, judged=layout == "critique")
    if LAYOUTS.get(layout).paired:
        from mad_eval.reporting.pairing import load_paired

        runs = load_paired(list(run_dirs), names, replicates, costs)
    else:
        runs = load_runs(list(run_dirs), names, prices=costs)
    text = render(tidy(runs, layout, baseline, replicates), fmt, error)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(out, text.encode("utf-8"), "free space or give another --out.")
    return text


def make_plots(
    run_dirs: Sequence[Path],
    out: Path,
    labels: Labels = None,
    replicates: int | None = None,
    style: str = "paper",
) -> list[Path]:
    """Every figure the runs have data for, as PNG files in `out` in `style` (plots.STYLES);
    the files written."""
    from mad_eval.reporting.plots import STYLES, draw  # matplotlib loads only when plotting

    if style not in STYLES:
        raise TableError(f"--style must be one of {', '.join(STYLES)}, got '{style}'.")
    refuse_records(out)
    runs = load_runs(run_folders(run_dirs), labels_of(labels))
    return draw(runs, out, REPLICATES if replicates is None else replicates, style)
