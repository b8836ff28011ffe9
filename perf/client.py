"""Is mad-eval the bottleneck against a server that answers at once? The real `mad-eval run`
(5 agents, 1 round of debate) against perf/instant.py's server, timed as a whole process,
against the minimal client (`openai.AsyncOpenAI` and one semaphore) sending the very same
requests at the same concurrency, also as a whole process.

    .venv/bin/python perf/client.py                       # 1k, 5k, 20k turns, 3 pairs each
    .venv/bin/python perf/client.py --turns 1000 --repeat 5 --baseline /tmp/base

The minimal client's rounds do not wait for each other, which only helps it. Prints, per
size, the median wall time of each side, their ratio, and each process's CPU per request
(user + system, from wait4). `--baseline TREE` times another checkout of mad-eval
(first on PYTHONPATH) in the same session, alternating with this one.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from instant import instant_server
from runs import HERE, checkouts, mad_eval, questions_file, timed

AGENTS, ROUNDS = 5, 1


def run_command(benchmark: Path, url: str, out: Path, concurrency: int) -> list[str]:
    return mad_eval("run", "--model", "openai:instant", "--base-url", url, "--benchmark",
                    str(benchmark), "--agents", str(AGENTS), "--rounds", str(ROUNDS),
                    "--concurrency", str(concurrency), "--out", str(out))  # fmt: skip


def replay_command(bodies: Path, url: str, concurrency: int, dependent: bool) -> list[str]:
    command = [sys.executable, str(HERE / "perf" / "instant.py"), "replay", str(bodies),
               "--base-url", url, "--concurrency", str(concurrency)]  # fmt: skip
    return command + (["--agents", str(AGENTS)] if dependent else [])


def _timed(command: list[str], tree: Path) -> tuple[float, float]:
    wall, cpu, _ = timed(command, tree)
    return wall, cpu


def compare(
    turns: int,
    repeat: int,
    concurrency: int,
    trees: dict[str, Path],
    delay: tuple[float, float] = (0.0, 0.0),
    dependent: bool = False,
) -> dict[str, list[tuple[float, float]]]:
    """{side: [(wall, cpu), ...]} for mad-eval from each tree and the minimal client."""
    work = Path(tempfile.mkdtemp(prefix="bench-client-"))
    benchmark = questions_file(work, turns // (AGENTS * (ROUNDS + 1)))
    bodies = work / "bodies.jsonl"
    with instant_server(record=bodies) as url:  # the requests a run sends, once
        timed(run_command(benchmark, url, work / "record", concurrency))
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in [*trees, "minimal"]}
    with instant_server(delay) as url:
        for i in range(repeat):
            for name, tree in trees.items():
                out = work / f"{name}{i}"
                times[name].append(_timed(run_command(benchmark, url, out, concurrency), tree))
            command = replay_command(bodies, url, concurrency, dependent)
            times["minimal"].append(_timed(command, HERE))
    return times


def report(turns: int, times: dict[str, list[tuple[float, float]]]) -> list[str]:
    minimal = statistics.median(wall for wall, _ in times["minimal"])
    rows = []
    for name, runs in times.items():
        wall = statistics.median(w for w, _ in runs)
        cpu = statistics.median(c for _, c in runs) / turns * 1000
        rows.append(f"| {turns:,} | {name} | {wall:.2f} s | {wall / minimal:.2f} | {cpu:.2f} ms |")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, nargs="+", default=[1000, 5000, 20000])
    parser.add_argument("--repeat", type=int, default=3, help="pairs of runs per size")
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--baseline", type=Path, help="another mad-eval checkout to time too")
    args = parser.parse_args()
    trees = checkouts(args.baseline, "mad-eval")
    print("| turns | client | wall (median) | / minimal | CPU per request |")
    print("| --- | --- | --- | --- | --- |")
    ratios = []
    for turns in args.turns:
        times = compare(turns, args.repeat, args.concurrency, trees)
        for row in report(turns, times):
            print(row, flush=True)
        mine = statistics.median(w for w, _ in times["mad-eval"])
        ratios.append(mine / statistics.median(w for w, _ in times["minimal"]))
    summary = " / ".join(f"{r:.2f}x" for r in ratios)
    sizes = " / ".join(f"{t:,}" for t in args.turns)
    print(f"mad-eval / minimal client, whole processes, {sizes} turns: {summary}")


if __name__ == "__main__":
    main()
