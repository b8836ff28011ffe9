"""What every command prints with: the consoles, the one-sentence error exit, progress bars."""

from __future__ import annotations

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from mad_eval.sanitize import outward

console = Console()
errors = Console(stderr=True)


def fail(message: str) -> typer.Exit:
    # Escaped: a message may hold brackets, such as pip install 'mad-eval[vllm]'; and what
    # a server sent may hold credentials or terminal control codes (sanitize.outward).
    errors.print(f"[bold red]error:[/] {escape(outward(message))}", highlight=False, soft_wrap=True)
    return typer.Exit(code=2)


def warn(label: str, message: str) -> None:
    errors.print(f"[yellow]{label}:[/] {escape(outward(message))}", highlight=False, soft_wrap=True)


def progress_bar(unit: str = "turns") -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn(unit),
        TimeElapsedColumn(),
        console=console,
    )
