"""Every figure `mad-eval plot` and an experiment draw fits its canvas: with 1, 2 and 4
benchmarks and 1, 3 and 6 methods with long names, in either style, marked as simulated or
not, no text reaches past the figure's edge, the legend names every method in full, and
titles, axis labels and the legend do not overlap one another."""

from __future__ import annotations

import dataclasses
from itertools import combinations

import matplotlib.pyplot as plt
import pandas as pd
import pytest
from factories import sim_run
from matplotlib.figure import Figure
from matplotlib.font_manager import FontProperties
from matplotlib.text import Text
from test_plots import drawn_texts

import mad_eval as api
from mad_eval.reporting.pairing import pair
from mad_eval.reporting.plots import (
    ALIKE,
    FIGURES,
    INDEPENDENT,
    SAVED_DPI,
    STYLES,
    Look,
    budget_figure,
    wrap,
)
from mad_eval.reporting.results import Run, load_run
from mad_eval.reporting.tables import tidy

LONG = [
    "centralized (hub scores) Qwen3-4B-Base-SDRL-step200",
    "decentralized Qwen3-4B-Base-DAPO-step1200-lr1e-6-kl0.001",
    "SDRL",
    "sparse (ring of 2 neighbours) Llama-3.1-8B-Instruct",
    "reflection",
    "a_run_folder_named_without_spaces_long_enough_to_wrap",
]
BENCHMARKS = ["Arith", "MATH500", "GSM8K (platinum, 1,209 questions)", "AIME 2024"]
GROUPS = ["", "N=3", "N=7 (sparse ring, 2 neighbours)", "T=5"]  # budget's column groups
# Four benchmarks' figures take longest to draw: the slow lane's.
CASES = [
    pytest.param(b, m, marks=[pytest.mark.slow] if b == 4 else [])
    for b in (1, 2, 4)
    for m in (1, 3, 6)
]
TYPES = [*FIGURES, "budget"]


@pytest.fixture(scope="module")
def debate(tmp_path_factory) -> Run:
    """A simulated 5-agent debate of 3 rounds, paired with a single run of 20 samples."""
    root = tmp_path_factory.mktemp("figures")
    sim_run(root / "debate", "sim:p0=0.5,skill=0.5", limit=16, agents=5, rounds=3)
    api.single(
        model="sim:p0=0.5,skill=0.5", benchmark="arith", limit=16, samples=20, out=root / "single"
    )
    run = load_run(root / "debate")
    pair([run], [load_run(root / "single")], replicates=50)
    return run


def frame_of(debate: Run, layout: str, benchmarks: int, methods: int) -> pd.DataFrame:
    """The run's tidy frame, copied to each benchmark x method, the values moved apart a
    little so lines and bars do not coincide."""
    one = tidy([debate], layout, replicates=50)
    one = one[one["benchmark"] != "Avg"]
    copies = []
    for b in range(benchmarks):
        for m in range(methods):
            copy = one.assign(benchmark=BENCHMARKS[b], method=LONG[m])
            for column in ("value", "ci_low", "ci_high"):
                copy[column] = copy[column] + m - b
            copies.append(copy)
    return pd.concat(copies, ignore_index=True)


def budget_runs(debate: Run, benchmarks: int, methods: int) -> list[Run]:
    """The paired run as each benchmark (a column group of arith) x method, each with its
    own single run, moved apart a little."""
    runs = []
    for b in range(benchmarks):
        for m in range(methods):
            matched = debate.metrics["matched"]
            matched = dict(
                matched,
                single_run=f"/x/{LONG[m]}-single-k20",
                by_round=[
                    dict(r, vote_accuracy=r["vote_accuracy"] + m) for r in matched["by_round"]
                ],
                curve=[dict(p, accuracy=p["accuracy"] + m) for p in matched["curve"]],
            )
            metrics = dict(debate.metrics, matched=matched)
            group = GROUPS[b]
            runs.append(dataclasses.replace(debate, label=LONG[m], group=group, metrics=metrics))
    return runs


def draw(debate: Run, kind: str, benchmarks: int, methods: int, look: Look | None = None) -> Figure:
    if kind == "budget":
        return budget_figure(budget_runs(debate, benchmarks, methods), look, replicates=50)
    layout, make = FIGURES[kind]
    return make(frame_of(debate, layout, benchmarks, methods), look)


def flat(text: str) -> str:
    """A label as a reader reads it, whatever lines it was wrapped into."""
    return "".join(text.split())


def legend_labels(fig: Figure) -> list[str]:
    (legend,) = fig.legends
    return [flat(t.get_text()) for t in legend.get_texts()]


@pytest.mark.slow
@pytest.mark.parametrize("kind", TYPES)
@pytest.mark.parametrize("benchmarks, methods", CASES)
def test_every_text_inside_the_figure_and_every_method_in_the_legend(
    debate, kind, benchmarks, methods
):
    check(debate, kind, benchmarks, methods, dpi=72)  # small and quick: the layout is in inches


@pytest.mark.slow
@pytest.mark.parametrize("style", STYLES)
@pytest.mark.parametrize("kind", TYPES)
def test_the_saved_resolution_fits_too(debate, kind, style):
    """At the dpi the files are written with, where text measures a hair wider; in each
    style, the mark of simulated agents naming some of the methods."""
    look = Look(style, simulated=tuple(LONG[:2]))
    check(debate, kind, 1, 6, dpi=SAVED_DPI, look=look)


def check(
    debate: Run, kind: str, benchmarks: int, methods: int, dpi: int, look: Look | None = None
) -> None:
    fig = draw(debate, kind, benchmarks, methods, look)
    try:
        fig.set_dpi(dpi)
        texts = drawn_texts(fig)  # drawn once, at this dpi
        renderer = fig.canvas.get_renderer()
        edge = fig.bbox.padded(1)  # a pixel of anti-aliasing
        boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in texts]
        outside = [
            (text, tuple(box.extents.round()))
            for text, box in boxes
            if not (edge.contains(*box.min) and edge.contains(*box.max))
        ]
        assert outside == [], f"text past the edge of {tuple(fig.bbox.extents)}"
        names = [flat(name) for name in LONG[:methods]]
        labels = legend_labels(fig)
        if kind == "transitions":
            assert labels == ["correct→incorrect", "incorrect→correct", *names]
        elif kind == "budget":
            rounds = f"(round0..{debate.rounds})"
            singles = [flat(f"{n}: single maj@m") for n in LONG[:methods]]
            assert labels == [n + rounds for n in names] + singles + ["Paretofront"]
        elif kind == "diversity":
            assert labels == [*names, flat(INDEPENDENT), flat(ALIKE)]
        else:
            assert labels == names
        assert overlapping(fig, texts, renderer) == []
    finally:
        plt.close(fig)


def overlapping(fig: Figure, texts: list[Text], renderer) -> list[tuple[str, str]]:
    """Pairs of the figure's texts that overlap, but for a panel's own annotations (a
    point's round number may touch another line's): titles, axis and tick labels, and the
    legend (as one box)."""
    notes = {id(t) for ax in fig.axes for t in ax.texts}
    legends = {id(t) for legend in fig.legends for t in legend.findobj(Text)}
    boxes = [("legend", legend.get_window_extent(renderer)) for legend in fig.legends]
    boxes += [
        (t.get_text(), t.get_window_extent(renderer))
        for t in texts
        if id(t) not in notes and id(t) not in legends
    ]
    return [(a, b) for (a, one), (b, other) in combinations(boxes, 2) if one.overlaps(other)]


def test_a_long_name_wraps_after_its_hyphens_within_the_width_and_keeps_every_character():
    fig = plt.figure(figsize=(3, 2))
    try:
        renderer = fig.canvas.get_renderer()
        font = FontProperties(size="medium")
        name = "Qwen3-4B-Base-SDRL-step200"
        lines = wrap(name, 60, "medium", fig).splitlines()
        assert len(lines) > 1 and "".join(lines) == name
        assert all(line.endswith("-") for line in lines[:-1])
        widths = [renderer.get_text_width_height_descent(x, font, ismath=False)[0] for x in lines]
        assert max(widths) <= 60
        assert wrap("a short one", 1000, "medium", fig) == "a short one"
    finally:
        plt.close(fig)


def columns(fig: Figure) -> int:
    """How many columns the figure's legend lays its entries out in."""
    (legend,) = fig.legends
    renderer = fig.canvas.get_renderer()
    return len({round(t.get_window_extent(renderer).x0) for t in legend.get_texts()})


@pytest.mark.slow
def test_the_legend_takes_as_many_columns_as_fit(debate):
    """The demo's short names side by side in one row; long ones in fewer columns."""
    frame = frame_of(debate, "rounds", 1, 3)
    short = FIGURES["rounds"][1](
        frame.replace({"method": dict(zip(LONG[:3], ["Base", "DAPO", "SDRL"], strict=True))})
    )
    long = draw(debate, "rounds", 1, 6)
    try:
        short.canvas.draw()
        long.canvas.draw()
        assert columns(short) == 3
        assert 1 <= columns(long) < 6
    finally:
        plt.close(short)
        plt.close(long)
