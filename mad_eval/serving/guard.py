"""The leader of a served checkpoint's process group: runs the server command as its child
and takes the whole group down when mad-eval goes, however it went.

A parent-death signal reaches only the one process that asked for it: vLLM's API server
killed mid-start leaves its engine process running, holding memory (and on a GPU, the GPU).
So LocalServer starts this guard instead, in a group of its own, and the guard starts the
server in that group. Each POLL it checks that mad-eval (PARENT) is still its parent; once
not, it sends SIGTERM to the group, waits up to GRACE seconds for the server to leave, and
sends SIGKILL to the group, itself included. While mad-eval lives it stops the group as
before (LocalServer.stop: SIGTERM to the group, SIGKILL after its grace); the guard then
just waits for the server and ends as it ended, so an exit code means the server's.

Run as `python -I -S guard.py PARENT GRACE COMMAND...`: the standard library only, so it
starts at once and imports nothing from the working directory or anywhere else."""

import os
import signal
import subprocess
import sys
import time

POLL = 0.2  # seconds between checks of the parent


def main(argv: list[str]) -> None:
    parent, grace, command = int(argv[0]), float(argv[1]), argv[2:]
    told: list[int] = []  # signals received: the group was told to stop (LocalServer.stop)
    for number in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(number, lambda got, _: told.append(got))
    server = subprocess.Popen(command)
    while server.poll() is None and os.getppid() == parent:
        time.sleep(POLL)
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


def end_as(code: int) -> None:
    """Exit as the server did: with its code, or killed by the same signal."""
    if code >= 0:
        sys.exit(code)
    signal.signal(-code, signal.SIG_DFL)
    os.kill(os.getpid(), -code)
    sys.exit(128 - code)  # a signal that does not end a process by default


if __name__ == "__main__":
    main(sys.argv[1:])
