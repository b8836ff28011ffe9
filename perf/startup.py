"""What starting mad-eval costs before it does anything: `mad-eval run --help`, timed whole
(interpreter start, imports, the help text), the median of repeated runs.

    .venv/bin/python perf/startup.py
    .venv/bin/python perf/startup.py --baseline /tmp/base   # another checkout, same session

Runs alternate between the trees, so a busy machine slows both alike. Also prints the
slowest imports of this tree (python -X importtime), where the rest of the time goes.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
COMMAND = ["-m", "mad_eval", "run", "--help"]


def once(tree: Path) -> float:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    start = time.perf_counter()
    subprocess.run([sys.executable, *COMMAND], cwd=tree, env=env, check=True, capture_output=True)
    return time.perf_counter() - start


def slowest_imports(tree: Path, count: int = 8) -> list[tuple[int, str]]:
    """The modules whose import (with what they import) took longest, in microseconds."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    found = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import mad_eval.cli"],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stderr
    rows = []
    for line in found.splitlines():
        parts = line.removeprefix("import time:").split("|")
        if len(parts) == 3 and parts[1].strip().isdigit():
            rows.append((int(parts[1]), parts[2].strip()))
    top = [row for row in rows if not row[1].startswith(("mad_eval.cli",))]
    return sorted(top, reverse=True)[:count]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=11)
    parser.add_argument("--baseline", type=Path, help="another mad-eval checkout to compare")
    args = parser.parse_args()
    trees = {"this tree": HERE}
    if args.baseline:
        trees = {"baseline": args.baseline.resolve(), **trees}
    times: dict[str, list[float]] = {name: [] for name in trees}
    for tree in trees.values():
        once(tree)  # warm the file cache and the bytecode
    for _ in range(args.repeats):
        for name, tree in trees.items():
            times[name].append(once(tree))
    for name, found in times.items():
        low, mid, high = (1000 * x for x in (min(found), statistics.median(found), max(found)))
        print(
            f"{name:>10}: `mad-eval run --help` median {mid:.0f} ms (min {low:.0f}, max {high:.0f})"
        )
    if args.baseline:
        ratio = statistics.median(times["this tree"]) / statistics.median(times["baseline"])
        print(f"ratio this tree / baseline: {ratio:.2f}")
    print("slowest imports of this tree (cumulative):")
    for micros, module in slowest_imports(HERE):
        print(f"  {micros / 1000:7.1f} ms  {module}")


if __name__ == "__main__":
    main()
