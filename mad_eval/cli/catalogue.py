"""`mad-eval protocols`, `templates` and `benchmarks`: what --protocol, --prompt-template and
--benchmark accept by name."""

from __future__ import annotations

from pathlib import Path

from rich.table import Table
from rich.text import Text

from mad_eval.cli import options
from mad_eval.cli.app import app
from mad_eval.cli.ui import console, fail
from mad_eval.sanitize import printable


@app.command()
def protocols() -> None:
    """List the protocols --protocol accepts by name, with what each does."""
    from mad_eval.protocols import catalogue, presets

    table = Table(title="protocols", show_lines=False)
    table.add_column("name", style="bold")
    table.add_column("what it does")
    table.add_column("from", style="dim")
    for name, description, source in catalogue():
        table.add_row(*_cells(name, description, _relative(source)))
    console.print(table)
    _unreached("protocols", presets())
    console.print(
        "Parameters: NAME:key=value,... (e.g. sparse:degree=4, centralized:hub=2). "
        "Your own class: --protocol pkg.module:Class."
    )


TEMPLATE = options.argument(
    "template",
    str | None,
    default=None,
    metavar="[NAME|FILE]",
    help="A template to show, rendered for a sample 3-agent debate; none: list them.",
)


@options.command(
    app, ["show_round", "show_agent"], {"show_round": 1, "show_agent": 1}, arguments=[TEMPLATE]
)
def templates(template: str | None, show_round: int, show_agent: int) -> None:
    """List the prompt templates --prompt-template accepts by name, or show one's messages."""
    from mad_eval.settings.templates import (
        TemplateError,
        builtin_templates,
        load_template,
        sample_prompt,
    )

    if template is None:
        table = Table(title="prompt templates", show_lines=False)
        for column in ("name", "what the agent is asked", "file"):
            table.add_column(column, style="bold" if column == "name" else None)
        for name, path in builtin_templates().items():
            try:  # each one loaded (in the sandbox) and checked: a bad one is listed as such
                description = load_template(name).description
            except TemplateError as exc:
                description = f"unusable: {exc}"
            table.add_row(*_cells(name, description, _relative(str(path))))
        console.print(table)
        _unreached("templates", builtin_templates())
        console.print("Show one: mad-eval templates NAME|FILE [--round R] [--agent I].")
        return
    if not (0 <= show_agent <= 2 and 0 <= show_round <= 5):
        raise fail("--agent must lie in 0..2 and --round in 0..5.")
    try:
        messages = sample_prompt(load_template(template), show_agent, show_round)
    except TemplateError as exc:
        raise fail(str(exc)) from None
    for message in messages:
        console.print(f"[{message['role']}]", style="bold", markup=False)
        # soft_wrap: the exact text, never broken at the terminal's width
        console.print(message["content"], markup=False, highlight=False, soft_wrap=True)


@app.command()
def benchmarks() -> None:
    """List the benchmarks --benchmark accepts by name: kind, source and description."""
    from mad_eval.data.benchmarks import BenchmarkError, catalogue

    table = Table(title="benchmarks", show_lines=False)
    for column in ("name", "kind", "parameters (default)", "source", "description"):
        table.add_column(column, style="bold" if column == "name" else None)
    for name, path, spec in catalogue():  # a broken file is listed as such, with its path
        if isinstance(spec, BenchmarkError):
            table.add_row(*_cells(name, "", "", _relative(str(path)), f"unusable: {spec}"))
            continue
        params = ", ".join(f"{k}={v}" for k, v in spec.params.items())
        table.add_row(*_cells(spec.name, spec.kind, params, spec.source, spec.description))
    console.print(table)
    console.print(
        "Parameters: NAME:key=value,... (e.g. mmlu:subject=anatomy, mmlu:anatomy, "
        "arith:terms=2,digits=1). Local files are read from --data-dir or $MAD_EVAL_DATA "
        "(`mad-eval data fetch NAME --to FOLDER` writes them from the hub); any .jsonl or "
        ".toml path works too."
    )


def _unreached(kind: str, by_name: dict[str, Path]) -> None:
    """Say which of the working directory's files a bare name does not reach."""
    from mad_eval.settings.config import unreached_files

    # --prompt-template takes a file's path; --protocol takes a preset's name only.
    fix = "rename the file to use it" if kind == "protocols" else "give its path to use it"
    for path in unreached_files(kind, by_name):
        console.print(
            f"{_relative(str(path))}: not used by the name {path.stem}, which is built in; {fix}.",
            style="dim",
            markup=False,
        )


def _cells(*texts: str) -> list[Text]:
    """A row's cells as plain text: a file's description is never rich markup (a stray
    `[/bold]` would be an error) nor terminal control codes."""
    return [Text(printable(text)) for text in texts]


def _relative(source: str) -> str:
    try:
        return str(Path(source).relative_to(Path.cwd()))
    except ValueError:
        return source
