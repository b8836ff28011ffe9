"""Output off a terminal (nohup, Slurm, a pipe): tables keep their full names instead of
rich's 80 columns, and progress shows as plain lines a log can keep."""

from __future__ import annotations

import textwrap
import threading
from collections import Counter

import pytest
from cli_helpers import mad_eval
from rich.table import Table

from mad_eval.cli import ui
from mad_eval.cli.progress_log import ProgressLog, ticking
from mad_eval.progress import asked_again, pace

LONG = "arith-decentralized-n5-t2-a-checkpoint-with-a-very-long-name-step-12000-final"


def test_a_table_off_a_terminal_keeps_its_long_labels(capsys, monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    table = Table(title="runs")
    for column in ("run", "questions", "Maj", "Debate", "Δ", "mean@K", "maj@K"):
        table.add_column(column)
    for suffix in ("Base", "DAPO", "SDRL"):
        table.add_row(f"{LONG}-{suffix}", "100", "52.5", "58.5", "6.0", "", "")
    ui.console.print(table)
    ui.console.print("x " * 100)
    out = capsys.readouterr().out
    assert not ui.console.is_terminal
    for suffix in ("Base", "DAPO", "SDRL"):
        assert f"{LONG}-{suffix}" in out
    assert "…" not in out
    assert "x " * 99 in out  # a long line is not wrapped at 80 columns either


def test_columns_still_decides_where_it_is_set(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "60")
    ui.console.print("y " * 50)
    assert max(len(line) for line in capsys.readouterr().out.splitlines()) <= 60


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_progress_lines_come_at_each_tenth_and_at_the_end():
    lines: list[str] = []
    log = ProgressLog([("debating", 200, "turns"), ("runs", 4, "runs")], lines.append, Clock())
    for i in range(200):
        log.advance(0, 1)
        if i % 50 == 49:
            log.advance(1, 1)
    log.close()
    assert len(lines) == 11  # one per tenth, and the last run's finish after the last tenth
    assert lines[0].startswith("debating 20/200 turns (10%), runs 0/4 (0%); 0:00:00")
    assert lines[-2].startswith("debating 200/200 turns (100%), runs 3/4 (75%)")
    assert lines[-1].startswith("debating 200/200 turns (100%), runs 4/4 (100%)")


def test_slow_progress_writes_a_line_each_interval():
    clock, lines = Clock(), []
    log = ProgressLog([("judging", 1000, "verdicts")], lines.append, clock, every_s=60)
    for _ in range(30):  # 30 verdicts over 15 minutes: no tenth passed
        clock.now += 30
        log.advance(0, 1)
    assert len(lines) == 15  # every other verdict is a minute after the last line
    assert lines[0] == "judging 2/1,000 verdicts (0%); 0:01:00, 30 s/verdict"
    assert lines[-1].startswith("judging 30/1,000 verdicts (3%); 0:15:00")
    log.close()  # nothing moved since the last line
    assert len(lines) == 15


def test_a_stop_writes_where_the_work_stood():
    lines: list[str] = []
    log = ProgressLog([("debating", 1000, "turns")], lines.append, Clock())
    log.advance(0, 7)
    log.close()
    assert lines == ["debating 7/1,000 turns (0%); 0:00:00"]


def test_a_slow_pace_reads_as_seconds_per_unit():
    assert pace(340.4, "turns") == "340 turns/s"
    assert pace(2.44, "turns") == "2.4 turns/s"
    assert pace(0.4, "turns") == "2.5 s/turn"  # not "0 turns/s"
    assert pace(1 / 125, "verdicts") == "125 s/verdict"
    assert pace(0.0, "turns") == pace(None, "turns") == ""


def test_requests_asked_again_read_by_how_they_failed():
    assert asked_again(Counter()) == ""
    assert asked_again(Counter({"timed out": 3})) == "3 timed out, asked again"
    both = Counter({"timed out": 21, "rate limited": 1})
    assert asked_again(both) == "21 timed out, 1 rate limited, asked again"


def test_off_a_terminal_a_line_comes_at_once_and_then_on_the_clock_without_a_finished_turn():
    clock, lines = Clock(), []
    again: Counter[str] = Counter()
    log = ProgressLog(
        [("debating", 180, "turns")], lines.append, clock, 60, lambda: asked_again(again)
    )
    log.begin()
    assert lines == ["debating 0/180 turns (0%); 0:00:00"]
    clock.now += 59
    log.tick()
    assert len(lines) == 1
    clock.now += 1  # a slow server: a minute, and no turn has finished
    again["timed out"] += 3
    log.tick()
    assert lines[-1] == "debating 0/180 turns (0%); 0:01:00; 3 timed out, asked again"
    clock.now += 90
    log.advance(0, 1)  # the first turn, 2.5 minutes in
    assert lines[-1] == "debating 1/180 turns (0%); 0:02:30, 150 s/turn; 3 timed out, asked again"


def test_the_clock_ticks_from_a_thread_of_its_own_until_the_work_ends():
    ticked = threading.Event()
    with ticking(ticked.set, 0.01):
        assert ticked.wait(timeout=30)  # the engine's loop is not what calls it
    ticked.clear()
    assert not ticked.wait(timeout=0.05)  # stopped: the thread has ended


def test_the_command_lines_listener_shows_requests_asked_again_off_a_terminal(capsys):
    listener = ui.ConsoleListener()
    with listener.tracking([("debating", 4, "turns")]) as (advance,):
        listener.retried("timed out")
        listener.retried("timed out")
        advance(4)
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "debating 0/4 turns (0%); 0:00:00"  # at once, before any turn
    assert out[-1].startswith("debating 4/4 turns (100%); ")
    assert out[-1].endswith("; 2 timed out, asked again")


@pytest.mark.slow
def test_an_experiment_logged_to_a_file_names_every_run_whole(tmp_path):
    """The command's stdout is a pipe, as under nohup or Slurm, and $COLUMNS is unset."""
    models = "\n".join(
        f'{name}-checkpoint-step-12000 = "sim:p0=0.5,skill={skill}"'
        for name, skill in (("Base", 0.1), ("DAPO", 0.2), ("SDRL", 0.7))
    )
    (tmp_path / "exp.toml").write_text(
        textwrap.dedent(
            """
            [experiment]
            out = "results/a-rather-long-experiment-folder-name"
            [settings]
            limit = 4
            rounds = 1
            [grids.main]
            benchmarks = ["arith"]
            agents = [3]
            protocols = ["centralized_hub"]
            [models]
            """
        )
        + models
    )
    result = mad_eval("experiment", "run", "exp.toml", cwd=tmp_path, env={"COLUMNS": None})
    assert result.returncode == 0, result.stderr
    for name in ("Base", "DAPO", "SDRL"):
        assert f"arith-centralized_hub-n3-t1-{name}-checkpoint-step-12000 " in result.stdout
    assert "…" not in result.stdout
    assert "turns (100%), runs 3/3 (100%)" in result.stdout
