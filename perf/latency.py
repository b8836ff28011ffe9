"""Does mad-eval keep a slow server busy? The same comparison as perf/client.py, but every
request takes 1-3 s (uniform, seeded) as a model's generation would, and the minimal client
keeps the rounds dependent: a question's next round starts only when its previous round has
all its answers, as in a debate. The ratio shows what mad-eval's scheduling costs when the
server, not the client, is the limit.

    .venv/bin/python perf/latency.py                          # c = 64 and 256, 2,000 turns
    .venv/bin/python perf/latency.py --concurrency 64 --turns 4000 --baseline /tmp/base
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from client import compare
from runs import checkouts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[64, 256])
    parser.add_argument("--repeat", type=int, default=1, help="pairs of runs per limit")
    parser.add_argument("--delay", type=float, nargs=2, default=(1.0, 3.0))
    parser.add_argument("--baseline", type=Path, help="another mad-eval checkout to time too")
    args = parser.parse_args()
    trees = checkouts(args.baseline, "mad-eval")
    print("| concurrency | client | wall (median) | / minimal |")
    print("| --- | --- | --- | --- |")
    ratios = []
    for limit in args.concurrency:
        times = compare(args.turns, args.repeat, limit, trees, tuple(args.delay), dependent=True)
        minimal = statistics.median(wall for wall, _ in times["minimal"])
        for name, runs in times.items():
            wall = statistics.median(w for w, _ in runs)
            print(f"| {limit} | {name} | {wall:.1f} s | {wall / minimal:.3f} |", flush=True)
        ratios.append(statistics.median(w for w, _ in times["mad-eval"]) / minimal)
    low, high = args.delay
    print(
        f"mad-eval / minimal client, {args.turns:,} turns of {low:g}-{high:g} s, dependent "
        "rounds, c = "
        + " / ".join(map(str, args.concurrency))
        + ": "
        + " / ".join(f"{r:.3f}x" for r in ratios)
    )


if __name__ == "__main__":
    main()
