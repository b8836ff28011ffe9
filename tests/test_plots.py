"""`mad-eval plot`: the figures are written, hold the table's numbers, and no two pieces of
text overlap (titles, tick labels, axis labels, legends)."""

from __future__ import annotations

import shutil
from itertools import combinations
from pathlib import Path

import matplotlib.image
import pytest
from cli_helpers import mad_eval
from matplotlib.text import Text

import mad_eval as mad_eval_api
from mad_eval.reporting.plots import diversity_figure, rounds_figure, transitions_figure
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
