"""Peak memory of a whole `mad-eval run` (debate and report) as the number of questions
grows: simulated agents, 5 agents x 2 rounds, a generated benchmark of N questions.

    .venv/bin/python perf/memory.py --questions 1000 10000
    .venv/bin/python perf/memory.py --questions 1000 10000 --baseline /tmp/base   # a worktree

Prints, per size and per tree, the peak resident memory of the run's process (its grading
workers apart), its wall time, and each peak as a ratio of the smallest size's: memory flat
in the number of questions keeps that ratio near 1. A baseline tree (another checkout of
mad-eval, imported through PYTHONPATH) is measured in the same session, size by size.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from runs import HERE, mad_eval, questions_file, timed


def measure(tree: Path, benchmark: Path, out: Path) -> tuple[float, float]:
    """(peak RSS in MB, wall seconds) of one run from `tree`."""
    command = mad_eval("run", "--benchmark", str(benchmark), "--agents", "5", "--rounds", "2",
                       "--out", str(out))  # fmt: skip
    wall, _, peak = timed(command, tree)
    return peak, wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--baseline", type=Path, help="another mad-eval checkout to compare")
    args = parser.parse_args()
    trees = {"this tree": HERE}
    if args.baseline:
        trees = {"baseline": args.baseline.resolve(), **trees}
    rows: dict[str, list[tuple[int, float, float]]] = {name: [] for name in trees}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for n in args.questions:
            benchmark = questions_file(folder, n)
            for name, tree in trees.items():
                peak, wall = measure(tree, benchmark, folder / f"{name.replace(' ', '_')}-{n}")
                rows[name].append((n, peak, wall))
                print(
                    f"{name:>10}  {n:>7,} questions  peak {peak:8.0f} MB  {wall:6.1f} s", flush=True
                )
    print()
    print(
        "| tree | "
        + " | ".join(f"{n:,} questions" for n in args.questions)
        + " | largest / smallest |"
    )
    print("| --- " * (len(args.questions) + 2) + "|")
    for name, found in rows.items():
        cells = [f"{peak:.0f} MB, {wall:.1f} s" for _, peak, wall in found]
        print(f"| {name} | " + " | ".join(cells) + f" | {found[-1][1] / found[0][1]:.2f} |")


if __name__ == "__main__":
    main()
