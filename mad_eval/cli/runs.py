"""`mad-eval run`, `single`, `judge` and `report`: one run folder each, through mad_eval.api."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from mad_eval import api  # light: it imports what each call needs when called
from mad_eval.cli import options
from mad_eval.cli.app import app
from mad_eval.cli.ui import ConsoleListener, alert, console, one_sentence, warn
from mad_eval.settings.config import operational_defaults, run_defaults

if TYPE_CHECKING:
    from mad_eval.debate.execute import Preview
    from mad_eval.reporting.results import Run


def _run_defaults() -> dict[str, Any]:
    return {**run_defaults(), **options.defaults_of(api.run), "dry_run": False} | {
        "prompt_style": None  # refused: --prompt-template's old name
    }


def _single_defaults() -> dict[str, Any]:
    return {**_run_defaults(), **options.defaults_of(api.single)}


def _judge_defaults() -> dict[str, Any]:
    return {**operational_defaults(), **options.defaults_of(api.judge)}


RUN_DIR = options.argument("run_dir", Path, metavar="RUN", help="A debate run directory.")


@options.command(app, options.RUN, _run_defaults())
def run(**chosen: Any) -> None:
    """Run a multi-agent debate and report Maj, Debate, Δ and transitions.

    Running the same command again resumes an interrupted run in the same directory; add
    --retry-failed to ask its failed turns again.
    """
    if chosen.pop("prompt_style") is not None:
        raise typer.BadParameter(
            "--prompt-style is now --prompt-template.", param_hint="'--prompt-style'"
        )
    with one_sentence(data_dir=True):
        if chosen.pop("dry_run"):
            show_preview(api.run_plan(**chosen))
            return
        show(api.run(listener=ConsoleListener(), **chosen), "run")


def show_preview(preview: Preview) -> None:
    """A dry run: the run's folder and turns, where its questions come from and go, and
    the command of each server it would start."""
    from mad_eval.sanitize import outward
    from mad_eval.words import counted

    lines = [
        f"{preview.folder}: {counted(preview.questions, 'question')}, "
        f"{counted(preview.turns, 'turn')} in all, {preview.recorded} recorded, "
        f"{max(preview.turns - preview.recorded, 0)} to ask.",
    ]
    if preview.data_file is not None:
        lines.append(f"Questions are read from {preview.data_file.resolve()}.")
    for url, models in preview.endpoints.items():
        lines.append(f"Questions are sent to {url} ({', '.join(models)}).")
    lines += [f"Server: {command}" for command in preview.servers]
    if preview.remote_code:
        lines.append("Served with --trust-remote-code: the server runs the Python code that "
                     "comes with its checkpoint.")  # fmt: skip
    for line in lines:
        console.print(outward(line), markup=False, highlight=False, soft_wrap=True)


@options.command(app, options.SINGLE, _single_defaults(), {"out": options.SINGLE_OUT})
def single(**chosen: Any) -> None:
    """Sample K answers per question without debate; report mean@K and maj@K.

    Each answer is one turn of round 0, seeded like a debate's round 0, so turns.jsonl is
    also a rollout file for `mad-eval train`. The same command resumes an interrupted run.
    """
    with one_sentence(data_dir=True):
        show(api.single(listener=ConsoleListener(), **chosen), "single")


JUDGE_OPTIONS = [
    "judge",
    "base_url",
    "rounds",
    "limit",
    "reference",
    "data_dir",
    "temperature",
    "top_p",
    "max_tokens",
    "seed",
    *options.OPERATIONAL,
    "extra_body",
    "log",
]


@options.command(app, JUDGE_OPTIONS, _judge_defaults(), options.JUDGE, [RUN_DIR])
def judge(run_dir: Path, **chosen: Any) -> None:
    """Score every debate turn's critique with an LLM judge; write judge.jsonl and metrics.json.

    The judge reads exactly the messages the agent was sent and its reply, and scores
    conflict identification (0-2), critique correctness (0-3), critique specificity (0-2)
    and engagement and revision (0-2). Questions come from the run folder (--data-dir only
    for a folder recorded before it held questions.jsonl). Running it again resumes.
    """
    with one_sentence(data_dir=True):
        show(api.judge(run_dir, listener=ConsoleListener(), **chosen))


REPORT_DIR = options.argument(
    "run_dir", Path, metavar="RUN", help="A run directory (holding manifest.json)."
)


@options.command(app, ["prices", "single"], options.defaults_of(api.report), arguments=[REPORT_DIR])
def report(run_dir: Path, **chosen: Any) -> None:
    """Recompute metrics.json from turns.jsonl and print it.

    With --single, a debate run is also set against self-consistency given the same
    compute: maj@G (G = N(T+1) generations) and the vote of as many samples as the
    debate's tokens buy, with 95% intervals and paired tests against Debate. A debate
    matched once is matched again with the same single run while that run is there.
    """
    with one_sentence():
        show(api.report(run_dir, **chosen))


def show(run: Run, command: str | None = None) -> None:
    """A run's metrics on the console, where they are kept, and, after a `command` that
    made the run, how to ask its failed turns again."""
    from mad_eval.reporting.console import metrics_view
    from mad_eval.store.folder import RunStore
    from mad_eval.words import counted

    shown = metrics_view(run.metrics, run.root.name, run.escaping, run.intervals())
    console.print(shown)
    for sentence in run.alerts:
        alert(sentence)
    store = RunStore(run.root)
    console.print(f"Records: {store.turns_path}  Metrics: {store.metrics_path}")
    # A prompt that did not fit was never sent: asking again would fail the same way.
    sent = run.failed_sent
    if sent and command:
        warn(
            "failed",
            f"{counted(sent, 'request')} failed (their errors are in turns.jsonl); "
            f"run the same mad-eval {command} command with --retry-failed to ask again.",
        )
