"""Write docs/reference/options.md, every command and option of `mad-eval`, from the typer app.

Run `python -m mad_eval.cli.reference` from the repository root; tests/test_options_reference.py
fails when the committed page differs from what the code gives. The page reads each option's
help record as `--help` prints it (names, metavar, help, default, env var), never the terminal.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import typer

from mad_eval.store.files import write_atomically

PAGE = Path("docs/reference/options.md")
REGENERATE = "python -m mad_eval.cli.reference"

_HEADER = f"""# Options reference

Every `mad-eval` command, in the order `mad-eval --help` lists them, with every option: its
names, what it takes, its default and what it does. This page is generated from the code
(`{REGENERATE}`, run from the repository root); do not edit it by hand.
`mad-eval COMMAND --help` prints the same text in a terminal.
"""

# Characters Markdown would read as markup in prose (help texts name `<model>`, `*3`, `[[agent]]`).
# An underscore inside a word (base_url) is no emphasis and stays as written.
_MARKUP = re.compile(r"([\\*\[\]#]|(?<!\w)_|_(?!\w))")


def _escape(text: str) -> str:
    """Make help prose render as written: escape markup outside its `code` spans."""
    parts = text.split("`")
    for i in range(0, len(parts), 2):  # even parts lie outside backticks
        plain = parts[i].replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
        parts[i] = _MARKUP.sub(lambda m: "\\" + m.group(0), plain)
    if len(parts) % 2 == 0:  # an unmatched backtick: keep it literal
        return "\\`".join(["`".join(parts[:-1]), parts[-1]])
    return "`".join(parts)


def _code(text: str) -> str:
    """A code span that holds any text, backticks included."""
    fence = "``" if "`" in text else "`"
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _split_extras(help_text: str) -> tuple[str, list[str]]:
    """Split click's trailing `  [default: x; env var: Y; required]` off a help record."""
    text, sep, extras = help_text.rpartition("  [")
    if not sep or not extras.endswith("]"):
        return help_text, []
    return text, extras[:-1].split("; ")


def _extra_line(extra: str) -> str:
    """One of click's extras (default, env var, required) as a sentence of the page."""
    key, sep, value = extra.partition(": ")
    if not sep:
        return extra.capitalize() + "."
    label = {"default": "Default", "env var": "Environment variable"}.get(key, key.capitalize())
    return f"{label}: {_code(value)}."


def _param(param: Any, ctx: typer.Context) -> list[str]:
    """A bullet for one argument or option: names and metavar, help, then default and env var."""
    record = param.get_help_record(ctx)
    if record is None:  # hidden
        return []
    names, help_text = record
    text, extras = _split_extras(help_text)
    sentences = [_escape(text.strip())] if text.strip() else []
    sentences += [_extra_line(extra) for extra in extras]
    return [f"- **{_code(names)}**: " + " ".join(sentences)]


def _paragraphs(help_text: str) -> list[str]:
    """A command's help as Markdown paragraphs (click's `\\f` ends what help shows)."""
    text = help_text.split("\f")[0]
    blocks = [" ".join(block.split()) for block in re.split(r"\n\s*\n", text.strip())]
    return [_escape(block) for block in blocks if block]


def _command(cmd: Any, path: list[str], ctx: typer.Context, level: int) -> list[str]:
    """The section of one command (and, for a group, of each of its commands)."""
    name = " ".join(path)
    lines = [f"{'#' * level} {name}", ""]
    for block in _paragraphs(cmd.help or ""):
        lines += [block, ""]
    usage = " ".join([name, *cmd.collect_usage_pieces(ctx)])
    if hasattr(cmd, "list_commands"):
        usage = f"{name} COMMAND [ARGS]..."
    lines += ["```text", usage, "```", ""]
    params = [p for p in cmd.params if not getattr(p, "hidden", False)]
    arguments = [line for p in params if p.param_type_name == "argument" for line in _param(p, ctx)]
    options = [line for p in params if p.param_type_name == "option" for line in _param(p, ctx)]
    for title, items in (("Arguments", arguments), ("Options", options)):
        if items:
            lines += [f"**{title}**", "", *items, ""]
    if hasattr(cmd, "list_commands"):
        for sub_name in cmd.list_commands(ctx):
            sub = cmd.get_command(ctx, sub_name)
            if sub is None or sub.hidden:
                continue
            sub_ctx = typer.Context(sub, info_name=sub_name, parent=ctx)
            lines += _command(sub, [*path, sub_name], sub_ctx, level + 1)
    return lines


def render() -> str:
    """The whole options page as Markdown: the same text on every machine and terminal."""
    from mad_eval.cli import app  # registers every command

    root = typer.main.get_command(app)
    assert isinstance(root, typer.core.TyperGroup)  # the app has several commands
    ctx = typer.Context(root, info_name="mad-eval")
    lines = [_HEADER]
    for name in root.list_commands(ctx):
        cmd = root.get_command(ctx, name)
        if cmd is None or cmd.hidden:
            continue
        sub_ctx = typer.Context(cmd, info_name=name, parent=ctx)
        lines += _command(cmd, ["mad-eval", name], sub_ctx, level=2)
    return "\n".join(lines).rstrip("\n") + "\n"


def main(argv: list[str] | None = None) -> None:
    """Write the page (to PAGE, or the path given) and say where."""
    args = sys.argv[1:] if argv is None else argv
    out = Path(args[0]) if args else PAGE
    out.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(out, render().encode("utf-8"), "give another path.")  # never a link
    print(f"Wrote {out}")


if __name__ == "__main__":
    main()
