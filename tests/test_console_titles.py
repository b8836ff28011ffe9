"""A run's name above its console tables: whole on a wide console, and on a narrow one broken
only between the parts of the name, never inside one (rich cut it at the table's width)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from factories import sim_run
from rich.console import Console

from mad_eval.reporting.console import Title, fold_name, metrics_view

NAME = "arith-decentralized-n5-t2-sim_p0=0.45,skill=0.1-r3-base-checkpoint"
TITLE = f"{NAME} (mean ± std over 2 runs)"


def cut_inside_a_part(title: str, lines: list[str]) -> list[str]:
    """The places where `lines`, shown one under the other, break `title` other than after
    a '-', '_', ',', '=' or '/' or at a space."""
    cuts, at = [], 0
    for line in lines:
        line = line.rstrip()
        assert title.startswith(line, at), (title, lines)
        at += len(line)
        if at < len(title) and title[at - 1] not in "-_,=/" and title[at] != " ":
            cuts.append(f"{line} / {title[at : at + 10]}")
        while at < len(title) and title[at] == " ":
            at += 1
    assert at == len(title), (title, lines)
    return cuts


def test_a_name_folds_only_after_a_separator() -> None:
    lines = fold_name(NAME, 24)
    assert all(len(line) <= 24 for line in lines)
    assert len(lines) > 2 and not cut_inside_a_part(NAME, lines)
    assert fold_name(NAME, 200) == [NAME]
    cut = cut_inside_a_part(NAME, [NAME[:24], NAME[24:]])  # the arith-...-n5-t / 2-sim
    assert cut == ["arith-decentralized-n5-t / 2-sim_p0=0"]


def test_a_part_wider_than_the_console_alone_is_cut() -> None:
    assert fold_name("ab-" + "x" * 10, 4) == ["ab-", "xxxx", "xxxx", "xx"]


def test_a_title_on_a_narrow_console_keeps_every_part_whole() -> None:
    console = Console(width=30, record=True, color_system=None)
    console.print(Title(TITLE))
    lines = console.export_text().splitlines()
    assert len(lines) > 2 and all(len(line) <= 30 for line in lines)
    assert not cut_inside_a_part(TITLE, lines)


@pytest.mark.slow
def test_a_runs_tables_on_a_narrow_console_keep_its_name_whole(tmp_path: Path) -> None:
    run = sim_run(tmp_path / NAME, limit=4, agents=3, rounds=1, runs=2)
    metrics = json.loads((run / "metrics.json").read_text(encoding="utf-8"))
    console = Console(width=60, record=True, color_system=None)
    console.print(metrics_view(metrics, title=NAME))
    lines = console.export_text().splitlines()
    title = lines[: next(i for i, line in enumerate(lines) if line.startswith("┏"))]
    assert len(title) == 2 and not cut_inside_a_part(TITLE, title), lines
