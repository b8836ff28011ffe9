"""What every command prints with: the consoles, the one-sentence error exit, progress bars,
and the Listener that shows a library call's progress on the console."""

from __future__ import annotations

import functools
import os
import signal
import warnings
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import typer
from rich.console import Console, ConsoleDimensions
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TextColumn,
    TimeElapsedColumn,
)
from rich.text import Text

from mad_eval.cli.progress_log import ProgressLog, ticking
from mad_eval.errors import (
    STOPS,
    Interrupted,
    SkippedRun,
    UserError,
    handling,
    on_command_line,
    stop_here,
)
from mad_eval.progress import Advance, Listener, asked_again, pace
from mad_eval.sanitize import outward, redact

# Off a terminal a line or table is as wide as its text needs, up to this many columns.
LOG_WIDTH = 400


class LogConsole(Console):
    """A rich console that, writing to a file or a pipe (nohup, Slurm, | tee), keeps tables
    and lines whole instead of squeezing them to rich's 80 columns; $COLUMNS still decides
    where it is set."""

    @property
    def size(self) -> ConsoleDimensions:
        size = super().size
        if self.is_terminal or self._width is not None or os.environ.get("COLUMNS"):
            return size
        return ConsoleDimensions(LOG_WIDTH, size.height)

    @size.setter
    def size(self, new_size: tuple[int, int]) -> None:
        self._width, self._height = new_size


console = LogConsole()
errors = LogConsole(stderr=True)


def fail(message: str) -> typer.Exit:
    # Escaped: a message may hold brackets, such as pip install 'mad-eval[vllm]'; and what
    # a server sent may hold credentials or terminal control codes (sanitize.outward).
    errors.print(f"[bold red]error:[/] {escape(outward(message))}", highlight=False, soft_wrap=True)
    return typer.Exit(code=2)


def warn(label: str, message: str) -> None:
    errors.print(f"[yellow]{label}:[/] {escape(outward(message))}", highlight=False, soft_wrap=True)


def alert(message: str) -> None:
    """A sentence saying a result is suspect (metrics.json's alerts), under its table."""
    console.print(
        f"[bold red]suspicious:[/] {escape(outward(message))}", highlight=False, soft_wrap=True
    )


class Rate(ProgressColumn):
    """Units done per second, over the task's recent progress; below one a second, the
    seconds each takes."""

    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        return Text(pace(speed, task.fields["unit"]), style="progress.data.speed")


def progress_bar(unit: str = "turns") -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[unit]}"),
        Rate(),
        TimeElapsedColumn(),
        TextColumn("{task.fields[again]}", style="yellow"),
        console=console,
    )


class ConsoleListener(Listener):
    """A library call's lines, warnings and progress bars on the console; requests asked
    again are counted on the progress line as they happen."""

    def __init__(self) -> None:
        self.again: Counter[str] = Counter()  # requests asked again, by how they failed
        self.shown_again: Callable[[], None] = lambda: None  # puts the count on the line

    def say(self, text: str) -> None:
        console.print(redact(text))  # a judge's extra body, a run folder's path

    def warn(self, label: str, text: str) -> None:
        warn(label, text)

    def retried(self, why: str) -> None:
        self.again[why] += 1
        self.shown_again()

    @contextmanager
    def tracking(self, counts: list[tuple[str, int, str]]) -> Iterator[list[Advance]]:
        self.again.clear()
        try:
            if console.is_terminal:
                with self._bars(counts) as advances:
                    yield advances
            else:  # rich draws no live bar there: plain lines instead
                with self._lines(counts) as advances:
                    yield advances
        finally:
            self.shown_again = lambda: None

    @contextmanager
    def _bars(self, counts: list[tuple[str, int, str]]) -> Iterator[list[Advance]]:
        with progress_bar() as progress:
            tasks = [
                progress.add_task(what, total=total, unit=unit, again="")
                for what, total, unit in counts
            ]
            self.shown_again = lambda: progress.update(tasks[0], again=asked_again(self.again))
            yield [functools.partial(progress.advance, task) for task in tasks]

    @contextmanager
    def _lines(self, counts: list[tuple[str, int, str]]) -> Iterator[list[Advance]]:
        log = ProgressLog(
            counts,
            lambda line: console.print(line, markup=False, highlight=False),
            notes=lambda: asked_again(self.again),
        )
        log.begin()
        try:
            with ticking(log.tick, log.every_s / 4):
                yield [functools.partial(log.advance, i) for i in range(len(counts))]
        finally:
            log.close()


@contextmanager
def skipped_runs_said() -> Iterator[None]:
    """Each run folder a whole-folder command leaves out (errors.SkippedRun) as one line
    on stderr, "skipped: FOLDER: why."; other warnings as Python shows them."""
    shown = warnings.showwarning

    def show(message: Warning | str, category: type[Warning], *rest: Any, **more: Any) -> None:
        if issubclass(category, SkippedRun):
            warn("skipped", str(message))
        else:
            shown(message, category, *rest, **more)

    with warnings.catch_warnings():
        warnings.simplefilter("always", SkippedRun)
        warnings.showwarning = show
        yield


@contextmanager
def one_sentence(*also: type[Exception], data_dir: bool = False) -> Iterator[None]:
    """A user error (or one of the errors `also` names, which that library call raises
    for a bad value) ends the command in one sentence (exit 2); a stop says where the
    finished records are (exit 128 + the signal). Inside, the library words its messages
    for the command line (options, not keywords) and leaves its alerts to the command. A
    missing benchmark file is advised as the command takes a folder: --data-dir where it has
    that option (`data_dir`), else MAD_EVAL_DATA."""
    refused: tuple[type[Exception], ...] = (UserError, *also)
    try:
        with on_command_line(), handling(stop_here, STOPS[1:]), skipped_runs_said():
            yield
    except refused as exc:
        from mad_eval.data.benchmarks import DataMissingError

        if isinstance(exc, DataMissingError):
            exc = exc.advised("option" if data_dir else "env")
        raise fail(str(exc)) from None
    except KeyboardInterrupt as exc:
        stop = exc if isinstance(exc, Interrupted) else Interrupted(signal.SIGINT, None)
        sig = stop.signal
        how = "Interrupted (Ctrl-C)" if sig == signal.SIGINT else f"Stopped by {sig.name}"
        if stop.records is None:
            said = f"{how} before it finished; run the same command again."
        else:
            said = (
                f"{how}. Every finished {stop.what} is in {stop.records}; run the same "
                "command again to resume."
            )
        errors.print(said, highlight=False)
        raise typer.Exit(code=128 + sig) from None
