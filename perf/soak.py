"""Soak: the real `mad-eval run` against a server that fails at random, stopped again and
again (kill -9, Ctrl-C, SIGTERM) at random moments and resumed, for minutes on end.

    .venv/bin/python perf/soak.py --minutes 10
    .venv/bin/python perf/soak.py --seconds 30 --fault-rate 0.3 --json soak.json

The server (its own process) answers each request by its seed, as a seeded model would,
and fails a `--fault-rate` share of all requests in one of the ways a real deployment does:
429, 503, a hang past the client's timeout, a dropped connection, an HTML page, cut JSON,
invalid UTF-8, no choices. Every fault is transient, so a run that survives them and its
stops must end exactly equal to a fault-free reference run. Every answer is a fraction, so
each one is graded by the math-verify workers, which a kill -9 must not orphan.

Reported, summed over every run finished during the soak: turns lost (in the reference,
missing from the run), duplicated (a key recorded twice), spurious failures (recorded as
failed although every fault was transient), different (recorded, but not the reference's
answer); grading workers left alive 5 s after their run was killed; and the RSS of the run
and its workers over time.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from stub_server import BAD_BODIES, StubServer

FAULTS = ("429", "503", "hang", "drop", *BAD_BODIES)
STOPS = ("kill -9", "Ctrl-C", "SIGTERM")
KEY = ("run", "question", "round", "agent")


def reply(body: dict) -> str:
    seed = body["seed"]
    return f"Working... so the answer is \\boxed{{\\frac{{{2 * (seed % 7)}}}{{2}}}}"


def serve(rate: float, seed: int, urls: multiprocessing.Queue, stop) -> None:  # type: ignore[no-untyped-def]
    rng = random.Random(seed)

    def fault(body: dict, attempt: int) -> str | None:
        return rng.choice(FAULTS) if rng.random() < rate else None

    with StubServer(reply=reply, fault=fault if rate else None, delay=0.01, hang=1.5) as s:
        urls.put(s.base_url)
        stop.wait()


def start_server(rate: float, seed: int) -> tuple[multiprocessing.Process, str, object]:
    urls: multiprocessing.Queue = multiprocessing.Queue()
    stop = multiprocessing.Event()
    process = multiprocessing.Process(target=serve, args=(rate, seed, urls, stop), daemon=True)
    process.start()
    return process, urls.get(timeout=30), stop


def command(url: str, out: Path, args: argparse.Namespace) -> list[str]:
    return [
        sys.executable, "-m", "mad_eval", "run", "--model", "openai:stub-model",
        "--base-url", url, "--agents", str(args.agents), "--rounds", str(args.rounds),
        "--limit", str(args.questions), "--timeout", "1", "--retries", "10",
        "--backoff", "0.01", "--concurrency", "16", "--max-model-len", "100000",
        "--out", str(out),
    ]  # fmt: skip


def records(out: Path) -> list[dict]:
    path = out / "turns.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def descendants(pid: int) -> list[int]:
    """The process and every process under it, from /proc."""
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        try:  # any of them may exit while it is looked at
            for task in Path(f"/proc/{current}/task").iterdir():
                todo += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
    return found


def alive(pid: int) -> bool:
    """Running, not a zombie waiting to be reaped."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "State:\tZ" not in status


def rss_mb(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            continue
    return total / 1024


def compare(run: list[dict], reference: dict[tuple, dict]) -> dict[str, int]:
    keys = [tuple(t[k] for k in KEY) for t in run]
    by_key = {key: t for key, t in zip(keys, run, strict=True)}
    return {
        "lost": len(set(reference) - set(by_key)),
        "duplicated": len(keys) - len(set(keys)),
        "spurious_failures": sum(1 for t in run if t["error"] is not None),
        "different": sum(
            1
            for key, t in by_key.items()
            if key in reference and (t["text"], t["answer"]) != reference[key]
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--seconds", type=float, help="instead of --minutes")
    parser.add_argument("--fault-rate", type=float, default=0.2, help="share of requests")
    parser.add_argument("--questions", type=int, default=30)
    parser.add_argument("--agents", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, help="write the figures here too")
    args = parser.parse_args()
    duration = args.seconds if args.seconds is not None else 60 * args.minutes
    rng = random.Random(args.seed)
    work = Path(tempfile.mkdtemp(prefix="mad-eval-soak-"))

    clean, clean_url, clean_stop = start_server(0.0, args.seed)
    subprocess.run(command(clean_url, work / "reference", args), check=True,
                   capture_output=True)  # fmt: skip
    clean_stop.set()  # type: ignore[attr-defined]
    clean.join()
    reference = {
        tuple(t[k] for k in KEY): (t["text"], t["answer"]) for t in records(work / "reference")
    }
    assert not any(t["error"] for t in records(work / "reference")), "the reference failed"

    faulty, url, stop = start_server(args.fault_rate, args.seed + 1)
    totals = dict.fromkeys(("lost", "duplicated", "spurious_failures", "different"), 0)
    stops = dict.fromkeys(STOPS, 0)
    finished = orphans = starts = 0
    samples: list[tuple[float, float]] = []
    began = time.monotonic()
    out = work / "run0"
    env = {**os.environ, "COLUMNS": "200"}
    while True:
        # Once the time is up, the run in hand is left to finish, so every soak ends on a
        # complete run compared with the reference.
        final = time.monotonic() - began >= duration
        proc = subprocess.Popen(command(url, out, args), stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True, start_new_session=True,
                                env=env)  # fmt: skip
        starts += 1
        deadline = float("inf") if final else time.monotonic() + rng.uniform(0.5, 6.0)
        while proc.poll() is None and time.monotonic() < deadline:
            samples.append((time.monotonic() - began, rss_mb(descendants(proc.pid))))
            time.sleep(0.25)
        if proc.poll() is None:
            how = rng.choice(STOPS)
            stops[how] += 1
            family = descendants(proc.pid)
            if how == "kill -9":
                os.kill(proc.pid, signal.SIGKILL)  # the run alone: its workers must follow
            elif how == "Ctrl-C":
                os.killpg(proc.pid, signal.SIGINT)  # as a terminal sends it
            else:
                os.kill(proc.pid, signal.SIGTERM)
            proc.wait(timeout=120)
            if how == "kill -9":
                time.sleep(5)
                orphans += sum(alive(pid) for pid in family[1:])
            continue
        _, stderr = proc.communicate()
        if proc.returncode != 0:
            raise SystemExit(f"a run failed on its own (exit {proc.returncode}):\n{stderr}")
        found = compare(records(out), reference)
        totals = {k: totals[k] + found[k] for k in totals}
        finished += 1
        if final:
            break
        out = work / f"run{finished}"
    stop.set()  # type: ignore[attr-defined]
    faulty.join()
    shutil.rmtree(work, ignore_errors=True)

    figures = {
        "seconds": round(time.monotonic() - began),
        "fault_rate": args.fault_rate,
        "turns_per_run": len(reference),
        "runs_finished": finished,
        "starts": starts,
        "stops": stops,
        **totals,
        "orphaned_workers": orphans,
        "rss_mb_by_minute": rss_by_minute(samples),
    }
    print(json.dumps(figures, indent=2))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")


def rss_by_minute(samples: list[tuple[float, float]]) -> list[dict[str, float]]:
    """Median and peak RSS of the run and its workers (MB) in each minute of the soak."""
    minutes: dict[int, list[float]] = {}
    for at, mb in samples:
        if mb > 0:
            minutes.setdefault(int(at // 60), []).append(mb)
    return [
        {"minute": m, "median": round(statistics.median(v), 1), "peak": round(max(v), 1)}
        for m, v in sorted(minutes.items())
    ]


if __name__ == "__main__":
    main()
