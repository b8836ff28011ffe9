"""A cloned repository is data to the processes mad-eval starts: a `sympy/` or `mad_eval/`
folder in the working directory (or a relative PYTHONPATH entry naming it) is never
imported by a grading worker or a server."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from mad_eval import api
from mad_eval.children import environment, import_path, program, python_module
from mad_eval.grading.grader import grade
from mad_eval.grading.verdicts import VERDICTS
from mad_eval.grading.verifier import stop_graders
from mad_eval.serving.session import require_vllm
from mad_eval.settings.config import ConfigError

HALF = r"so \boxed{\frac{1}{2}}"  # against gold 0.5: only math-verify says these are equal


def plant(folder: Path, marker: Path) -> None:
    """Packages that would write `marker` when imported: sympy, math-verify's parser, and a
    mad_eval of their own."""
    for package in ("sympy", "math_verify", "latex2sympy2_extended", "mad_eval"):
        code = f"open({str(marker)!r}, 'a').write({package!r} + '\\n')\n"
        (folder / package).mkdir()
        (folder / package / "__init__.py").write_text(code)


@pytest.fixture
def clone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, Path]]:
    """A working directory holding planted packages, with no grading worker started yet
    (each starts there), and a relative PYTHONPATH entry naming it; the marker file."""
    folder, marker = tmp_path / "clone", tmp_path / "imported"
    folder.mkdir()
    plant(folder, marker)
    stop_graders()
    VERDICTS.forget()
    monkeypatch.chdir(folder)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([".", "", os.environ.get("PYTHONPATH", "")]))
    yield folder, marker
    stop_graders()  # no worker started here serves a later test
    VERDICTS.forget()


@pytest.mark.slow
def test_a_math_verify_run_imports_nothing_from_the_working_directory(clone):
    folder, marker = clone
    result = api.run(
        benchmark="arith", limit=3, agents=2, rounds=1, answer_protocol="math-verify",
        out=folder / "r",
    )  # fmt: skip
    assert not marker.exists(), marker.read_text()
    turns = [json.loads(line) for line in (folder / "r" / "turns.jsonl").read_text().splitlines()]
    assert len(turns) == 3 * 2 * 2 and all(t["answer"] is not None for t in turns)
    assert result.metrics["questions"] == 3
    # The workers grade as ever: 1/2 is 0.5 only to math-verify, 1/3 is not.
    assert grade(HALF, "0.5", "math", answer="math-verify").correct
    assert not grade(HALF, "1/3", "math", answer="math-verify").correct
    assert not marker.exists()


def test_a_python_child_runs_isolated_on_the_parents_mad_eval(clone):
    folder, _ = clone
    command = python_module("mad_eval.grading.verify_worker")
    assert command[1] == "-I"  # no working directory, PYTHONPATH or user site
    path = import_path()
    assert path[0] == str(Path(api.__file__).resolve().parent.parent)
    assert all(os.path.isabs(entry) for entry in path) and str(folder) not in path


def test_a_server_gets_no_relative_python_path(clone):
    """vllm is started by name: only PYTHONPATH's absolute entries reach it."""
    assert "PYTHONPATH" not in environment({"PYTHONPATH": ".::src"})
    kept = environment({"PYTHONPATH": os.pathsep.join(["/opt/libs", "", "lib"]), "X": "1"})
    assert kept == {"PYTHONPATH": "/opt/libs", "X": "1"}


def test_a_program_in_the_working_directory_is_never_run(clone, monkeypatch):
    """A `vllm` script in a clone is not found through a relative or empty PATH entry."""
    folder, _ = clone
    script = folder / "vllm"
    script.write_text("#!/bin/sh\necho planted\n")
    script.chmod(0o755)
    monkeypatch.setenv("PATH", os.pathsep.join(["", ".", "bin"]))
    with pytest.raises(ConfigError, match="no vllm command found"):
        require_vllm("serve:m")  # the server would have been ./vllm
    assert program("vllm", f"{folder}{os.pathsep}.") == str(script)  # named by its full path
