"""`mad-eval data fetch|check`: the benchmark files --data-dir, MAD_EVAL_DATA and an experiment's
data_dir read, written from the Hugging Face hub where it can be reached and checked offline."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.table import Table
from rich.text import Text

from mad_eval.cli import options
from mad_eval.cli.ui import console, fail, one_sentence

if TYPE_CHECKING:
    from mad_eval.data.files import FileState

app = typer.Typer(
    help="Benchmark files for --data-dir, MAD_EVAL_DATA or an experiment's data_dir: write them "
    "from the Hugging Face hub (fetch), check a folder offline (check).",
    no_args_is_help=True,
)
READ_WITH = (
    "Runs read them with --data-dir {folder}, MAD_EVAL_DATA={folder}, or data_dir in an "
    "experiment file's [settings]."
)


BENCHMARKS = options.argument(
    "benchmarks",
    list[str],
    metavar="BENCHMARK",
    help="Benchmark names as --benchmark takes them (math500, mmlu:anatomy) or spec .toml paths.",
)
FOLDER = options.argument(
    "folder",
    Path,
    metavar="FOLDER",
    envvar="MAD_EVAL_DATA",
    help="The folder of benchmark files (default: $MAD_EVAL_DATA).",
)


@options.command(app, ["to", "force"], {"force": False}, arguments=[BENCHMARKS])
def fetch(benchmarks: list[str], to: Path, force: bool) -> None:
    """Write each benchmark's JSON Lines file into a folder from its Hugging Face hub dataset.

    Each row is stored under the field names the benchmark's spec reads locally, with the
    question ids a run gives the hub's rows, so a run reading the folder asks the same
    questions. A file the folder already holds is kept (and checked) unless --force. The
    hub's files come from its local cache where the hub cannot be reached.
    """
    from mad_eval.data.benchmarks import BenchmarkError, HubError, named_spec
    from mad_eval.data.files import FileState
    from mad_eval.data.files import fetch as fetch_one

    with one_sentence():
        files = {name: named_spec(name) for name in benchmarks}  # every name checked first
    states: list[FileState] = []
    offline: dict[str, str] = {}  # benchmark -> its file, not had for want of the hub
    why = ""
    done: dict[str, str] = {}  # file -> the benchmark that wrote it (aime24, aime24_dapo)
    for name, spec in files.items():
        file = spec.local["file"] if spec.local else None
        if file in done:
            states.append(FileState(name, file, note=f"the same file as {done[file]}"))
            continue
        done.update({file: name} if file else {})
        try:
            states.append(fetch_one(name, to, force))
        except BenchmarkError as exc:  # no hub file, a hub row the spec cannot read
            if isinstance(exc, HubError) and exc.offline:
                offline[name], why = file or "", exc.why
            else:
                states.append(FileState(name, file, problem=str(exc)))
        except OSError as exc:
            raise fail(f"cannot write into {to}: {exc.strerror or exc}.") from None
    if states:
        _table(states, "fetched")
    if any(state.ok and state.rows is not None for state in states):
        console.print(
            READ_WITH.format(folder=to.resolve()), markup=False, highlight=False, soft_wrap=True
        )
    if offline:
        wanted = list(offline.values())
        lacks = "its file" if len(wanted) == 1 else "their files"
        raise fail(
            f"could not fetch {', '.join(offline)}: {why} and the hub cache lacks {lacks}; copy "
            f"{', '.join(wanted)} into {to} from a machine that can reach the hub (`mad-eval data "
            f"fetch {' '.join(offline)} --to FOLDER` there), then run `mad-eval data check {to}`."
        )
    if not all(state.ok for state in states):
        raise typer.Exit(code=1)


@options.command(app, ["benchmark"], {"benchmark": None}, options.CHECK, [FOLDER])
def check(folder: Path, benchmark: list[str] | None) -> None:
    """Check offline that a folder holds each benchmark's file, every row with the fields
    its spec names, read as a run reads it; exit 1 when a file is missing or malformed."""
    from mad_eval.data.files import check as check_one
    from mad_eval.data.files import check_folder

    if not folder.is_dir():
        raise fail(f"{folder} is not a folder; give the folder that holds the benchmark files.")
    with one_sentence():
        states = [check_one(name, folder) for name in benchmark] if benchmark else None
    if states is None:
        states = check_folder(folder)
        if not any(state.benchmark for state in states):
            console.print(
                f"{folder} holds no benchmark file; `mad-eval data fetch NAME --to {folder}` "
                "writes one, `mad-eval benchmarks` lists the names.",
                markup=False,
                highlight=False,
            )
            raise typer.Exit(code=1)
    _table(states, "checked")
    if not all(state.ok for state in states):
        raise typer.Exit(code=1)


def _table(states: list[FileState], title: str) -> None:
    table = Table(title=title, show_lines=False)
    for column in ("benchmark", "file", "rows", "status"):  # names folded, never cut
        bold = "bold" if column == "benchmark" else None
        table.add_column(column, style=bold, overflow="fold")
    for state in states:
        status = state.note or "ok"
        if state.problem:
            status = f"{state.note}; {state.problem}" if state.note else state.problem
        rows = "" if state.rows is None else f"{state.rows:,}"
        cells = (state.benchmark, state.file or "", rows, status)
        table.add_row(*(Text(cell) for cell in cells))  # plain text: a problem names [hub]
    console.print(table)
