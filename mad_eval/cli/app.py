"""The `mad-eval` typer app, which each command module registers its commands on."""

from __future__ import annotations

import typer

app = typer.Typer(
    help="Multi-agent debate evaluation: Maj vs Debate, per-round accuracy and transitions, "
    "LLM-judge critique scores, single-agent mean@K and maj@K, paper tables and figures.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # help texts show [brackets] literally, e.g. MODEL[@URL][*COUNT]
)
