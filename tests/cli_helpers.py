"""Running the real `mad-eval` command from tests, and reading what it recorded."""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path


def mad_eval(
    *args: str, cwd: Path, env: dict[str, str | None] | None = None, process: bool = False
) -> subprocess.CompletedProcess:
    """The command's result, as a process would give it (exit code, stdout, stderr). It runs
    in this process, through the same typer app, unless `process` (a fresh interpreter: the
    lazy imports, exit on a signal) or `env` is given; `env` adds variables to this
    process's, or (None) unsets them, which only a fresh process reads everywhere (the hub
    client reads its settings once, when imported)."""
    if not process and env is None:
        return in_process(list(args), cwd)
    merged = {**os.environ, "COLUMNS": "200", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "mad_eval", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        env={name: value for name, value in merged.items() if value is not None},
    )


def in_process(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """`python -m mad_eval ARGS` run by click's test runner in `cwd`: the same parsing,
    library calls, printing and exit codes, without starting an interpreter (about 2 s of
    CPU each) for it."""
    from typer.testing import CliRunner

    import mad_eval as mad_eval_package
    from mad_eval.cli import app, ui

    here, argv = os.getcwd(), sys.argv
    widths = ui.console._width, ui.errors._width  # read from $COLUMNS when first imported
    os.chdir(cwd)
    ui.console.width = ui.errors.width = 200
    sys.argv = [str(Path(mad_eval_package.__file__).with_name("__main__.py")), *args]
    try:
        result = CliRunner().invoke(
            app, args, prog_name="python -m mad_eval", env={"COLUMNS": "200"},
            catch_exceptions=False,
        )  # fmt: skip
    finally:
        os.chdir(here)
        sys.argv = argv  # the command line a run records is its own, as in a process
        ui.console._width, ui.errors._width = widths
    return subprocess.CompletedProcess(
        ["mad-eval", *args], result.exit_code, result.stdout, result.stderr
    )


def start(
    args: list[str], cwd: Path, file_limit: int | None = None, memory: int | None = None
) -> subprocess.Popen:
    """The real command, running, in a session of its own (its grading workers with it),
    optionally with a file size limit standing in for a full disk, or a bound on its
    address space."""

    def limit() -> None:
        hears_ctrl_c()
        if file_limit is not None:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # writes fail with EFBIG instead
            resource.setrlimit(resource.RLIMIT_FSIZE, (file_limit, file_limit))
        if memory is not None:
            resource.setrlimit(resource.RLIMIT_AS, (memory, memory))

    return subprocess.Popen(
        [sys.executable, "-m", "mad_eval", *args],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=limit,
        env={**os.environ, "COLUMNS": "200"},
    )


def hears_ctrl_c() -> None:
    """In a child before it starts: SIGINT as a terminal gives it, even when this process was
    started with SIGINT ignored (a background job of a script), which the child would
    inherit and never be interrupted."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def wait_for_lines(path: Path, count: int, timeout: float = 60) -> None:
    """Until the file holds `count` whole lines (the run has recorded that many turns)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_bytes().count(b"\n") >= count:
            return
        time.sleep(0.01)
    raise AssertionError(f"{path} never reached {count} lines")


def small_run(tmp_path: Path, *extra: str, agents: str = "2") -> subprocess.CompletedProcess:
    """A quick simulated run into tmp_path/r that must succeed."""
    args = ("run", "--agents", agents, "--rounds", "1", "--limit", "3", "--out", "r", *extra)
    result = mad_eval(*args, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    return result


def turns_of(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "turns.jsonl").read_text().splitlines()]


def turns_by_key(run_dir: Path) -> dict[tuple, dict]:
    """A run folder's turns by (run, question, round, agent)."""
    return {(t["run"], t["question"], t["round"], t["agent"]): t for t in turns_of(run_dir)}


def without_timing(turns: list[dict]) -> list[dict]:
    """Turns in key order, less what timing decides: latency, and the numbers of wrong
    answers' classes (given in grading order; renumbered here in round and agent order, so
    what two runs are compared on is which turns share a class)."""
    ordered = sorted(
        ({k: v for k, v in t.items() if k != "latency"} for t in turns),
        key=lambda t: (t["run"], t["question"], t["round"], t["agent"]),
    )
    numbers: dict[tuple, dict[int, int]] = {}
    for t in ordered:
        if t.get("answer_class"):
            mine = numbers.setdefault((t["run"], t["question"]), {})
            t["answer_class"] = mine.setdefault(t["answer_class"], len(mine) + 1)
    return ordered


def closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on: connections to it are refused."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]  # closed again on return


def no_hub(tmp_path: Path) -> dict[str, str | None]:
    """The environment of a machine whose hub refuses connections and whose hub cache (in
    tmp_path) is empty, whatever the developer's shell sets."""
    return {
        "HF_ENDPOINT": f"http://127.0.0.1:{closed_port()}",
        "HF_HUB_CACHE": str(tmp_path / "hub"),
        "HF_HUB_OFFLINE": None,
    }
