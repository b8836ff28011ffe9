"""`mad-eval plot`: the figures are written, hold the table's numbers, and no two pieces of
text overlap (titles, tick labels, axis labels, legends)."""

from __future__ import annotations

import shutil
from itertools import combinations
from pathlib import Path

import matplotlib.image
import matplotlib.pyplot as plt
import pandas as pd
import pytest
from cli_helpers import mad_eval
from factories import sim_run
from matplotlib.text import Text

import mad_eval as mad_eval_api
from mad_eval.cli.options import OPTIONS
from mad_eval.reporting.plots import (
    INDEPENDENT,
    SIMULATED,
    STYLES,
    Look,
    diversity_figure,
    look_of,
    rounds_figure,
    transitions_figure,
)
from mad_eval.reporting.results import load_runs
from mad_eval.reporting.tables import tidy

GOLDEN = Path(__file__).parent / "golden" / "tables"


@pytest.fixture
def runs(tmp_path: Path) -> list[Path]:
    folders = []
    for name in ("alpha", "beta"):
        shutil.copytree(GOLDEN / name, tmp_path / name)
        folders.append(tmp_path / name)
    return folders


@pytest.mark.slow
def test_plot_writes_three_readable_pngs(runs, tmp_path):
    written = mad_eval_api.plot(runs, tmp_path / "figs", replicates=200)
    for name in ("rounds", "transitions", "diversity"):
        path = tmp_path / "figs" / f"{name}.png"
        assert path in written
        height, width, _ = matplotlib.image.imread(path).shape
        assert width >= 600 and height >= 450


def drawn_texts(fig) -> list[Text]:
    """Every piece of text the figure shows: tick labels only of ticks inside the view
    (matplotlib keeps hidden ones for ticks past the axis limits), and all other text."""
    fig.canvas.draw()
    ticks, shown = set(), []
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            every = axis.get_major_ticks() + axis.get_minor_ticks()
            ticks |= {id(label) for tick in every for label in (tick.label1, tick.label2)}
            drawn = axis._update_ticks()  # the ticks inside the view limits
            shown += [label for tick in drawn for label in (tick.label1, tick.label2)]
    shown += [t for t in fig.findobj(Text) if id(t) not in ticks]
    return [t for t in shown if t.get_visible() and t.get_text().strip()]


def overlaps(fig) -> list[tuple[str, str]]:
    renderer = fig.canvas.get_renderer()
    boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in drawn_texts(fig)]
    return [(a, b) for (a, box_a), (b, box_b) in combinations(boxes, 2) if box_a.overlaps(box_b)]


@pytest.mark.slow
@pytest.mark.parametrize(
    "layout, draw",
    [
        ("rounds", rounds_figure),
        ("transitions", transitions_figure),
        ("diversity", diversity_figure),
    ],
)
def test_no_text_overlaps_and_points_are_the_tables(runs, layout, draw):
    frame = tidy(load_runs(runs), layout, replicates=200)
    fig = draw(frame[frame["benchmark"] != "Avg"])
    assert overlaps(fig) == []
    assert fig.legends, "every figure has a legend"
    if layout == "rounds":
        (ax,) = fig.axes
        lines = {line.get_label(): list(line.get_ydata()) for line in ax.get_lines()}
        assert lines["alpha"] == pytest.approx([200 / 3, 100 / 3])
        assert lines["beta"] == pytest.approx([200 / 3, 100.0])
        assert ax.get_xlabel() == "debate round" and ax.get_ylabel() == "vote accuracy (%)"


def test_plot_of_a_folder_that_is_no_run_is_one_sentence(tmp_path):
    result = mad_eval("plot", "missing", cwd=tmp_path)
    assert result.returncode == 2
    assert "missing is not a run directory" in result.stderr


@pytest.mark.slow
def test_n_eff_above_n_is_drawn_as_it_is_with_n_as_a_labelled_reference():
    """A team whose errors are negatively correlated (tests/test_metrics.py's, N = 3,
    N_eff = 4.5): the point and its interval stand above the dashed N line, which is named
    as the independent voters' reference, not clipped to it."""
    rows = [
        ("round 0", "N_eff", 4.5, 3.2, 9.0),
        ("round 1", "N_eff", 3.6, 2.5, 6.0),
        ("round 0", "unanimous", 1 / 7 * 100, 0.0, 42.9),
        ("round 1", "unanimous", 2 / 7 * 100, 0.0, 57.1),
    ]
    frame = pd.DataFrame(
        [
            {"method": "team", "benchmark": "Arith", "part": part, "metric": metric}
            | {"value": value, "ci_low": low, "ci_high": high, "agents": 3}
            for part, metric, value, low, high in rows
        ]
    )
    fig = diversity_figure(frame)
    try:
        top = fig.axes[0]
        lines = {line.get_label(): line for line in top.get_lines()}
        assert list(lines["team"].get_ydata()) == [4.5, 3.6]
        assert list(lines[INDEPENDENT].get_ydata()) == [3, 3]
        assert top.get_ylim()[1] >= 9.0  # the whole interval shows
        assert overlaps(fig) == []
    finally:
        plt.close(fig)


@pytest.mark.slow
def test_the_paper_style_has_no_title_and_notes_has_it(runs):
    frame = tidy(load_runs(runs), "rounds", replicates=200)
    frame = frame[frame["benchmark"] != "Avg"]
    paper, notes = rounds_figure(frame, Look("paper")), rounds_figure(frame, Look("notes"))
    try:
        assert paper.get_suptitle() == "" and paper.axes[0].get_title() == ""
        assert notes.get_suptitle().startswith("Accuracy by round")
        assert notes.axes[0].get_title() == "Golden"  # the benchmark
        colours = [line.get_color() for line in paper.axes[0].get_lines()]
        assert colours == [line.get_color() for line in notes.axes[0].get_lines()]
        assert len(set(colours)) == 2
    finally:
        plt.close(paper)
        plt.close(notes)


def test_the_style_option_names_the_styles_and_refuses_another(runs, tmp_path):
    assert OPTIONS["style"].info.metavar == "|".join(STYLES)
    result = mad_eval("plot", *map(str, runs), "--style", "poster", cwd=tmp_path)
    assert result.returncode == 2
    assert "--style must be one of paper, notes, got 'poster'." in result.stderr


@pytest.mark.slow
def test_figures_of_simulated_agents_say_so_and_name_them_among_others(runs, tmp_path):
    sim = sim_run(tmp_path / "sim", limit=4, agents=3, rounds=1)
    loaded = load_runs([sim, runs[0]])
    look = look_of(loaded)
    assert look.simulated == (loaded[0].label,)
    frame = tidy(loaded, "rounds", replicates=200)
    both, real = rounds_figure(frame, look), rounds_figure(frame[frame["method"] == "alpha"], look)
    try:
        assert both.get_suptitle() == f"{SIMULATED}: {loaded[0].label}"
        assert real.get_suptitle() == ""
    finally:
        plt.close(both)
        plt.close(real)
