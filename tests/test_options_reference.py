"""docs/reference/options.md is what the code gives: every command and option, nothing stale."""

from __future__ import annotations

import difflib
from pathlib import Path

import pytest
import typer

from mad_eval.cli import app
from mad_eval.cli.reference import PAGE, REGENERATE, render

ROOT = Path(__file__).resolve().parents[1]


def _commands() -> list[tuple[str, object]]:
    """Every visible command of the app as (its full name, the click command)."""
    found = []

    def walk(cmd, path: list[str], ctx) -> None:
        if not hasattr(cmd, "list_commands"):
            return
        for name in cmd.list_commands(ctx):
            sub = cmd.get_command(ctx, name)
            if sub is None or sub.hidden:
                continue
            found.append((" ".join([*path, name]), sub))
            walk(sub, [*path, name], typer.Context(sub, info_name=name, parent=ctx))

    root = typer.main.get_command(app)
    walk(root, ["mad-eval"], typer.Context(root, info_name="mad-eval"))
    return found


def test_committed_page_matches_the_code() -> None:
    committed = (ROOT / PAGE).read_text(encoding="utf-8")
    fresh = render()
    if committed != fresh:
        diff = "".join(
            difflib.unified_diff(
                committed.splitlines(keepends=True),
                fresh.splitlines(keepends=True),
                f"{PAGE} (committed)",
                f"{PAGE} (from the code)",
                n=1,
            )
        )
        pytest.fail(
            f"{PAGE} differs from the code's options: run `{REGENERATE}` from the repository "
            f"root and commit it.\n{diff[:4000]}"
        )


def test_every_command_and_option_is_on_the_page() -> None:
    page = render()
    commands = _commands()
    assert {"mad-eval run", "mad-eval judge", "mad-eval experiment tables"} <= {
        name for name, _ in commands
    }
    for name, cmd in commands:
        assert f"# {name}\n" in page, name
        section = page.split(f"# {name}\n", 1)[1].split("\n## ", 1)[0]
        for param in cmd.params:
            if getattr(param, "hidden", False):
                continue
            if param.param_type_name == "argument":  # shown by its metavar, e.g. RUN
                names = [param.get_help_record(typer.Context(cmd))[0].split()[0]]
            else:
                names = [*param.opts, *param.secondary_opts]
            for opt in names:
                assert f"`{opt}" in section or f" {opt}" in section, f"{name}: {opt}"


def test_page_is_the_same_on_any_terminal_and_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    narrow = None
    for columns in ("40", "250"):
        monkeypatch.setenv("COLUMNS", columns)
        text = render()
        assert narrow is None or text == narrow
        narrow = text
    assert str(ROOT) not in narrow and str(Path.home()) not in narrow
    assert "\x1b[" not in narrow  # no terminal colours


def test_help_prose_renders_as_written() -> None:
    """Help texts name `<model>`, `*3` and `[[agent]]`: escaped so Markdown shows them."""
    page = render()
    assert "openai:&lt;model&gt;" in page
    assert "\\[\\[agent\\]\\]" in page
    assert "v1\\*3" in page
    for block in page.split("```")[::2]:  # outside the usage blocks
        for line in block.splitlines():
            outside_code = "".join(line.split("`")[::2])
            assert "<" not in outside_code, line
