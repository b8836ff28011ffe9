"""How long `mad-eval experiment run FILE --dry-run` takes on a big grid of small cells,
timed whole (start-up included), the median of repeated runs; and how long a file over the
limits takes to be refused.

    .venv/bin/python perf/experiment_dryrun.py
    .venv/bin/python perf/experiment_dryrun.py --baseline /tmp/base30   # another checkout
    .venv/bin/python perf/experiment_dryrun.py --cells 10000 --repeats 3

The grid: models x agents 1..5 x rounds 0..19 (100 cells per model) on `arith`, two
questions each, simulated agents. Runs alternate between the trees, so a busy machine slows
both alike. A tree that knows [experiment] max_cells gets it raised to --cells; a baseline
that does not gets the same grid without it. The hostile files (a 100 x 100 agents x rounds
grid, one cell of 100,000 agents) are timed once per tree, cut at --give-up seconds.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]


def grid_file(folder: Path, cells: int, raised: bool) -> Path:
    models = "".join(f'm{i} = "sim"\n' for i in range(max(1, cells // 100)))
    limit = f"[experiment]\nmax_cells = {cells}\n" if raised and cells > 1000 else ""
    path = folder / f"grid{'-raised' if raised else ''}.toml"
    path.write_text(
        f"{limit}[settings]\nlimit = 2\n[models]\n{models}[grids.g]\nbenchmarks = ['arith']\n"
        f"agents = [1, 2, 3, 4, 5]\nrounds = {list(range(20))}\n"
    )
    return path


def hostile_files(folder: Path) -> dict[str, Path]:
    found = {}
    for name, axes in (
        (
            "100 x 100 agents x rounds",
            f"agents = {list(range(1, 101))}\nrounds = {list(range(100))}",
        ),
        ("agents = [100000]", "agents = [100000]"),
    ):
        path = folder / f"hostile{len(found)}.toml"
        path.write_text(f"[models]\nbase = 'sim'\n[grids.g]\nbenchmarks = ['arith']\n{axes}\n")
        found[name] = path
    return found


def knows_limits(tree: Path) -> bool:
    return "max_cells" in (tree / "mad_eval" / "experiments" / "cells.py").read_text()


def once(tree: Path, path: Path, give_up: float) -> tuple[float, str]:
    """Seconds the dry run took, and how it ended (its last line, or that it was cut)."""
    env = {**os.environ, "PYTHONPATH": str(tree), "COLUMNS": "200"}
    command = [sys.executable, "-m", "mad_eval", "experiment", "run", str(path), "--dry-run"]
    start = time.perf_counter()
    try:
        done = subprocess.run(
            command, cwd=path.parent, env=env, capture_output=True, text=True, timeout=give_up
        )
    except subprocess.TimeoutExpired:
        return time.perf_counter() - start, f"no answer in {give_up:.0f} s"
    took = time.perf_counter() - start
    lines = (done.stdout.strip() or done.stderr.strip()).splitlines()
    return took, (lines[-1] if lines else f"exit {done.returncode}")[:300]


# Reading the file and planning every cell, timed inside the process (no start-up).
INSIDE = """
import sys, time
from pathlib import Path
from mad_eval.experiments import load_experiment
from mad_eval.experiments.run import dry_run
start = time.perf_counter()
dry_run(load_experiment(Path(sys.argv[1])))
print(time.perf_counter() - start)
"""


def inside(tree: Path, path: Path) -> float:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    command = [sys.executable, "-c", INSIDE, str(path)]
    done = subprocess.run(command, cwd=path.parent, env=env, capture_output=True, text=True)
    return float(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", type=int, default=1000, help="cells of the big grid")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--give-up", type=float, default=60, help="seconds per hostile file")
    parser.add_argument("--baseline", type=Path, help="another mad-eval checkout to compare")
    args = parser.parse_args()
    trees = {"this tree": HERE}
    if args.baseline:
        trees = {"baseline": args.baseline.resolve(), **trees}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        files = {name: grid_file(folder, args.cells, knows_limits(t)) for name, t in trees.items()}
        times: dict[str, list[float]] = {name: [] for name in trees}
        work: dict[str, list[float]] = {name: [] for name in trees}
        ends: dict[str, str] = {}
        for _ in range(args.repeats):
            for name, tree in trees.items():
                took, ends[name] = once(tree, files[name], 3600)
                times[name].append(took)
                work[name].append(inside(tree, files[name]))
        print(f"dry run of {args.cells:,} small cells, median of {args.repeats}:")
        for name, found in times.items():
            low, mid, high = min(found), statistics.median(found), max(found)
            print(f"{name:>10}: {mid:.2f} s (min {low:.2f}, max {high:.2f}); {ends[name]}")
            print(f"{'':>10}  reading and planning alone: {statistics.median(work[name]):.3f} s")
        if args.baseline:
            ratio = statistics.median(times["this tree"]) / statistics.median(times["baseline"])
            print(f"ratio this tree / baseline: {ratio:.3f}")
        for what, path in hostile_files(folder).items():
            for name, tree in trees.items():
                took, end = once(tree, path, args.give_up)
                print(f"{what}, {name}: {took:.2f} s; {end}")


if __name__ == "__main__":
    main()
