"""The paper's figures as PNG, drawn from the same tidy frames the tables print, so a
point on a plot is a number of metrics.json: accuracy by round, transitions, diversity,
Δ by round-0 margin, drift and early stopping, each with its 95% interval. Every method
keeps one colour and marker in every figure of a call (Okabe-Ito, colour-blind safe), and
a figure of simulated agents says so."""

from __future__ import annotations

import io
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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

from mad_eval.measure.bootstrap import REPLICATES, Resampled
from mad_eval.reporting.results import Run, run_models
from mad_eval.reporting.tables import tidy_all
from mad_eval.store.files import write_atomically

PANEL = (4.2, 3.4)  # inches per benchmark panel
NARROWEST = 5.6  # inches: a one-panel figure still fits a legend of long method names
SAVED_DPI = 150
SPARE = 4  # pixels kept free at the figure's edges: a saved PNG's text measures a hair wider

STYLES = {
    "paper": "no title in the figure (each figure's caption says what it shows)",
    "notes": "each figure's title above its panels, for a PNG read on its own",
}
DEFAULT_STYLE = "paper"
# Okabe & Ito's colour-blind safe palette, the darker colours first (yellow reads poorly
# as a line on white); markers tell methods apart in grey print and where lines cross.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#000000", "#F0E442")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
DASHES = ("--", "-.", ":", (0, (5, 1, 1, 1, 1, 1)), (0, (8, 2)), (0, (1, 3)))
GREY = "dimgrey"
SIMULATED = "SIMULATED AGENTS (sim backend), not a real model"
MARK_COLOUR = PALETTE[3]


@dataclass(frozen=True)
class Look:
    """How one call's figures are drawn: the style (STYLES), the methods in the order that
    gives each its colour and marker, and those whose agents are simulated."""

    style: str = DEFAULT_STYLE
    methods: tuple[str, ...] = ()
    simulated: tuple[str, ...] = ()

    def of(self, methods: Sequence[str]) -> Look:
        """This look, knowing `methods` too (new ones after its own, in their order)."""
        return Look(self.style, tuple(dict.fromkeys([*self.methods, *methods])), self.simulated)

    def colour(self, method: str) -> str:
        return PALETTE[self.methods.index(method) % len(PALETTE)]

    def marker(self, method: str) -> str:
        return MARKERS[self.methods.index(method) % len(MARKERS)]

    def mark(self, shown: Sequence[str]) -> str:
        """The line that says the figure shows simulated agents ("" where none is)."""
        simulated = [m for m in shown if m in self.simulated]
        if not simulated:
            return ""
        return SIMULATED if len(simulated) == len(shown) else f"{SIMULATED}: {', '.join(simulated)}"


def simulated(run: Run) -> bool:
    """Whether any agent of the run is the sim backend's (a team with one is no model's)."""
    return any(model.partition(":")[0] == "sim" for model in run_models(run.manifest))


def look_of(runs: Sequence[Run], style: str = DEFAULT_STYLE) -> Look:
    """The look of the runs' figures: their labels, in order, give the colours."""
    if style not in STYLES:
        raise ValueError(f"--style must be one of {', '.join(STYLES)}, got '{style}'.")
    methods = tuple(dict.fromkeys(run.label for run in runs))
    marked = tuple(dict.fromkeys(run.label for run in runs if simulated(run)))
    return Look(style, methods, marked)


def _looked(frame: pd.DataFrame, look: Look | None) -> Look:
    return (look or Look()).of(list(dict.fromkeys(frame["method"])))


def _errors(rows: pd.DataFrame) -> list[pd.Series]:
    """The rows' 95% intervals as error bar lengths below and above each value."""
    low = (rows["value"] - rows["ci_low"]).clip(lower=0).fillna(0)
    high = (rows["ci_high"] - rows["value"]).clip(lower=0).fillna(0)
    return [low, high]


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
    look: Look,
    methods: Sequence[str],
    handles: Sequence[Artist] | None = None,
    title_size: str = "large",
) -> None:
    """The titles wrapped to the space they have and one legend below the panels, in as
    many columns as fit the figure's width; the figure grows taller by what they take, so
    the panels keep their size. The figure's title is drawn in the notes style only (a
    paper's caption says it), and a single panel's benchmark only there too; the mark of
    simulated agents in both. `methods`: those the figure shows. `handles`: the legend's
    entries (default: every labelled artist of the panels, each label once)."""
    inches = fig.get_figwidth()
    room = fig.bbox.width - 2 * (SPARE + fig.dpi * plt.rcParams["figure.constrained_layout.w_pad"])
    paper = look.style == "paper"
    for ax in axes.flat:
        panel = room / axes.shape[1] - 0.3 * fig.dpi  # less its y tick labels' share
        shown = "" if paper and axes.shape[1] == 1 else ax.get_title()
        ax.set_title(wrap(shown, panel, plt.rcParams["axes.titlesize"], fig))
    mark = look.mark(methods)
    heading = "\n".join(t for t in ("" if paper else title, mark) if t)
    renderer = _renderer(fig)
    taken = 0.0
    if heading:
        suptitle = fig.suptitle(wrap(heading, room, title_size, fig), fontsize=title_size)
        if paper:  # the mark alone: to be seen at a glance
            suptitle.set(color=MARK_COLOUR, weight="bold", fontsize="medium")
        taken = suptitle.get_window_extent(renderer).height
    handles = handles if handles is not None else _labelled(axes)
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


def rounds_figure(frame: pd.DataFrame, look: Look | None = None) -> Figure:
    """Vote accuracy after each round, a line per method (named with its scoring rule where
    that is not plurality), the 95% interval shaded."""
    look = _looked(frame, look)
    benchmarks = _benchmarks(frame)
    fig, axes = _panels(len(benchmarks))
    for ax, benchmark in zip(axes[0], benchmarks, strict=True):
        mine = frame[frame["benchmark"] == benchmark]
        for method, rows in mine.groupby("method", sort=False):
            x = rows["key"].map(lambda k: int(k.split(".")[0].removeprefix("round")))
            colour = look.colour(str(method))
            marker = look.marker(str(method))
            label = _scored(str(method), rows)
            ax.plot(x, rows["value"], marker=marker, color=colour, label=label)
            ax.fill_between(x, rows["ci_low"], rows["ci_high"], color=colour, alpha=0.15)
        ax.set_title(benchmark)
        ax.set_xlabel("debate round")
        ax.set_ylabel("vote accuracy (%)")
        ax.xaxis.get_major_locator().set_params(integer=True)
        ax.grid(alpha=0.3)
    _finish(fig, axes, CAPTIONS["rounds"], look, _methods(frame))
    return fig


def _methods(frame: pd.DataFrame) -> list[str]:
    return [str(m) for m in dict.fromkeys(frame["method"])]


def transitions_figure(frame: pd.DataFrame, look: Look | None = None) -> Figure:
    """Share of agents going correct->incorrect and incorrect->correct in each round: bars
    grouped by round, the method's colour, hatched and hollow for correct->incorrect."""
    look = _looked(frame, look)
    benchmarks = _benchmarks(frame)
    fig, axes = _panels(len(benchmarks))
    methods = _methods(frame)
    width = 0.8 / (2 * len(methods))
    for ax, benchmark in zip(axes[0], benchmarks, strict=True):
        mine = frame[(frame["benchmark"] == benchmark) & frame["metric"].isin(["C→I", "I→C"])]
        moves = list(dict.fromkeys(mine["part"]))
        for m, method in enumerate(methods):
            colour = look.colour(method)
            for d, metric in enumerate(("C→I", "I→C")):
                rows = mine[(mine["method"] == method) & (mine["metric"] == metric)]
                x = np.array([moves.index(p) for p in rows["part"]], dtype=float)
                ax.bar(
                    x - 0.4 + width * (2 * m + d + 0.5),
                    rows["value"],
                    width,
                    yerr=_errors(rows),
                    capsize=2,
                    **_direction(metric, colour),
                )
        ax.set_xticks(range(len(moves)), moves)
        ax.set_xlabel("debate round")
        ax.set_title(benchmark)
        ax.set_ylabel("agents (%)")
        ax.grid(axis="y", alpha=0.3)
    handles = [
        Patch(**_direction("C→I", GREY), label="correct → incorrect"),
        Patch(**_direction("I→C", GREY), label="incorrect → correct"),
    ]
    handles += [Patch(color=look.colour(method), label=method) for method in methods]
    _finish(fig, axes, CAPTIONS["transitions"], look, methods, handles)
    return fig


def _direction(metric: str, colour: str) -> dict[str, Any]:
    """A transition bar's look: I→C filled with the method's colour, C→I hollow and hatched."""
    if metric == "I→C":
        return {"facecolor": colour, "edgecolor": colour}
    return {"facecolor": "white", "edgecolor": colour, "hatch": "////"}


def diversity_figure(frame: pd.DataFrame, look: Look | None = None) -> Figure:
    """Effective ensemble size N_eff and the share of unanimous questions by round, the 95%
    interval shaded. N (independent voters) is drawn as a reference, not a ceiling: agents
    whose errors are negatively correlated are worth more than N, and nothing is clipped."""
    look = _looked(frame, look)
    benchmarks = _benchmarks(frame)
    fig, axes = _panels(len(benchmarks), rows=2)
    for column, benchmark in enumerate(benchmarks):
        mine = frame[frame["benchmark"] == benchmark]
        top, bottom = axes[0][column], axes[1][column]
        for method, rows in mine.groupby("method", sort=False):
            rounds = rows["part"].str.removeprefix("round ").astype(int)
            colour, marker = look.colour(str(method)), look.marker(str(method))
            for ax, metric in ((top, "N_eff"), (bottom, "unanimous")):
                picked = rows["metric"] == metric
                x, shown = rounds[picked], rows[picked]
                ax.plot(x, shown["value"], marker=marker, color=colour, label=method)
                ax.fill_between(x, shown["ci_low"], shown["ci_high"], color=colour, alpha=0.15)
        for agents in sorted({int(n) for n in mine["agents"]}):
            top.axhline(agents, color=GREY, linestyle="--", linewidth=1, label=INDEPENDENT)
        top.axhline(1, color=GREY, linestyle=":", linewidth=1, label=ALIKE)
        top.set_title(benchmark)
        top.set_ylabel("effective agents N_eff")
        bottom.set_ylabel("unanimous questions (%)")
        bottom.set_xlabel("debate round")
        for ax in (top, bottom):
            ax.xaxis.get_major_locator().set_params(integer=True)
            ax.grid(alpha=0.3)
    _finish(fig, axes, CAPTIONS["diversity"], look, _methods(frame))
    return fig


INDEPENDENT = "N independent voters (reference, not a ceiling)"
ALIKE = "1 (agents always alike)"


def _bars(
    ax: plt.Axes, rows: pd.DataFrame, parts: list[str], m: int, methods: int, colour: str
) -> None:
    """One method's bars (the m-th of `methods`) at its parts' places, with 95% intervals."""
    width = 0.8 / methods
    x = np.array([parts.index(p) for p in rows["part"]], dtype=float)
    ax.bar(
        x - 0.4 + width * (m + 0.5),
        rows["value"],
        width,
        yerr=_errors(rows),
        capsize=2,
        color=colour,
        label=rows["method"].iloc[0],
    )


def margin_figure(frame: pd.DataFrame, look: Look | None = None) -> Figure:
    """Each round-0 margin's part of Δ (the parts add up to Δ): where debate helps and
    where it hurts."""
    return _parts_figure(
        frame, "Δ part", "points of Δ", "voters right in round 0", CAPTIONS["margin"], look
    )


def drift_figure(frame: pd.DataFrame, look: Look | None = None) -> Figure:
    """The change in mean agent accuracy per round: zero for a martingale."""
    return _parts_figure(
        frame,
        "drift",
        "mean agent accuracy change (points)",
        "rounds (the last bar: the whole debate)",
        CAPTIONS["drift"],
        look,
    )


def _parts_figure(
    frame: pd.DataFrame, metric: str, ylabel: str, xlabel: str, title: str, look: Look | None
) -> Figure:
    look = _looked(frame, look)
    benchmarks = _benchmarks(frame)
    fig, axes = _panels(len(benchmarks))
    methods = _methods(frame)
    for ax, benchmark in zip(axes[0], benchmarks, strict=True):
        mine = frame[(frame["benchmark"] == benchmark) & (frame["metric"] == metric)]
        parts = list(dict.fromkeys(mine["part"]))
        for m, method in enumerate(methods):
            rows = mine[mine["method"] == method]
            if not rows.empty:
                _bars(ax, rows, parts, m, len(methods), look.colour(method))
        ax.axhline(0, color="grey", linewidth=1)
        ax.set_xticks(range(len(parts)), [p.removesuffix(" right") for p in parts])
        ax.set_title(benchmark)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.grid(axis="y", alpha=0.3)
    _finish(fig, axes, title, look, methods, title_size="medium")
    return fig


def stopping_figure(frame: pd.DataFrame, look: Look | None = None) -> Figure:
    """Accuracy against tokens per question had the debate stopped after each round (a
    line per method) or at the first unanimous round (a star), each point with its 95%
    intervals of both."""
    look = _looked(frame, look)
    benchmarks = _benchmarks(frame)
    fig, axes = _panels(len(benchmarks))
    for ax, benchmark in zip(axes[0], benchmarks, strict=True):
        mine = frame[frame["benchmark"] == benchmark]
        for method, rows in mine.groupby("method", sort=False):
            accuracy = rows[rows["metric"] == "accuracy"].set_index("part")
            tokens = rows[rows["metric"] == "tokens"].set_index("part")
            after = [p for p in accuracy.index if p.startswith("after round")]
            colour = look.colour(str(method))
            ax.errorbar(
                tokens.loc[after, "value"],
                accuracy.loc[after, "value"],
                xerr=_errors(tokens.loc[after]),
                yerr=_errors(accuracy.loc[after]),
                marker=look.marker(str(method)),
                color=colour,
                capsize=2,
                label=method,
            )
            for part in after:
                ax.annotate(
                    part.removeprefix("after round "),
                    (tokens.loc[part, "value"], accuracy.loc[part, "value"]),
                    textcoords="offset points",
                    xytext=(4, 4),
                    fontsize=8,
                )
            if "at unanimity" in accuracy.index:
                stop = ["at unanimity"]
                ax.errorbar(
                    tokens.loc[stop, "value"],
                    accuracy.loc[stop, "value"],
                    xerr=_errors(tokens.loc[stop]),
                    yerr=_errors(accuracy.loc[stop]),
                    marker="*",
                    markersize=12,
                    linestyle="none",
                    color=colour,
                    capsize=2,
                )
        ax.set_title(benchmark)
        ax.set_xlabel("tokens per question")
        ax.set_ylabel("vote accuracy (%)")
        ax.grid(alpha=0.3)
    _finish(fig, axes, CAPTIONS["stopping"], look, _methods(frame), title_size="medium")
    return fig


# What each figure shows: its title in the notes style, its caption in a paper.
CAPTIONS = {
    "rounds": "Accuracy by round (shaded: 95% bootstrap interval over questions)",
    "transitions": "Agent transitions per round (bars: 95% bootstrap interval)",
    "diversity": "Answer diversity by round (shaded: 95% bootstrap interval; dashed: N "
    "independent voters, which negatively correlated agents exceed; dotted: 1)",
    "margin": "Where debate moves the vote: Δ by round-0 margin\n"
    "(each margin's part of Δ; bars: 95% interval)",
    "drift": "Drift of mean agent accuracy\n(0: a martingale; bars: 95% interval)",
    "stopping": "Stopping early, replayed\n(after round r, numbered; at unanimity, a star; "
    "bars: 95% intervals)",
    "budget": "Accuracy against compute\n(numbers: debate rounds, bars: 95% interval; "
    "dashed: single maj@m, shaded: its 95% interval)",
}

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


def _round_errors(run: Run, rows: list[dict], replicates: int) -> list[list[float]]:
    """The debate's vote accuracy after each round of `rows`, its 95% interval over the
    questions it shares with its single run, as error bar lengths."""
    matched = next((tallies for _, tallies in run.attached.values()), run.tallies)
    tallies = run.tallies.on(matched.questions)
    resampled = Resampled(replicates)
    names = [f"round{row['round']}.vote_accuracy" for row in rows]
    asked = [resampled.interval(tallies, run.formulas[name]) for name in names]
    resampled.compute()
    low, high = [], []
    for row, ci in zip(rows, asked, strict=True):
        a, b = ci()
        value = row["vote_accuracy"]
        low.append(0.0 if a is None else max(value - a, 0.0))
        high.append(0.0 if b is None else max(b - value, 0.0))
    return [low, high]


def budget_figure(
    runs: list[Run], look: Look | None = None, replicates: int = REPLICATES
) -> Figure:
    """Vote accuracy against tokens per question: each debate run after each round (its
    metrics' `matched` section) with its 95% interval, its single run's maj@m for
    m = 1..K with its interval shaded (in its debate's colour, with its own marker and
    dashes, so a curve that another hides still shows), the Pareto front ringed."""
    look = (look or Look()).of([run.label for run in runs])
    benchmarks = list(dict.fromkeys(run.column for run in runs))
    fig, axes = _panels(len(benchmarks))
    handles: dict[str, Artist] = {}  # the legend's entries, in the order drawn
    for ax, benchmark in zip(axes[0], benchmarks, strict=True):
        points: list[tuple[float, float]] = []
        singles: dict[str, tuple[list[dict], list[str]]] = {}  # a single run's curve, its debates
        for run in (r for r in runs if r.column == benchmark):
            matched = run.metrics["matched"]
            rows = [r for r in matched["by_round"] if r["tokens"] is not None]
            x = [r["tokens"] for r in rows]
            y = [r["vote_accuracy"] for r in rows]
            label = f"{run.label} (round 0..{run.rounds})"
            handles[label] = ax.errorbar(
                x,
                y,
                yerr=_round_errors(run, rows, replicates),
                marker=look.marker(run.label),
                color=look.colour(run.label),
                capsize=2,
                label=label,
            )
            for r, xi, yi in zip(rows, x, y, strict=True):
                ax.annotate(str(r["round"]), (xi, yi), textcoords="offset points", xytext=(3, 3))
            points += list(zip(x, y, strict=True))
            curve, labels = singles.setdefault(matched["single_run"], (matched["curve"], []))
            labels.append(run.label)
        for s, (curve, labels) in enumerate(singles.values()):
            x = [p["tokens"] for p in curve]
            y = [p["accuracy"] for p in curve]
            label = f"{', '.join(labels)}: single maj@m"
            colour = look.colour(labels[0])
            smaller = 4 * s / max(len(singles), 1)  # a curve drawn over shows the one below
            (handles[label],) = ax.plot(
                x,
                y,
                linestyle=DASHES[s % len(DASHES)],
                marker=look.marker(labels[0]),
                markersize=7 - smaller,
                markerfacecolor="none",
                color=colour,
                alpha=0.8,
                label=label,
            )
            if all(p.get("accuracy_ci") for p in curve):  # recorded before it had them: none
                low, high = zip(*(p["accuracy_ci"] for p in curve), strict=True)
                ax.fill_between(x, low, high, color=colour, alpha=0.1)
            points += list(zip(x, y, strict=True))
        front = pareto(points)
        (handles["Pareto front"],) = ax.plot(
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
    methods = list(dict.fromkeys(run.label for run in runs))
    _finish(fig, axes, CAPTIONS["budget"], look, methods, list(handles.values()))
    return fig


def draw_budget(
    runs: list[Run],
    folder: Path,
    style: str = DEFAULT_STYLE,
    replicates: int = REPLICATES,
    look: Look | None = None,
) -> Path:
    """budget.png in `folder` for debate runs paired with single runs
    (mad_eval.reporting.pairing)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "budget.png"
    save(budget_figure(runs, look or look_of(runs, style), replicates), path)
    return path


def save(fig: Figure, path: Path) -> None:
    """The figure as a PNG at `path`, drawn in memory and written beside it then renamed:
    never through a link at `path`, never half a file."""
    png = io.BytesIO()
    fig.savefig(png, format="png", dpi=SAVED_DPI)
    plt.close(fig)
    write_atomically(path, png.getvalue(), "free space and run the same command again.")


def draw(
    runs: list[Run], folder: Path, replicates: int = REPLICATES, style: str = DEFAULT_STYLE
) -> list[Path]:
    """Write every figure that the runs have data for, in `style` (STYLES); return the files
    written (the budget figure where a debate run has a single run of its model and
    benchmark)."""
    from mad_eval.reporting.pairing import pair, split

    look = look_of(runs, style)
    for run in runs:
        if not run.voted:
            raise ValueError(
                f"{run.root} ran {run.benchmark}, a summary benchmark: the figures draw votes "
                "and transitions, which summaries do not have; `mad-eval table --layout rouge` "
                "gives its ROUGE by round."
            )
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    # Every figure's intervals from one draw of each run's replicates.
    frames = tidy_all(runs, [layout for layout, _ in FIGURES.values()], replicates=replicates)
    for (name, (_, make)), frame in zip(FIGURES.items(), frames, strict=True):
        frame = frame[frame["benchmark"] != "Avg"]
        if frame.empty:  # no debate round in any run: nothing moved
            continue
        path = folder / f"{name}.png"
        save(make(frame, look), path)
        written.append(path)
    debates, singles = split(runs)
    paired = pair(debates, singles, replicates, strict=False) if singles else []
    if paired:
        written.append(draw_budget(paired, folder, style, replicates, look))
    return written
