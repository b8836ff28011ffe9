"""The paper's figures as PNG, drawn from the same tidy frames the tables print, so a
point on a plot is a number of metrics.json: accuracy by round, transitions, diversity,
Δ by round-0 margin, drift and early stopping."""

from __future__ import annotations

import io
import re
from collections.abc import Callable, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only: no display needed, none opened

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.artist import Artist
from matplotlib.backends.backend_agg import FigureCanvasAgg, RendererAgg
from matplotlib.figure import Figure
from matplotlib.font_manager import FontProperties
from matplotlib.legend import Legend
from matplotlib.patches import Patch
from matplotlib.ticker import NullFormatter

from mad_eval.measure.bootstrap import REPLICATES
from mad_eval.reporting.results import Run
from mad_eval.reporting.tables import tidy
from mad_eval.store.files import write_atomically

PANEL = (4.2, 3.4)  # inches per benchmark panel
NARROWEST = 5.6  # inches: a one-panel figure still fits a legend of long method names
C2I, I2C = "#c0392b", "#27ae60"
HATCHES = ("", "//", "..", "xx", "\\\\", "oo")
SAVED_DPI = 150
SPARE = 4  # pixels kept free at the figure's edges: a saved PNG's text measures a hair wider


def _panels(count: int, rows: int = 1) -> tuple[Figure, np.ndarray]:
    fig, axes = plt.subplots(
        rows,
        count,
        figsize=(max(PANEL[0] * count, NARROWEST), PANEL[1] * rows),
        squeeze=False,
        layout="constrained",
    )
    return fig, axes


def _benchmarks(frame: pd.DataFrame) -> list[str]:
    return [b for b in dict.fromkeys(frame["benchmark"]) if b != "Avg"]


def _renderer(fig: Figure) -> RendererAgg:
    """What measures text in `fig`: Agg's renderer, as every figure here is drawn by Agg."""
    assert isinstance(fig.canvas, FigureCanvasAgg)
    return fig.canvas.get_renderer()


def wrap(text: str, pixels: float, size: str | float, fig: Figure, even: bool = True) -> str:
    """`text` broken into lines no wider than `pixels` at font size `size` (`even`: of even
    widths, no last word alone): at spaces, and inside a long name after a hyphen,
    underscore or slash; its own line breaks kept."""
    renderer = _renderer(fig)
    font = FontProperties(size=size)

    def width(line: str) -> float:
        return renderer.get_text_width_height_descent(line, font, ismath=False)[0]

    lines = []
    for paragraph in text.split("\n"):
        pieces = _pieces(paragraph)
        greedy = _lines(pieces, pixels, width)
        narrow, wide = 0.0, pixels  # the narrowest width that needs no more lines
        while even and len(greedy) > 1 and wide - narrow > 2:
            middle = (narrow + wide) / 2
            narrow, wide = (
                (narrow, middle)
                if len(_lines(pieces, middle, width)) == len(greedy)
                else (middle, wide)
            )
        lines += _lines(pieces, wide, width)
    return "\n".join(lines)


def _lines(
    pieces: list[tuple[str, str]], pixels: float, width: Callable[[str], float]
) -> list[str]:
    """The pieces filled greedily into lines of at most `pixels` (a piece wider alone
    takes a line of its own)."""
    lines, line = [], ""
    for gap, piece in pieces:
        longer = line + gap + piece
        if line and width(longer) > pixels:
            lines.append(line)
            line = piece
        else:
            line = longer
    return [*lines, line]


def _pieces(paragraph: str) -> list[tuple[str, str]]:
    """The places a line may break: (what goes before the piece on one line, the piece)."""
    pieces = []
    for w, word in enumerate(paragraph.split(" ")):
        parts = re.findall(r"[^-_/]*[-_/]+|[^-_/]+$", word) or [word]
        pieces += [(" " if w and not p else "", part) for p, part in enumerate(parts)]
    return pieces


def _finish(
    fig: Figure,
    axes: np.ndarray,
    title: str,
    handles: Sequence[Artist] | None = None,
    title_size: str = "large",
) -> None:
    """The titles wrapped to the space they have and one legend below the panels, in as
    many columns as fit the figure's width; the figure grows taller by what they take, so
    the panels keep their size. `handles`: the legend's entries (default: every labelled
    artist of the panels, each label once)."""
    inches = fig.get_figwidth()
    room = fig.bbox.width - 2 * (SPARE + fig.dpi * plt.rcParams["figure.constrained_layout.w_pad"])
    for ax in axes.flat:
        panel = room / axes.shape[1] - 0.3 * fig.dpi  # less its y tick labels' share
        ax.set_title(wrap(ax.get_title(), panel, plt.rcParams["axes.titlesize"], fig))
    suptitle = fig.suptitle(wrap(title, room, title_size, fig), fontsize=title_size)
    handles = handles if handles is not None else _labelled(axes)
    renderer = _renderer(fig)
    taken = suptitle.get_window_extent(renderer).height
    if handles:
        taken += _fitting_legend(fig, handles, room).get_window_extent(renderer).height
    fig.set_size_inches(inches, fig.get_figheight() + taken / fig.dpi + 0.25)


def _labelled(axes: np.ndarray) -> list[Artist]:
    """Each label of the panels' artists once, with the first artist that carries it."""
    handles: dict[str, Artist] = {}
    for ax in axes.flat:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            handles.setdefault(label, handle)
    return list(handles.values())


def _fitting_legend(fig: Figure, handles: Sequence[Artist], room: float) -> Legend:
    """A legend below the panels with every entry's full label (wrapped if one alone is too
    wide), in the most columns that fit `room` pixels, balanced over its rows."""
    size = plt.rcParams["legend.fontsize"]
    em = FontProperties(size=size).get_size_in_points() * fig.dpi / 72
    labels = [wrap(str(h.get_label()), room - 5 * em, size, fig, even=False) for h in handles]
    renderer = _renderer(fig)
    columns = len(handles)
    while True:
        rows = -(-len(handles) // columns)
        columns = -(-len(handles) // rows)  # as few as fill those rows: 3 + 2, not 4 + 1
        legend = fig.legend(
            handles, labels, loc="outside lower center", ncols=columns, frameon=False
        )
        if columns == 1 or legend.get_window_extent(renderer).width <= room:
            return legend
        legend.remove()
        columns -= 1


def _scored(method: str, rows: pd.DataFrame) -> str:
    """The method, with the scoring rule of its votes where that is not plurality."""
    rules = [r for r in dict.fromkeys(rows["score"].dropna()) if r != "plurality"]
    return f"{method} ({', '.join(f'score={r}' for r in rules)})" if rules else method


def rounds_figure(frame: pd.DataFrame) -> Figure:
    """Vote accuracy after each round, a line per method (named with its scoring rule where
    that is not plurality), the 95% interval shaded."""
    benchmarks = _benchmarks(frame)
    fig, axes = _panels(len(benchmarks))
    for ax, benchmark in zip(axes[0], benchmarks, strict=True):
        mine = frame[frame["benchmark"] == benchmark]
        for method, rows in mine.groupby("method", sort=False):
            x = rows["key"].map(lambda k: int(k.split(".")[0].removeprefix("round")))
            ax.plot(x, rows["value"], marker="o", label=_scored(str(method), rows))
            ax.fill_between(x, rows["ci_low"], rows["ci_high"], alpha=0.15)
        ax.set_title(benchmark)
        ax.set_xlabel("debate round")
        ax.set_ylabel("vote accuracy (%)")
        ax.xaxis.get_major_locator().set_params(integer=True)
        ax.grid(alpha=0.3)
    _finish(fig, axes, "Accuracy by round (shaded: 95% bootstrap interval over questions)")
    return fig


def transitions_figure(frame: pd.DataFrame) -> Figure:
    """Share of agents going correct->incorrect and incorrect->correct in each round: bars
    grouped by round, colour for the direction, hatching for the method."""
    benchmarks = _benchmarks(frame)
    fig, axes = _panels(len(benchmarks))
    methods = list(dict.fromkeys(frame["method"]))
    width = 0.8 / (2 * len(methods))
    for ax, benchmark in zip(axes[0], benchmarks, strict=True):
        mine = frame[(frame["benchmark"] == benchmark) & frame["metric"].isin(["C→I", "I→C"])]
        moves = list(dict.fromkeys(mine["part"]))
        for m, method in enumerate(methods):
            for d, (metric, color) in enumerate((("C→I", C2I), ("I→C", I2C))):
                rows = mine[(mine["method"] == method) & (mine["metric"] == metric)]
                x = np.array([moves.index(p) for p in rows["part"]], dtype=float)
                low = (rows["value"] - rows["ci_low"]).clip(lower=0)
                high = (rows["ci_high"] - rows["value"]).clip(lower=0)
                ax.bar(
                    x - 0.4 + width * (2 * m + d + 0.5),
                    rows["value"],
                    width,
                    yerr=[low, high],
                    capsize=2,
                    color=color,
                    hatch=HATCHES[m % len(HATCHES)],
                    edgecolor="white",
                )
        ax.set_xticks(range(len(moves)), moves)
        ax.set_xlabel("debate round")
        ax.set_title(benchmark)
        ax.set_ylabel("agents (%)")
        ax.grid(axis="y", alpha=0.3)
    handles = [
        Patch(color=C2I, label="correct → incorrect"),
        Patch(color=I2C, label="incorrect → correct"),
    ]
    handles += [
        Patch(facecolor="grey", hatch=HATCHES[m % len(HATCHES)], edgecolor="white", label=method)
        for m, method in enumerate(methods)
    ]
    _finish(fig, axes, "Agent transitions per round (bars: 95% bootstrap interval)", handles)
    return fig


def diversity_figure(frame: pd.DataFrame) -> Figure:
    """Effective ensemble size N_eff and the share of unanimous questions by round."""
    benchmarks = _benchmarks(frame)
    fig, axes = _panels(len(benchmarks), rows=2)
    for column, benchmark in enumerate(benchmarks):
        mine = frame[frame["benchmark"] == benchmark]
        top, bottom = axes[0][column], axes[1][column]
        for method, rows in mine.groupby("method", sort=False):
            rounds = rows["part"].str.removeprefix("round ").astype(int)
            for ax, metric in ((top, "N_eff"), (bottom, "unanimous")):
                picked = rows["metric"] == metric
                ax.plot(rounds[picked], rows.loc[picked, "value"], marker="o", label=method)
        agents = int(mine["agents"].max())
        top.axhline(agents, color="grey", linestyle=":", linewidth=1)
        top.axhline(1, color="grey", linestyle=":", linewidth=1)
        top.set_title(benchmark)
        top.set_ylabel("effective agents N_eff")
        bottom.set_ylabel("unanimous questions (%)")
        bottom.set_xlabel("debate round")
        for ax in (top, bottom):
            ax.xaxis.get_major_locator().set_params(integer=True)
            ax.grid(alpha=0.3)
    _finish(fig, axes, "Answer diversity by round (dotted: N_eff = N and N_eff = 1)")
    return fig


def _bars(ax: plt.Axes, rows: pd.DataFrame, parts: list[str], m: int, methods: int) -> None:
    """One method's bars (the m-th of `methods`) at its parts' places, with 95% intervals."""
    width = 0.8 / methods
    x = np.array([parts.index(p) for p in rows["part"]], dtype=float)
    low = (rows["value"] - rows["ci_low"]).clip(lower=0)
    high = (rows["ci_high"] - rows["value"]).clip(lower=0)
    ax.bar(
        x - 0.4 + width * (m + 0.5),
        rows["value"],
        width,
        yerr=[low.fillna(0), high.fillna(0)],
        capsize=2,
        label=rows["method"].iloc[0],
    )


def margin_figure(frame: pd.DataFrame) -> Figure:
    """Each round-0 margin's part of Δ (the parts add up to Δ): where debate helps and
    where it hurts."""
    return _parts_figure(
        frame,
        "Δ part",
        "points of Δ",
        "voters right in round 0",
        "Where debate moves the vote: Δ by round-0 margin\n"
        "(each margin's part of Δ; bars: 95% interval)",
    )


def drift_figure(frame: pd.DataFrame) -> Figure:
    """The change in mean agent accuracy per round: zero for a martingale."""
    return _parts_figure(
        frame,
        "drift",
        "mean agent accuracy change (points)",
        "rounds (the last bar: the whole debate)",
        "Drift of mean agent accuracy\n(0: a martingale; bars: 95% interval)",
    )


def _parts_figure(frame: pd.DataFrame, metric: str, ylabel: str, xlabel: str, title: str) -> Figure:
    benchmarks = _benchmarks(frame)
    fig, axes = _panels(len(benchmarks))
    methods = list(dict.fromkeys(frame["method"]))
    for ax, benchmark in zip(axes[0], benchmarks, strict=True):
        mine = frame[(frame["benchmark"] == benchmark) & (frame["metric"] == metric)]
        parts = list(dict.fromkeys(mine["part"]))
        for m, method in enumerate(methods):
            rows = mine[mine["method"] == method]
            if not rows.empty:
                _bars(ax, rows, parts, m, len(methods))
        ax.axhline(0, color="grey", linewidth=1)
        ax.set_xticks(range(len(parts)), [p.removesuffix(" right") for p in parts])
        ax.set_title(benchmark)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.grid(axis="y", alpha=0.3)
    _finish(fig, axes, title, title_size="medium")
    return fig


def stopping_figure(frame: pd.DataFrame) -> Figure:
    """Accuracy against tokens per question had the debate stopped after each round (a
    line per method) or at the first unanimous round (a star)."""
    benchmarks = _benchmarks(frame)
    fig, axes = _panels(len(benchmarks))
    for ax, benchmark in zip(axes[0], benchmarks, strict=True):
        mine = frame[frame["benchmark"] == benchmark]
        for method, rows in mine.groupby("method", sort=False):
            accuracy = rows[rows["metric"] == "accuracy"].set_index("part")["value"]
            tokens = rows[rows["metric"] == "tokens"].set_index("part")["value"]
            after = [p for p in accuracy.index if p.startswith("after round")]
            (line,) = ax.plot(tokens[after], accuracy[after], marker="o", label=method)
            for part in after:
                ax.annotate(
                    part.removeprefix("after round "),
                    (tokens[part], accuracy[part]),
                    textcoords="offset points",
                    xytext=(4, 4),
                    fontsize=8,
                )
            if "at unanimity" in accuracy.index:
                ax.plot(
                    tokens["at unanimity"],
                    accuracy["at unanimity"],
                    marker="*",
                    markersize=12,
                    linestyle="none",
                    color=line.get_color(),
                )
        ax.set_title(benchmark)
        ax.set_xlabel("tokens per question")
        ax.set_ylabel("vote accuracy (%)")
        ax.grid(alpha=0.3)
    _finish(
        fig,
        axes,
        "Stopping early, replayed\n(after round r, numbered; at unanimity, a star)",
        title_size="medium",
    )
    return fig


FIGURES = {
    "rounds": ("rounds", rounds_figure),
    "transitions": ("transitions", transitions_figure),
    "diversity": ("diversity", diversity_figure),
    "margin": ("margin", margin_figure),
    "drift": ("drift", drift_figure),
    "stopping": ("stopping", stopping_figure),
}


def pareto(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The points no other beats on both sides (as few tokens, as high an accuracy), by
    tokens: each is more accurate than every point that costs no more."""
    front: list[tuple[float, float]] = []
    for tokens, accuracy in sorted(points, key=lambda p: (p[0], -p[1])):
        if not front or accuracy > front[-1][1]:
            front.append((tokens, accuracy))
    return front


def budget_figure(runs: list[Run]) -> Figure:
    """Vote accuracy against tokens per question: each debate run after each round (its
    metrics' `matched` section), its single run's maj@m for m = 1..K, the Pareto front
    ringed."""
    benchmarks = list(dict.fromkeys(run.column for run in runs))
    fig, axes = _panels(len(benchmarks))
    for ax, benchmark in zip(axes[0], benchmarks, strict=True):
        points: list[tuple[float, float]] = []
        singles: dict[str, tuple[list[dict], str]] = {}  # its curve, drawn in its debate's colour
        for run in (r for r in runs if r.column == benchmark):
            matched = run.metrics["matched"]
            rows = [r for r in matched["by_round"] if r["tokens"] is not None]
            x = [r["tokens"] for r in rows]
            y = [r["vote_accuracy"] for r in rows]
            (line,) = ax.plot(x, y, marker="o", label=f"{run.label} (round 0..{run.rounds})")
            for r, xi, yi in zip(rows, x, y, strict=True):
                ax.annotate(str(r["round"]), (xi, yi), textcoords="offset points", xytext=(3, 3))
            points += list(zip(x, y, strict=True))
            name = Path(matched["single_run"]).name
            singles.setdefault(name, (matched["curve"], line.get_color()))
        for name, (curve, color) in singles.items():
            x = [p["tokens"] for p in curve]
            y = [p["accuracy"] for p in curve]
            ax.plot(
                x, y, linestyle="--", marker=".", color=color, alpha=0.6, label=f"{name}: maj@m"
            )
            points += list(zip(x, y, strict=True))
        front = pareto(points)
        ax.plot(
            *zip(*front, strict=True),
            linestyle="none",
            marker="o",
            markersize=11,
            markerfacecolor="none",
            markeredgecolor="black",
            label="Pareto front",
        )
        ax.set_xscale("log")
        ax.xaxis.set_minor_formatter(NullFormatter())  # a log axis's minor labels overlap
        ax.set_title(benchmark)
        ax.set_xlabel("tokens per question (prompt + completion)")
        ax.set_ylabel("vote accuracy (%)")
        ax.grid(alpha=0.3)
    _finish(fig, axes, "Accuracy against compute\n(numbers: debate rounds; dashed: single maj@m)")
    return fig


def draw_budget(runs: list[Run], folder: Path) -> Path:
    """budget.png in `folder` for debate runs paired with single runs
    (mad_eval.reporting.pairing)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "budget.png"
    save(budget_figure(runs), path)
    return path


def save(fig: Figure, path: Path) -> None:
    """The figure as a PNG at `path`, drawn in memory and written beside it then renamed:
    never through a link at `path`, never half a file."""
    png = io.BytesIO()
    fig.savefig(png, format="png", dpi=SAVED_DPI)
    plt.close(fig)
    write_atomically(path, png.getvalue(), "free space and run the same command again.")


def draw(runs: list[Run], folder: Path, replicates: int = REPLICATES) -> list[Path]:
    """Write every figure that the runs have data for; return the files written (the
    budget figure where a debate run has a single run of its model and benchmark)."""
    from mad_eval.reporting.pairing import pair, split

    for run in runs:
        if not run.voted:
            raise ValueError(
                f"{run.root} ran {run.benchmark}, a summary benchmark: the figures draw votes "
                "and transitions, which summaries do not have; `mad-eval table --layout rouge` "
                "gives its ROUGE by round."
            )
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, (layout, make) in FIGURES.items():
        frame = tidy(runs, layout, replicates=replicates)
        frame = frame[frame["benchmark"] != "Avg"]
        if frame.empty:  # no debate round in any run: nothing moved
            continue
        path = folder / f"{name}.png"
        save(make(frame), path)
        written.append(path)
    debates, singles = split(runs)
    paired = pair(debates, singles, replicates, strict=False) if singles else []
    if paired:
        written.append(draw_budget(paired, folder))
    return written
