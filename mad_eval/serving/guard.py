"""The leader of a served checkpoint's process group: runs the server command as its child
and takes the whole group down when mad-eval goes, however it went.

A parent-death signal reaches only the one process that asked for it: vLLM's API server
killed mid-start leaves its engine process running, holding memory (and on a GPU, the GPU).
So LocalServer starts this guard instead, in a group of its own, and the guard starts the
server in that group. Each POLL it checks that mad-eval (PARENT) is still its parent; once
not, it sends SIGTERM to the group, waits up to GRACE seconds for the server to leave, and
sends SIGKILL to the group, itself included. While mad-eval lives, mad-eval stops the group
(LocalServer.stop: SIGTERM to the group, SIGKILL after its grace), and the guard just waits
for the server and ends as it ended, so an exit code means the server's.

On Linux the guard also asks for the parent-death signal, so it acts at once rather than at
its next check, and its server gets it too: a supervisor that kills the guard itself with
SIGKILL (Ray kills an actor's children with its actor) still leaves the server SIGTERM, as
before there was a guard, and the group has had its SIGTERM if the guard got that far.

Run as `python -I -S guard.py PARENT GRACE COMMAND...`: the standard library only, so it
starts at once and imports nothing from the working directory or anywhere else."""

import ctypes
import os
import signal
import subprocess
import sys
import time

POLL = 0.2  # seconds between checks of the parent
PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>
STOPS = {signal.SIGTERM, signal.SIGINT, signal.SIGHUP}  # waited for, never handled


def die_with_parent() -> None:
    """SIGTERM this process when its parent dies (Linux; elsewhere the polling covers it)."""
    if sys.platform == "linux":
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


def server_setup() -> None:  # runs in the server's process before exec
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOPS)
    die_with_parent()


def main(argv: list[str]) -> None:
    parent, grace, command = int(argv[0]), float(argv[1]), argv[2:]
    signal.pthread_sigmask(signal.SIG_BLOCK, STOPS)  # each wakes sigtimedwait at once
    die_with_parent()
    server = subprocess.Popen(command, preexec_fn=server_setup)
    told = False  # a stop signal came: the group was told to stop (LocalServer.stop)
    while server.poll() is None and os.getppid() == parent:
        told = stop_came(POLL) or told
    if os.getppid() != parent:  # mad-eval is gone: nobody else will stop this group
        sys.stderr.write(f"mad-eval (pid {parent}) is gone: stopping the server's group.\n")
        sys.stderr.flush()
        os.killpg(0, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while server.poll() is None and time.monotonic() < deadline:
            time.sleep(POLL)
        os.killpg(0, signal.SIGKILL)
    if not told:  # the server ended by itself: what it started, its engine, goes too
        os.killpg(0, signal.SIGTERM)
    end_as(server.wait())


def stop_came(timeout: float) -> bool:
    """Wait up to `timeout` seconds for a stop signal (blocked, so taken here, never lost);
    whether one came."""
    if hasattr(signal, "sigtimedwait"):  # Linux: woken at once
        return signal.sigtimedwait(STOPS, timeout) is not None
    time.sleep(timeout)  # macOS has no sigtimedwait
    pending = signal.sigpending() & STOPS
    if pending:
        signal.sigwait(pending)
    return bool(pending)


def end_as(code: int) -> None:
    """Exit as the server did: with its code, or killed by the same signal."""
    for number in STOPS:  # what is pending from the group's signals is dropped
        signal.signal(number, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOPS)
    if code >= 0:
        sys.exit(code)
    if -code != signal.SIGKILL:  # whose disposition cannot be set, nor needs to be
        signal.signal(-code, signal.SIG_DFL)
    os.kill(os.getpid(), -code)
    sys.exit(128 - code)  # a signal that does not end a process by default


if __name__ == "__main__":
    main(sys.argv[1:])
