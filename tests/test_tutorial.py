"""docs/tutorial.md runs exactly as written, in order, in a fresh folder laid out like a clone.

Every ```bash block is run by bash in that folder; each must exit 0. After a block, the files
its `<!-- expect-files: ... -->` comment names (globs allowed) must exist, and each line of
the ```text block after an `<!-- expect-output -->` comment must be a line of what it printed
(after `<!-- expect-output: PATH -->`, a line of that file).
Blocks of any other language are not run; a shell block must say `bash` (run) or `text`.
"""

from __future__ import annotations

import fnmatch
import glob
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TUTORIAL = ROOT / "docs" / "tutorial.md"

# The tutorial starts from the README's first quick-start command. Its first two steps make
# .venv and pip-install the clone into it: minutes and the network, which a test has neither
# of. The test runs the rest of that command as written, against a .venv/bin/mad-eval that
# is this interpreter's mad-eval (see _fake_venv).
INSTALL = "python3 -m venv .venv && .venv/bin/pip install -e . && \\\n  "

# What a clone holds that the tutorial's commands may read (the rest is tests and tooling).
CLONE = ["benchmarks", "experiments", "protocols", "templates", "examples", "pyproject.toml"]

FENCE = re.compile(r"^```(\S*)\s*$")
MARKER = re.compile(r"^<!--\s*(expect-files|expect-output)\s*:?(.*?)-->\s*$")
ALLOWED = {"bash", "text", "toml", "python", "json"}


@dataclass
class Step:
    """One ```bash block, the files promised after it and the output it must print."""

    code: str
    line: int
    files: list[str] = field(default_factory=list)
    output: list[tuple[str, str]] = field(default_factory=list)  # (file or "", line)


def parse(text: str) -> list[Step]:
    """The tutorial's bash blocks in order, with the checks its comments attach to them."""
    steps: list[Step] = []
    lines = text.splitlines()
    i, want_output = 0, None
    while i < len(lines):
        marker = MARKER.match(lines[i].strip())
        if marker and steps:
            if marker.group(1) == "expect-files":
                steps[-1].files += marker.group(2).split()
            else:
                want_output = marker.group(2).strip()
        fence = FENCE.match(lines[i])
        if fence:
            lang, start = fence.group(1), i
            end = next(j for j in range(i + 1, len(lines)) if lines[j].strip() == "```")
            body = lines[i + 1 : end]
            assert lang in ALLOWED, (
                f"docs/tutorial.md:{start + 1}: a ```{lang or '(no language)'} block; mark "
                "commands to run as ```bash and output or commands not to run as ```text"
            )
            if lang == "bash":
                steps.append(Step("\n".join(body) + "\n", start + 1))
                want_output = None
            elif lang == "text" and want_output is not None:
                shown = [line.strip() for line in body if line.strip() not in {"", "..."}]
                steps[-1].output += [(want_output, line) for line in shown]
                want_output = None
            i = end
        i += 1
    return steps


def _clone(tmp: Path) -> Path:
    """A folder laid out like a fresh clone, without results. Its folders are symlinks to this
    checkout's: in a clone installed with `pip install -e .` the package's own spec folders
    and the working directory's are one (a copy would make every run warn that its files
    shadow nothing). The tutorial only reads them; it writes under results/ and its own files."""
    clone = tmp / "clone"
    clone.mkdir()
    for name in CLONE:
        if (ROOT / name).exists():
            (clone / name).symlink_to(ROOT / name)
    (clone / "results").mkdir()
    return clone


def _fake_venv(clone: Path) -> None:
    """.venv/bin/mad-eval as the quick start leaves it, but running this interpreter's
    mad_eval (the checkout under test, through PYTHONPATH): a script rather than a symlink
    to an installed console script, which may be missing or belong to another checkout."""
    bin_dir = clone / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    script = bin_dir / "mad-eval"
    script.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m mad_eval "$@"\n')
    script.chmod(0o755)


def _env(clone: Path) -> dict[str, str]:
    """This environment with the checkout first on the import path, .venv/bin then this
    interpreter's bin (a bare `mad-eval`, as after `source .venv/bin/activate`) first on PATH,
    and no benchmark data, endpoint or hub: a fresh clone on a machine without ../shared."""
    env = {k: v for k, v in os.environ.items() if k not in {"MAD_EVAL_DATA", "OPENAI_BASE_URL"}}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    bins = [str(clone / ".venv" / "bin"), str(Path(sys.executable).parent)]
    env["PATH"] = os.pathsep.join([*bins, env.get("PATH", "")])
    env["HF_HUB_OFFLINE"] = "1"
    env["COLUMNS"] = "100"
    return env


def test_parse_attaches_checks_and_refuses_unmarked_shell_blocks() -> None:
    text = (
        "```bash\necho hi\n```\n<!-- expect-files: a.txt b/*.png -->\n"
        "<!-- expect-output -->\n```text\nhi\n...\n```\n```text\nnot checked\n```\n"
        "<!-- expect-output: a.txt -->\n```text\nin a\n```\n"
    )
    (step,) = parse(text)
    assert step.code == "echo hi\n" and step.files == ["a.txt", "b/*.png"]
    assert step.output == [("", "hi"), ("a.txt", "in a")]
    with pytest.raises(AssertionError, match="```sh block"):
        parse("```sh\nls\n```\n")


def test_tutorial_starts_from_the_readme_quick_start() -> None:
    """Its first command is the README's, word for word, so a reader of either gets one setup."""
    first = parse(TUTORIAL.read_text(encoding="utf-8"))[0].code.strip()
    assert first.startswith(INSTALL)
    assert first in (ROOT / "README.md").read_text(encoding="utf-8"), (
        "docs/tutorial.md's first command is no longer the README's quick-start command"
    )


@pytest.mark.slow
def test_tutorial_runs_as_written(tmp_path: Path) -> None:
    steps = parse(TUTORIAL.read_text(encoding="utf-8"))
    assert steps and steps[0].code.startswith(INSTALL), (
        f"docs/tutorial.md should start from the README's quick start: {INSTALL}..."
    )
    promised = [name for step in steps for name in step.files]
    for kind in ("*.md", "*.tex", "*.png", "index.html", "judge.jsonl"):
        assert any(fnmatch.fnmatch(name, "*" + kind) for name in promised), (
            f"the tutorial no longer shows a command that writes {kind}"
        )
    clone = _clone(tmp_path)
    _fake_venv(clone)
    env = _env(clone)
    for step in steps:
        code = step.code.removeprefix(INSTALL)
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", code],
            cwd=clone,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        where = f"docs/tutorial.md:{step.line}"
        assert done.returncode == 0, (
            f"{where}: exit {done.returncode}\n{code}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
        )
        warned = [line for line in done.stderr.splitlines() if line.startswith("warning:")]
        assert not warned, f"{where}: a fresh clone's user would see {warned}"
        for name in step.files:
            assert glob.glob(str(clone / name)), f"{where}: {name} was not written"
        printed = {line.strip() for line in (done.stdout + done.stderr).splitlines()}
        for source, line in step.output:
            if source:
                held = {text.strip() for text in (clone / source).read_text().splitlines()}
                assert line in held, f"{where}: the line {line!r} shown is not in {source}"
            else:
                assert line in printed, f"{where}: the output line {line!r} was not printed"
