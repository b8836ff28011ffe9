"""Does an experiment keep the server busy between its cells? Many small cells (run folders)
against tests/stub_server.py's server, whose every request takes a fixed time, scheduled
two ways: one `api.experiment` (every cell through one window of debates, sharing the
endpoint's request limit) and the same cells one after another, an `api.run` each, as a
shell loop of `mad-eval run` would run them.

    .venv/bin/python perf/experiment.py                # 24 cells, 792 turns of 0.1 s, c = 16
    .venv/bin/python perf/experiment.py --processes    # whole processes, start-up included
    .venv/bin/python perf/experiment.py --quick        # 8 cells, for the tests

By default both schedules run in this process, after a warm-up run (so neither pays the
imports); `--processes` times `mad-eval experiment run FILE` against a loop of `mad-eval
run` processes instead. The stub has no capacity limit of its own: mad-eval's
--concurrency is the server's capacity here, and the ideal wall time is the work (turns x
latency) over it.
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import statistics
import sys
import tempfile
import time
from itertools import product
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from runs import mad_eval as command
from runs import questions_file, timed
from stub import Stub

from mad_eval import api

MODEL = "openai:stub-model"
SCHEDULES = ("experiment", "sequential")


def experiment_file(folder: Path, benchmarks: list[Path], args: argparse.Namespace) -> Path:
    """Every cell as one grid: benchmarks x agents x rounds."""
    path = folder / "cells.toml"
    path.write_text(f"""
[experiment]
name = "bench"
out = {json.dumps(str(folder / "experiment"))}

[settings]
concurrency = {args.concurrency}
max_tokens = 64

[models.stub]
model = "{MODEL}"
base_url = "{args.url}"

[grids.cells]
benchmarks = {json.dumps([str(b) for b in benchmarks])}
agents = {args.agents}
rounds = {args.rounds}
""")
    return path


def experiment(file: Path, processes: bool) -> float:
    start = time.perf_counter()
    if processes:
        timed(command("experiment", "run", str(file)))
    else:
        api.experiment(file)
    return time.perf_counter() - start


def sequential(cells: list[tuple[Path, int, int]], args: argparse.Namespace, out: Path) -> float:
    """The same cells, one run after another."""
    start = time.perf_counter()
    for i, (benchmark, agents, rounds) in enumerate(cells):
        if args.processes:
            timed(command("run", "--model", MODEL, "--base-url", args.url, "--benchmark",
                          str(benchmark), "--agents", str(agents), "--rounds", str(rounds),
                          "--concurrency", str(args.concurrency), "--max-tokens", "64",
                          "--out", str(out / f"cell{i}")))  # fmt: skip
        else:
            api.run(model=MODEL, base_url=[args.url], benchmark=str(benchmark),
                    agents=agents, rounds=rounds, concurrency=args.concurrency,
                    max_tokens=64, out=out / f"cell{i}")  # fmt: skip
    return time.perf_counter() - start


def busy(folder: Path, turns: int) -> float:
    """Seconds of requests recorded in the run folders under `folder`, once every turn is
    found there and none failed."""
    records = [json.loads(line) for f in folder.rglob("turns.jsonl") for line in f.open()]
    failed = sum(turn["error"] is not None for turn in records)
    if len(records) != turns or failed:
        raise SystemExit(f"{folder}: {len(records)} turns ({failed} failed), not {turns}")
    return sum(turn["latency"] for turn in records)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--questions", type=int, nargs="+", default=[1, 2, 3, 5],
                        help="the cells' benchmark sizes")  # fmt: skip
    parser.add_argument("--agents", type=int, nargs="+", default=[3, 5])
    parser.add_argument("--rounds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--latency", type=float, default=0.1, help="seconds per request")
    parser.add_argument("--concurrency", type=int, default=16, help="the server's capacity")
    parser.add_argument("--repeat", type=int, default=1, help="pairs of schedules")
    parser.add_argument("--processes", action="store_true", help="time whole processes")
    parser.add_argument("--quick", action="store_true", help="8 cells of 0.05 s requests")
    args = parser.parse_args()
    if args.quick:
        args.questions, args.agents, args.rounds = [1, 2], [2, 3], [1, 2]
        args.latency, args.concurrency = 0.05, 8
    logging.getLogger("mad_eval").setLevel(logging.ERROR)  # the stub reports no context length

    work = Path(tempfile.mkdtemp(prefix="bench-experiment-"))
    benchmarks = [questions_file(work, n) for n in args.questions]
    cells = list(product(benchmarks, args.agents, args.rounds))
    turns = sum(int(b.stem[1:]) * agents * (rounds + 1) for b, agents, rounds in cells)
    walls: dict[str, list[float]] = {name: [] for name in SCHEDULES}
    in_flight: dict[str, list[float]] = {name: [] for name in SCHEDULES}
    with Stub(args.latency) as stub:
        args.url = stub.url
        if not args.processes:  # imports and first connections, outside both timings
            api.run(model=MODEL, base_url=[stub.url], benchmark=str(benchmarks[0]),
                    agents=2, rounds=1, limit=1, out=work / "warm-up")  # fmt: skip
        for i in range(args.repeat):
            pair = work / f"pair{i}"
            pair.mkdir()
            file = experiment_file(pair, benchmarks, args)
            walls["experiment"].append(experiment(file, args.processes))
            walls["sequential"].append(sequential(cells, args, pair / "sequential"))
            for name in SCHEDULES:
                in_flight[name].append(busy(pair / name, turns) / walls[name][-1])
    shutil.rmtree(work)  # kept when a schedule fails

    ideal = turns * args.latency / args.concurrency
    how = "whole processes" if args.processes else "one process, after a warm-up run"
    print(f"{len(cells)} cells (questions {args.questions} x agents {args.agents} x rounds "
          f"{args.rounds}), {turns} turns of {args.latency:g} s, concurrency {args.concurrency}, "
          f"{how}, {args.repeat} pair(s)")  # fmt: skip
    print("| schedule | wall (median) | / ideal | mean requests in flight |")
    print("| --- | --- | --- | --- |")
    print(f"| ideal: turns x latency / concurrency | {ideal:.2f} s | 1.00 | {args.concurrency} |")
    wall = {name: statistics.median(walls[name]) for name in SCHEDULES}
    labels = ("one experiment", f"{len(cells)} runs in turn")
    for name, label in zip(SCHEDULES, labels, strict=True):
        mean = statistics.median(in_flight[name])
        print(f"| {name} ({label}) | {wall[name]:.2f} s | {wall[name] / ideal:.2f} | {mean:.1f} |")
    pairs = " / ".join(f"{e:.2f}-{s:.2f} s" for e, s in zip(*walls.values(), strict=True))
    print(f"experiment / sequential: {wall['experiment'] / wall['sequential']:.2f} ({pairs})")


if __name__ == "__main__":
    main()
