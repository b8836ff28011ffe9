"""What reading a large run costs: `mad-eval report`, `table` and `plot` on a finished run
of N questions (5 agents, 2 rounds: 15 turns a question), each timed as a whole process
with its peak resident memory.

    .venv/bin/python perf/reports.py                                # 10,000 questions
    .venv/bin/python perf/reports.py --questions 50000 --baseline /tmp/base
    .venv/bin/python perf/reports.py --questions 3000 --baseline /tmp/base --callgrind

With `--callgrind`, `report` alone is run under callgrind and its instructions counted (the
same count however loaded the machine is), at N/3 and N questions, so their difference is
what reading a question costs.

The run is made by perf/runs.py's large_run (200 questions simulated, their records copied
under the other ids). `--baseline TREE` runs another checkout of mad-eval on the same folder,
command by command, so both are measured in the same session.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from runs import checkouts, instructions, large_run, mad_eval, timed


def commands(run: Path, work: Path) -> dict[str, list[str]]:
    return {
        "report": mad_eval("report", str(run)),
        "table": mad_eval("table", str(run), "--format", "csv"),
        "plot": mad_eval("plot", str(run), "--out", str(work / "plots")),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=10000)
    parser.add_argument("--baseline", type=Path, help="another mad-eval checkout to time too")
    parser.add_argument("--callgrind", action="store_true", help="count report's instructions")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-reports-"))
    trees = checkouts(args.baseline)
    if args.callgrind:
        counted(trees, work, args.questions)
        return
    # Each version reads a run of its own records.
    runs = {name: large_run(work / name.replace(" ", "-"), args.questions, tree)[1]
            for name, tree in trees.items()}  # fmt: skip
    turns = 15 * args.questions
    print(f"| command ({args.questions:,} questions, {turns:,} turns) | tree | wall | peak RSS |")
    print("| --- | --- | --- | --- |")
    worst = (0.0, 0.0)
    for name in ("report", "table", "plot"):
        for tree_name, tree in trees.items():
            wall, _, peak = timed(commands(runs[tree_name], work)[name], tree)
            print(f"| {name} | {tree_name} | {wall:.1f} s | {peak:,.0f} MB |", flush=True)
            if tree_name == "this tree":
                worst = (max(worst[0], wall), max(worst[1], peak))
    print(f"report / table / plot on {args.questions:,} questions: at most {worst[0]:.1f} s "
          f"and {worst[1]:,.0f} MB each")  # fmt: skip


def counted(trees: dict[str, Path], work: Path, questions: int) -> None:
    sizes = (questions // 3, questions)
    print(f"| tree | report, {sizes[0]:,} questions | {sizes[1]:,} questions | a question |")
    print("| --- | --- | --- | --- |")
    found = {}
    for name, tree in trees.items():
        counts = []
        for n in sizes:
            run = large_run(work / f"{name.replace(' ', '-')}-{n}", n, tree)[1]
            counts.append(instructions(mad_eval("report", str(run)), tree, work))
        found[name] = counts[1], (counts[1] - counts[0]) / (sizes[1] - sizes[0])
        print(f"| {name} | {counts[0] / 1e9:.3f} G | {counts[1] / 1e9:.3f} G | "
              f"{found[name][1] / 1e6:.2f} M |", flush=True)  # fmt: skip
    if "baseline" in found:
        (whole, each), (base_whole, base_each) = found["this tree"], found["baseline"]
        print(f"this tree against the baseline: {each / base_each - 1:+.1%} a question, "
              f"{whole / base_whole - 1:+.1%} the report of {questions:,}")  # fmt: skip


if __name__ == "__main__":
    main()
