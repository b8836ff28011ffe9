"""`mad-eval log RUN... --to TRACKER`: send run folders made before to a tracker."""

from __future__ import annotations

from pathlib import Path

import typer

from mad_eval import api
from mad_eval.cli import options
from mad_eval.cli.app import app
from mad_eval.cli.ui import ConsoleListener, console, one_sentence
from mad_eval.cli.views import RUN_DIRS
from mad_eval.words import counted


@options.command(app, ["to", "group"], {"group": None}, {"to": options.LOG_TO}, [RUN_DIRS])
def log(run_dirs: list[Path], to: list[str], group: str | None) -> None:
    """Send finished run folders to Weights & Biases or MLflow, one tracked run each.

    A folder sent before with the same records sends nothing; one whose records changed
    (resumed, judged, retried) updates its tracked run. Exit status 1 if a tracker failed.
    """
    with one_sentence():
        done = api.log(run_dirs, to, group=group, listener=ConsoleListener())
    sent = sum(entry.id is not None for entry in done.logged)
    console.print(
        f"{counted(sent, 'tracked run')} sent, {len(done.logged) - sent} already up to date."
    )
    if done.failed:
        raise typer.Exit(1)
