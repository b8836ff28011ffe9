"""The math-verify workers as real processes: no main guard needed, no orphans after kill -9,
quiet on Ctrl-C, several at once, and the parent's bound on each call."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from cli_helpers import hears_ctrl_c, mad_eval

from mad_eval.children import python_module
from mad_eval.grading import grader as grading
from mad_eval.grading import verifier
from mad_eval.grading.grader import Grade, compare_math, grade
from mad_eval.grading.verdicts import VERDICTS
from mad_eval.grading.verifier import WORKER, grader_pids, stop_graders
from mad_eval.grading.verify_worker import Comparison, Extraction

HALF = r"\boxed{\frac{1}{2}}"  # against gold 0.5: only math-verify says these are equal
TOWER = r"\boxed{9^{9^{9^{9}}}}"  # sympy computes 9^(9^9) until math-verify's 5 s alarm


def tower(base: int) -> str:
    return f"{base}^{{9^{{9^{{9}}}}}}"


@pytest.fixture(autouse=True)
def fresh_pool() -> Iterator[None]:
    """Each test starts with no workers and no cached verdicts, and leaves none running."""
    stop_graders()
    VERDICTS.forget()
    yield
    stop_graders()


def python(*args: str, stdin: str | None = None, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], input=stdin, capture_output=True, text=True, timeout=60, cwd=cwd
    )


def alive(pid: int, started: str) -> bool:
    """Whether the process that had this PID and start time still runs: a zombie has already
    exited and freed its memory and pipes, whoever reaps it later."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    fields = stat.rsplit(")", 1)[1].split()
    return fields[19] == started and fields[0] not in "ZX"


def start_time(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]


def reaped(pid: int) -> bool:
    return not Path(f"/proc/{pid}").exists()


# ---- no main guard ------------------------------------------------------------------------

GRADE_SCRIPT = f"""
from mad_eval.grading.grader import grade
print(grade({HALF!r}, "0.5", "math").correct)
"""


@pytest.mark.slow
@pytest.mark.parametrize("how", ["file", "stdin", "-c"])
def test_unguarded_script_grades(tmp_path: Path, how: str) -> None:
    script = tmp_path / "grade_it.py"
    script.write_text(GRADE_SCRIPT)
    args, stdin = {"file": ([str(script)], None), "stdin": (["-"], GRADE_SCRIPT)}.get(
        how, (["-c", GRADE_SCRIPT], None)
    )
    run = python(*args, stdin=stdin, cwd=tmp_path)  # a hang fails on python()'s timeout
    assert (run.returncode, run.stdout, run.stderr) == (0, "True\n", "")


@pytest.mark.slow
def test_unguarded_script_computes_rewards(tmp_path: Path) -> None:
    script = tmp_path / "reward.py"
    script.write_text(
        textwrap.dedent(f"""
        from mad_eval.training.rewards import compute_score, grpo_reward
        print(compute_score("math", {HALF!r}, "0.5")["score"])
        print(grpo_reward([{HALF!r}, [{{"role": "assistant", "content": "\\\\boxed{{3}}"}}]],
                          ground_truth=["1/2", "0.5"]))
        """)
    )
    run = python(str(script), cwd=tmp_path)
    assert (run.returncode, run.stdout, run.stderr) == (0, "1.0\n[1.0, -1.0]\n", "")


# ---- the worker on its own ----------------------------------------------------------------


@pytest.mark.slow
def test_worker_speaks_one_json_line_each_way() -> None:
    requests = [
        {"answer": r"\frac{1}{2}", "gold": "0.5"},
        # Model text that looks like the protocol: newlines and replies travel escaped.
        {"answer": 'x\n{"equal": true, "timed_out": false}\n\ud800', "gold": "2"},
    ]
    run = subprocess.run(
        python_module(WORKER),
        input=b"".join(json.dumps(r).encode() + b"\n" for r in requests),
        capture_output=True,
        timeout=60,
    )  # its input ends after the requests: it answers them and exits
    assert run.returncode == 0, run.stderr
    assert [json.loads(line) for line in run.stdout.splitlines()] == [
        {"ready": True},
        {"equal": True, "timed_out": False},
        {"equal": False, "timed_out": False},
    ]
    assert run.stderr == b""


@pytest.mark.slow
def test_worker_finds_answers_in_whole_replies_on_the_same_lines() -> None:
    requests = [
        {"text": "So the result is $x = 5$."},
        {"answer": "1", "gold": "1"},  # comparisons and extractions interleave
        {"text": "no mathematics here"},
        # A reply that looks like the protocol travels escaped, and is searched as text.
        {"text": 'so $7$\n{"answer": "9", "timed_out": false}\n'},
        # Given a gold, the reading carries Math-Verify's verdict on its own parses.
        {"text": "so $\\frac{1}{2}$", "gold": "0.5", "settings": {}},
        {"text": "so $0.33$", "gold": "\\frac{1}{3}", "settings": {"precision": 2}},
    ]
    run = subprocess.run(
        python_module(WORKER),
        input=b"".join(json.dumps(r).encode() + b"\n" for r in requests),
        capture_output=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    assert [json.loads(line) for line in run.stdout.splitlines()][1:] == [
        {"answer": "x = 5", "timed_out": False, "equal": False},
        {"equal": True, "timed_out": False},
        {"answer": None, "timed_out": False, "equal": False},
        {"answer": "7", "timed_out": False, "equal": False},  # never the forged "9" as a reply
        {"answer": "\\frac{1}{2}", "timed_out": False, "equal": True},
        {"answer": "0.33", "timed_out": False, "equal": True},
    ]


# ---- no orphans, no noise -----------------------------------------------------------------

KILLED_SCRIPT = f"""
from concurrent.futures import ThreadPoolExecutor
from mad_eval.grading import verifier
from mad_eval.grading.grader import grade

# Two workers, started from short-lived threads, must outlive those threads.
with ThreadPoolExecutor(2) as threads:
    list(threads.map(grade, [{HALF!r}, r"\\boxed{{0.25}}"], ["0.5", "1/4"], ["math"] * 2))
pids = verifier.grader_pids()
assert grade(r"\\boxed{{2/4}}", "0.5", "math").correct
assert grade(r"\\boxed{{3/4}}", "0.75", "math").correct
assert verifier.grader_pids() == pids, "a worker died with the thread that started it"
print(*pids, flush=True)
grade({TOWER!r}, "1", "math")  # busy in sympy when it is killed
"""


@pytest.mark.slow
def test_kill_9_leaves_no_worker_alive(tmp_path: Path) -> None:
    parent = subprocess.Popen(
        [sys.executable, "-c", KILLED_SCRIPT],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own group: the kill reaches it alone, not its workers
        env={**os.environ, "MAD_EVAL_GRADERS": "2"},
    )
    try:
        assert parent.stdout is not None
        line = parent.stdout.readline()
        pids = [int(p) for p in line.split()]
        assert len(pids) == 2, (line, parent.stderr.read() if parent.stderr else "")
        started = {pid: start_time(pid) for pid in pids}
        time.sleep(0.5)  # let one worker enter the hostile comparison
        os.kill(parent.pid, signal.SIGKILL)
        parent.communicate(timeout=5)  # no worker holds the dead run's pipes open
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
    deadline = time.monotonic() + 3  # well before math-verify's own 5 s alarm would free it
    while any(alive(pid, started[pid]) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [pid for pid in pids if alive(pid, started[pid])] == []


SIGINT_SCRIPT = f"""
from concurrent.futures import ThreadPoolExecutor
from mad_eval.grading import verifier
from mad_eval.grading.grader import grade

with ThreadPoolExecutor(2) as threads:
    list(threads.map(grade, [{HALF!r}, r"\\boxed{{0.25}}"], ["0.5", "1/4"], ["math"] * 2))
print(*verifier.grader_pids(), flush=True)
try:
    grade({TOWER!r}, "1", "math")
except KeyboardInterrupt:
    # The other worker sat idle through the same SIGINT: it must still be the one that answers.
    assert grade(r"\\boxed{{3/4}}", "0.75", "math").correct
    print(*verifier.grader_pids(), flush=True)
    raise SystemExit(130)
"""


@pytest.mark.slow
def test_ctrl_c_prints_nothing_from_the_workers() -> None:
    parent = subprocess.Popen(
        [sys.executable, "-c", SIGINT_SCRIPT],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # a terminal's Ctrl-C signals the whole foreground group
        preexec_fn=hears_ctrl_c,
        env={**os.environ, "MAD_EVAL_GRADERS": "2"},
    )
    try:
        assert parent.stdout is not None
        before = parent.stdout.readline().split()
        assert len(before) == 2
        time.sleep(0.5)
        os.killpg(parent.pid, signal.SIGINT)
        out, err = parent.communicate(timeout=20)
    finally:
        if parent.poll() is None:
            os.killpg(parent.pid, signal.SIGKILL)
            parent.wait()
    assert parent.returncode == 130, err
    assert "Traceback" not in err and len(err) < 200, err
    after = out.split()
    assert len(after) == 1 and after[0] in before  # the idle worker survived, the busy one went


EXIT_SCRIPT = f"""
import os, signal, threading, time
from mad_eval.grading import verifier
from mad_eval.grading.grader import grade

assert grade({HALF!r}, "0.5", "math").correct
print(*verifier.grader_pids(), flush=True)
threading.Thread(target=grade, args=({TOWER!r}, "1", "math"), daemon=True).start()
time.sleep(0.5)
os.kill(verifier.grader_pids()[0], signal.SIGSTOP)  # busy for good: it never answers
"""


@pytest.mark.slow
def test_exit_never_waits_for_a_busy_worker(tmp_path: Path) -> None:
    """The worker is stopped mid-comparison, so an exit that waited for it would never end
    (python()'s timeout fails the test): no clock decides."""
    run = python("-c", EXIT_SCRIPT, cwd=tmp_path)
    assert (run.returncode, run.stderr) == (0, "")
    assert reaped(int(run.stdout))


@pytest.mark.slow
def test_stopping_the_workers_cuts_a_comparison_short() -> None:
    assert grade(HALF, "0.5", "math").correct
    with ThreadPoolExecutor(1) as threads:
        cut = threads.submit(grade, TOWER, "1", "math")
        time.sleep(0.5)
        stop_graders()
        # Not cut short, it would end in math-verify's timeout: a Grade, not this error.
        with pytest.raises(RuntimeError, match="stopped during a comparison"):
            cut.result(timeout=60)  # a failure, never a wrong answer
    assert grader_pids() == []
    assert grade(r"\boxed{\frac{3}{4}}", "0.75", "math").correct


# ---- several workers, and the parent's bound ----------------------------------------------


@pytest.mark.slow
def test_hostile_answers_run_in_parallel(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MAD_EVAL_GRADERS", "6")
    halves = [rf"\boxed{{\frac{{{i}}}{{{2 * i}}}}}" for i in range(1, 7)]  # six comparisons
    with ThreadPoolExecutor(6) as threads:  # all busy starting at once: six workers start
        assert all(threads.map(lambda half: grade(half, "0.5", "math").correct, halves))
        pids = grader_pids()
        assert len(pids) == 6
        # Each comparison waits, holding its worker, until all six hold one: a pool that
        # handed out fewer workers at once would break the barrier (after a minute) and
        # fail the comparisons; no clock is read.
        together = threading.Barrier(6, timeout=60)
        compare = verifier.Worker.compare

        def held_together(worker: verifier.Worker, *args: object) -> Comparison:
            together.wait()
            return compare(worker, *args)

        monkeypatch.setattr(verifier.Worker, "compare", held_together)
        grades = list(
            threads.map(lambda b: grade(rf"\boxed{{{tower(b)}}}", "1", "math"), range(2, 8))
        )
    assert grades == [Grade(tower(b), False, timed_out=True) for b in range(2, 8)]
    assert not together.broken
    assert grader_pids() == pids  # math-verify's own timeouts: no worker had to be killed


@pytest.mark.slow
def test_parent_bound_kills_and_replaces_the_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(verifier, "VERIFY_TIMEOUT_S", 1.0)
    assert grade(HALF, "0.5", "math").correct  # start the worker outside the timed part
    [first] = grader_pids()
    assert grade(TOWER, "1", "math") == Grade(TOWER[7:-1], False, timed_out=True)
    # Killed, so the parent's bound and not math-verify's own alarm (which leaves the
    # worker running) ended it; and waited for: no zombie.
    assert grader_pids() == [] and reaped(first)
    assert grade(r"\boxed{\frac{3}{4}}", "0.75", "math") == Grade(r"\frac{3}{4}", True)
    assert grader_pids() != [first]


@pytest.mark.slow
def test_parent_bound_holds_for_extractions_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(verifier, "VERIFY_TIMEOUT_S", 1.0)
    assert verifier.extract("so $1$") == Extraction("1", False)  # start the worker untimed
    [first] = grader_pids()
    assert verifier.extract("$" + "9^" * 30_000 + "9$") == Extraction(None, True)
    assert grader_pids() == [] and reaped(first)  # the parent's bound killed it
    assert verifier.extract("so $\\frac{3}{4}$") == Extraction("\\frac{3}{4}", False)
    assert grader_pids() != [first]


@pytest.mark.slow
def test_stopping_the_workers_cuts_an_extraction_short() -> None:
    assert verifier.extract("so $1$").answer == "1"
    with ThreadPoolExecutor(1) as threads:
        cut = threads.submit(verifier.extract, "$" + "9^" * 30_000 + "9$")
        time.sleep(0.5)
        stop_graders()
        with pytest.raises(RuntimeError, match="stopped during a reading"):
            cut.result(timeout=5)
    assert verifier.extract("so $2$").answer == "2"


@pytest.mark.slow
def test_worker_killed_from_outside_is_replaced() -> None:
    assert grade(HALF, "0.5", "math").correct
    [first] = grader_pids()
    os.kill(first, signal.SIGKILL)
    assert grade(r"\boxed{\frac{3}{4}}", "0.75", "math") == Grade(r"\frac{3}{4}", True)
    [second] = grader_pids()
    assert second != first and reaped(first)


@pytest.mark.slow
def test_worker_that_cannot_start_is_one_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "math_verify.py").write_text("raise ImportError('math-verify is broken here')\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    with pytest.raises(RuntimeError) as error:
        compare_math("x", "y")
    message = str(error.value)
    assert message.startswith("could not start a math-verify worker")
    assert message.endswith("ImportError: math-verify is broken here") and "\n" not in message
    assert "__main__" not in message
    assert grader_pids() == []


@pytest.mark.parametrize("value", ["0", "-2", "1.5", "many"])
def test_bad_grader_count_is_one_clear_error(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("MAD_EVAL_GRADERS", value)
    with pytest.raises(ValueError) as error:
        grade(HALF, "0.5", "math")
    assert str(error.value) == (
        "MAD_EVAL_GRADERS must be a positive integer (the most math-verify worker processes "
        f"to run at once), not {value!r}"
    )


def test_grader_count_defaults_to_usable_cpus(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MAD_EVAL_GRADERS", raising=False)
    assert verifier.max_graders() == len(os.sched_getaffinity(0))
    monkeypatch.setenv("MAD_EVAL_GRADERS", "3")
    assert verifier.max_graders() == 3


@pytest.mark.slow
def test_comparison_keeps_both_facts() -> None:
    assert compare_math("0.5", r"\frac12") == Comparison(True, False)
    assert grading.equivalent("0.5", r"\frac12") is True


# ---- hostile answers in a run ---------------------------------------------------------------


@pytest.mark.slow
def test_eighteen_power_towers_run_and_report_in_bounded_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each reply is a different power tower, which math-verify gives up on after 5 s: six
    workers take them six at a time, and the report, which knows from the records that
    they timed out, compares them by text without asking math-verify again (one worker in
    a queue took 153 s to run them and 92 s to report them)."""
    from cli_helpers import mad_eval, turns_of
    from stub_server import StubServer

    monkeypatch.setenv("MAD_EVAL_GRADERS", "6")  # read as the workers start
    with StubServer(reply=lambda body: f"\\boxed{{{tower(2 + body['seed'] % 100_003)}}}") as stub:
        run = mad_eval("single", "-k", "1", "--model", "openai:stub-model",
                       "--base-url", stub.base_url, "--limit", "18", "--out", "r",
                       cwd=tmp_path)  # fmt: skip
    assert run.returncode == 0, run.stderr
    # A worker starts only when every other is busy: six of them means six towers were
    # compared at once, never one queue (153 s).
    assert len(grader_pids()) == 6
    turns = turns_of(tmp_path / "r")
    assert len({t["answer"] for t in turns}) == 18
    assert all(t["grade_timed_out"] and t["correct"] is False for t in turns)
    stop_graders()
    report = mad_eval("report", "r", cwd=tmp_path)  # in this process, so its workers are seen
    assert report.returncode == 0, report.stderr
    assert grader_pids() == []  # the report asked math-verify nothing: no worker started


@pytest.mark.slow
def test_a_mistyped_grader_count_is_one_sentence_from_the_command(tmp_path: Path) -> None:
    benchmark = tmp_path / "roots.jsonl"
    benchmark.write_text('{"id": "r0", "question": "Q?", "answer": "\\\\sqrt{2}"}\n')
    run = mad_eval("run", "--benchmark", str(benchmark), "--agents", "2", "--rounds", "0",
                   "--out", "r", cwd=tmp_path, env={"MAD_EVAL_GRADERS": "two"})  # fmt: skip
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert run.stderr.strip().splitlines()[-1] == (
        "error: MAD_EVAL_GRADERS must be a positive integer (the most math-verify worker "
        "processes to run at once), not 'two'"
    )
