"""The `mad-eval` command line: parses options, calls the library (mad_eval.api), prints.

Each command imports what it needs when it runs: `mad-eval --help` and a mistyped option
answer at once, without loading numpy, the prompt builders or the backends."""

from mad_eval.cli import catalogue, data, experiment, runs, track, train, viewer, views
from mad_eval.cli.app import app

app.add_typer(train.app, name="train")
app.add_typer(experiment.app, name="experiment")
app.add_typer(data.app, name="data")

__all__ = ["app", "catalogue", "runs", "track", "viewer", "views"]
