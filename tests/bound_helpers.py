"""Guards for tests of what a hostile template may spend: a memory bound on this process,
the peak memory of a call, and the real command with a memory bound and a hang guard, so a
test that fails (the bound broken again) fails in seconds instead of filling the machine."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import hears_ctrl_c, start

COMMAND_MEMORY = 2 << 30  # address space a guarded command may take


@contextmanager
def memory_bound(extra: int = 3 << 29) -> Iterator[None]:
    """This process's address space bounded to what it holds now plus `extra`: a render
    that would fill memory raises MemoryError instead."""
    resource = pytest.importorskip("resource")
    statm = Path("/proc/self/statm")
    if not statm.exists():
        pytest.skip("needs /proc to know this process's address space")
    used = int(statm.read_text().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    bound = used + extra if hard == resource.RLIM_INFINITY else min(used + extra, hard)
    resource.setrlimit(resource.RLIMIT_AS, (bound, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def peak_memory(call: Callable[[], Any]) -> int:
    """The most memory Python held at once while `call` ran (an exception it raises
    propagates)."""
    tracemalloc.start()
    try:
        call()
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    return peak


def _limited() -> None:
    import resource

    hears_ctrl_c()
    resource.setrlimit(resource.RLIMIT_AS, (COMMAND_MEMORY, COMMAND_MEMORY))


def guarded(args: list[str], cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    """`mad-eval ARGS` as a process with COMMAND_MEMORY of address space; a command still
    running after `timeout` seconds (a hang) is killed and the test fails."""
    pytest.importorskip("resource")
    try:
        return subprocess.run(
            [sys.executable, "-m", "mad_eval", *args],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=timeout,
            preexec_fn=_limited,
            env={**os.environ, "COLUMNS": "200"},
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"mad-eval {' '.join(args)} was still running after {timeout:g} s")


def start_guarded(args: list[str], cwd: Path) -> subprocess.Popen:
    """`mad-eval ARGS` running, with COMMAND_MEMORY, in a session of its own."""
    return start(args, cwd, memory=COMMAND_MEMORY)


def wait_until_it_handles(proc: subprocess.Popen, sig: signal.Signals, timeout: float = 60) -> None:
    """Until the process has its own handler for `sig` (Linux's SigCgt), so a signal sent
    now reaches the command, not the interpreter starting up."""
    status = Path(f"/proc/{proc.pid}/status")
    if not status.exists():
        proc.kill()
        pytest.skip("needs /proc to know when the command handles signals")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        lines = status.read_text().splitlines()
        caught = next((line.split()[1] for line in lines if line.startswith("SigCgt")), "0")
        if int(caught, 16) >> (sig - 1) & 1:
            return
        time.sleep(0.05)
    proc.kill()
    _, err = proc.communicate()
    pytest.fail(f"the command never handled {sig.name} (exit {proc.returncode}): {err[-500:]}")
