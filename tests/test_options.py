"""The command line's options: each declared once in cli/options.OPTIONS, their help listing
what the registries hold, and a start that loads none of the measuring machinery."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest
import typer

from mad_eval.cli import app, options
from mad_eval.data.benchmarks import list_specs
from mad_eval.grading.answers import ANSWER_PROTOCOLS
from mad_eval.measure.bootstrap import REPLICATES
from mad_eval.protocols import catalogue
from mad_eval.reporting.layouts import LAYOUTS
from mad_eval.settings.templates import builtin_templates


def commands(group: Any, path: str = "") -> dict[str, Any]:
    """Every (click) command of the app by its path ("train pairs"), subcommands included."""
    found = {}
    for name, command in group.commands.items():
        if hasattr(command, "commands"):  # a group: train, experiment
            found |= commands(command, f"{path}{name} ")
        else:
            found[f"{path}{name}"] = command
    return found


def test_every_option_of_every_command_is_declared_in_options():
    every = commands(typer.main.get_command(app))
    assert {"run", "table", "plot", "train pairs", "train prompts", "experiment run"} <= set(every)
    seen = set()
    for path, command in every.items():
        for param in command.params:
            if param.param_type_name == "option" and param.name != "help":
                assert param.name in options.OPTIONS, (path, param.name)
                seen.add(param.name)
    assert {"layout", "label", "pairing", "dry_run", "serve", "show_round"} <= seen


def test_a_command_naming_an_undeclared_option_is_refused_when_registered():
    with pytest.raises(KeyError, match="colour"):
        options.command(typer.Typer(), ["colour"])(lambda **chosen: None)


def test_help_lists_what_the_registries_hold():
    def help_of(name: str) -> str:
        return " ".join(options.OPTIONS[name].info.help.split())

    assert all(name in help_of("answer_protocol") for name in ANSWER_PROTOCOLS)
    assert all(f"{name}:" in help_of("layout") for name in LAYOUTS)
    assert all(spec.name in help_of("benchmark") for spec in list_specs())
    assert all(name in help_of("prompt_template") for name in builtin_templates())
    presets = [name for name, _, source in catalogue() if source.endswith(".toml")]
    assert presets and all(name in help_of("protocol") for name in presets)


def test_the_resamples_shown_in_help_are_the_calls_default():
    assert options.REPLICATES == REPLICATES


def test_the_command_line_starts_without_the_measuring_stack():
    """A fresh interpreter: what `mad-eval --help` imports before it answers."""
    code = (
        "import sys, mad_eval.cli; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('numpy', 'pandas') "
        "or m.startswith(('mad_eval.measure', 'mad_eval.reporting.tables'))))"
    )
    found = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert found.stdout.strip() == "[]"


def test_the_base_url_help_says_how_requests_are_routed():
    """backends/base.Guarded._pick: a question's own replica by a hash of its id, the least
    busy one only when that replica is a margin busier or resting after a failure."""
    said = " ".join(options.OPTIONS["base_url"].info.help.split())
    assert "picked by a hash of the question's id" in said
    assert "least busy one only when that replica falls behind or fails" in said
