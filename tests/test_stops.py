"""A run that stops (Ctrl-C, SIGTERM, a full disk, a broken cache) records only turns it
finished: each recorded turn equals the same turn of an uninterrupted run, none is failed
for want of a client, and the same command completes the run."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
from cli_helpers import mad_eval, start, turns_of, wait_for_lines, without_timing
from stub_server import StubServer

pytestmark = pytest.mark.slow

QUESTIONS, AGENTS, ROUNDS = 20, 3, 2
TOTAL = QUESTIONS * AGENTS * (ROUNDS + 1)


def served(url: str, out: str, *extra: str) -> list[str]:
    return [
        "run", "--model", "openai:stub-model", "--base-url", url, "--agents", str(AGENTS),
        "--rounds", str(ROUNDS), "--limit", str(QUESTIONS), "--retries", "2",
        "--backoff", "0.01", "--out", out, *extra,
    ]  # fmt: skip


def sentences(stderr: str) -> list[str]:
    """What the command said on stderr besides its up-front warnings."""
    return [line for line in stderr.splitlines() if line and not line.startswith("warning:")]


def assert_only_finished_turns(stopped: list[dict], whole: list[dict]) -> None:
    """Every turn the stopped run recorded is the uninterrupted run's turn, once. Answer
    classes are compared on the same turns: a debate the signal cut holds only some of
    them, and which ones depends on how its requests happened to finish."""
    key = lambda t: (t["run"], t["question"], t["round"], t["agent"])  # noqa: E731
    keys = [key(t) for t in stopped]
    assert len(keys) == len(set(keys))
    assert not [t["error"] for t in stopped if t["error"]]
    same = [t for t in whole if key(t) in set(keys)]
    by_key = {key(t): t for t in without_timing(same)}
    for turn in without_timing(stopped):
        assert turn == by_key[key(turn)]


@pytest.fixture
def server():
    with StubServer(delay=0.03) as stub:
        yield stub


@pytest.fixture
def whole(tmp_path, server) -> list[dict]:
    result = mad_eval(*served(server.base_url, "whole"), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    turns = turns_of(tmp_path / "whole")
    assert len(turns) == TOTAL and not any(t["error"] for t in turns)
    return turns


@pytest.mark.parametrize(
    ("sig", "code", "said"),
    [
        (signal.SIGINT, 130, "Interrupted (Ctrl-C)."),
        (signal.SIGTERM, 143, "Stopped by SIGTERM."),
    ],
)
def test_a_signal_mid_run_records_nothing_unfinished(tmp_path, server, whole, sig, code, said):
    args = served(server.base_url, "stopped", "--concurrency", "4")
    proc = start(args, tmp_path)
    wait_for_lines(tmp_path / "stopped" / "turns.jsonl", 30)
    os.killpg(proc.pid, sig)  # as a terminal's Ctrl-C reaches the whole process group
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == code
    assert sentences(stderr) == [
        f"{said} Every finished turn is in stopped/turns.jsonl; run the same command again "
        "to resume."
    ]
    stopped = turns_of(tmp_path / "stopped")
    assert 30 <= len(stopped) < TOTAL
    assert_only_finished_turns(stopped, whole)

    sent = len(server.requests)
    resumed = mad_eval(*args, cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert without_timing(turns_of(tmp_path / "stopped")) == without_timing(whole)
    # Resuming asked only what was not recorded (plus what was in flight at the signal).
    assert len(server.requests) - sent == TOTAL - len(stopped)


def test_a_cache_that_cannot_be_written_stops_the_run_in_one_sentence(tmp_path, server, whole):
    """The cache's write-ahead log grows a page per answer, so a 600 kB file limit fills it
    long before turns.jsonl: the run stops with the cache's error, no turn is recorded as
    failed, and the same command (with room again) finishes the run."""
    args = served(server.base_url, "stopped", "--concurrency", "8", "--cache", "c.db")
    proc = start(args, tmp_path, file_limit=600_000)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 2, stderr
    (said,) = sentences(stderr)
    assert said.startswith("error: the request cache c.db cannot be written (")
    assert said.endswith("then run the same command again to resume.")
    stopped = turns_of(tmp_path / "stopped")
    assert 0 < len(stopped) < TOTAL
    assert_only_finished_turns(stopped, whole)

    resumed = mad_eval(*args, cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    # Answers cached before the stop but not yet recorded come from the cache now.
    served_again = [{**t, "cached": False, "attempts": 1} for t in turns_of(tmp_path / "stopped")]
    assert without_timing(served_again) == without_timing(whole)


def test_a_full_run_folder_stops_the_run_and_keeps_every_whole_record(tmp_path):
    args = ["run", "--agents", "3", "--rounds", "2", "--limit", "40", "--out", "r"]
    proc = start(args, tmp_path, file_limit=40_000)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 2
    assert sentences(stderr) == [
        "error: cannot write r/turns.jsonl (File too large); every finished record is kept: "
        "free space and run the same command again to resume."
    ]
    data = (tmp_path / "r" / "turns.jsonl").read_bytes()
    assert data.endswith(b"\n") and len(data) <= 40_000  # the partial record was cut off
    recorded = len(turns_of(tmp_path / "r"))

    # Run again while the disk is still full: the same sentence, nothing new, nothing lost.
    again = start(args, tmp_path, file_limit=40_000)
    _, stderr = again.communicate(timeout=120)
    assert again.returncode == 2
    assert sentences(stderr)[0].startswith("error: cannot write r/turns.jsonl")
    assert len(turns_of(tmp_path / "r")) == recorded

    assert mad_eval(*args, cwd=tmp_path).returncode == 0
    assert mad_eval(*args[:-1], "whole", cwd=tmp_path).returncode == 0
    assert without_timing(turns_of(tmp_path / "r")) == without_timing(turns_of(tmp_path / "whole"))


def test_metrics_that_cannot_be_written_leave_no_temporary_file(tmp_path):
    args = ["run", "--agents", "2", "--rounds", "1", "--limit", "3", "--out", "r"]
    assert mad_eval(*args, cwd=tmp_path).returncode == 0
    before = sorted(p.name for p in (tmp_path / "r").iterdir())
    metrics = (tmp_path / "r" / "metrics.json").read_bytes()
    proc = start(["report", "r"], tmp_path, file_limit=len(metrics) // 2)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 2
    assert sentences(stderr) == [
        "error: cannot write r/metrics.json (File too large); free space and run mad-eval "
        "report r to write it."
    ]
    assert sorted(p.name for p in (tmp_path / "r").iterdir()) == before
    assert (tmp_path / "r" / "metrics.json").read_bytes() == metrics  # the old file stands


@pytest.fixture
def small_disk(tmp_path):
    """A 1 MB tmpfs, for a disk that is really full (ENOSPC); mounting needs root."""
    where = tmp_path / "disk"
    where.mkdir()
    mount = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(where)], capture_output=True
    )
    if mount.returncode != 0 or shutil.which("umount") is None:
        pytest.skip("mounting a small tmpfs needs root; the file-size-limit tests cover this")
    yield where
    subprocess.run(["umount", "-l", str(where)], check=False)


def test_a_really_full_cache_disk_stops_the_run(tmp_path, server, whole, small_disk):
    args = served(server.base_url, "stopped", "--cache", str(small_disk / "c.db"))
    result = mad_eval(*args, cwd=tmp_path)
    assert result.returncode == 2
    (said,) = sentences(result.stderr)
    assert "cannot be written (database or disk is full)" in said
    assert_only_finished_turns(turns_of(tmp_path / "stopped"), whole)


def processes_in_group(pgid: int) -> list[int]:
    """Live (not zombie) processes whose process group is `pgid`, from /proc."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] not in "ZX":
            found.append(int(stat.parent.name))
    return found


def test_kill_9_of_a_run_leaves_no_process_of_its_group(tmp_path):
    """The run is killed alone, as an OOM killer or a scheduler would; its math-verify
    workers, one of them busy with a power tower, must go with it."""
    towers = ["\\boxed{9^{9^{9^{9}}}}", "\\boxed{\\frac{4}{2}}"]
    with StubServer(reply=lambda body: towers[body["seed"] % 2], delay=0.05) as stub:
        args = served(stub.base_url, "killed", "--concurrency", "4")
        proc = start(args, tmp_path)
        try:
            deadline = time.monotonic() + 60
            while len(processes_in_group(proc.pid)) < 2:  # the run and a grading worker
                assert time.monotonic() < deadline and proc.poll() is None
                time.sleep(0.05)
            time.sleep(0.5)
            group = processes_in_group(proc.pid)
            os.kill(proc.pid, signal.SIGKILL)
            proc.communicate(timeout=10)  # no worker keeps the dead run's pipes open
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
    deadline = time.monotonic() + 3
    while processes_in_group(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(group) >= 2 and processes_in_group(proc.pid) == []
