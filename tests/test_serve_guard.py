"""The guard that leads a served checkpoint's process group (mad_eval/serving/guard.py): it ends
as its server ended, and a stop signal to the group ends both, on Linux (sigtimedwait) and
where there is no sigtimedwait (macOS: the pending signals are checked). That it takes the
group down when mad-eval dies: tests/test_serve.py (kill -9 of mad-eval)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest
from serving_helpers import group, group_gone, wait_until

from mad_eval.serving.launch import GUARD

WITHOUT_SIGTIMEDWAIT = (
    "import runpy, signal, sys; del signal.sigtimedwait; sys.argv = sys.argv[1:]; "
    "runpy.run_path(sys.argv[0], run_name='__main__')"
)


def guard(server: str, portable: bool = False) -> subprocess.Popen:
    """The guard (as LocalServer starts it, or with no sigtimedwait) over `python -c server`."""
    start = [sys.executable, "-I", "-S"] + (["-c", WITHOUT_SIGTIMEDWAIT] if portable else [])
    command = [*start, GUARD, str(os.getpid()), "5", sys.executable, "-c", server]
    return subprocess.Popen(command, start_new_session=True)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("server", "code"),
    [
        ("import sys; sys.exit(3)", 3),
        ("pass", 0),
        ("import os, signal; os.kill(os.getpid(), signal.SIGKILL)", -signal.SIGKILL),
    ],
)
def test_the_guard_ends_as_its_server_ended(server, code):
    process = guard(server)
    assert process.wait(timeout=60) == code
    assert group_gone(process.pid)


@pytest.mark.slow
@pytest.mark.parametrize("portable", [False, True], ids=["sigtimedwait", "pending"])
def test_a_stop_signal_to_the_group_ends_the_server_and_then_the_guard(portable):
    process = guard("import time; print('up', flush=True); time.sleep(600)", portable)
    # the server's own process is up in the guard's group (its guard and itself)
    assert wait_until(lambda: len(group(process.pid)) == 2, 60)
    os.killpg(process.pid, signal.SIGTERM)  # as LocalServer.stop does
    assert process.wait(timeout=60) == -signal.SIGTERM  # the server's end, passed on
    assert group_gone(process.pid)
