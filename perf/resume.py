"""What resuming a nearly finished run costs against reading it: a finished run of N turns
(5 agents, 2 rounds, simulated) loses the last 1% of its records, as a run stopped near its
end would, and the same `mad-eval run` command resumes it (asking those turns again and
writing its report); that is timed against `mad-eval report` on the finished folder.

    .venv/bin/python perf/resume.py                      # 100,000 turns
    .venv/bin/python perf/resume.py --turns 30000 --baseline /tmp/base

Each is a whole process, timed with its peak resident memory; `--baseline TREE` does the
same with another checkout of mad-eval, on a fresh copy of the folder.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from runs import checkouts, large_run, mad_eval, timed


def cut(run: Path, share: float) -> int:
    """Drop the last `share` of a run's records; how many were dropped."""
    path = run / "turns.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    keep = len(lines) - int(len(lines) * share)
    path.write_bytes(b"".join(lines[:keep]))
    return len(lines) - keep


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=100000)
    parser.add_argument("--missing", type=float, default=0.01, help="share of records dropped")
    parser.add_argument("--baseline", type=Path, help="another mad-eval checkout to time too")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-resume-"))
    trees = checkouts(args.baseline)
    print(f"| tree | report ({args.turns:,} turns) | resume ({100 * args.missing:g}% missing) "
          "| resume / report |")  # fmt: skip
    print("| --- | --- | --- | --- |")
    ratios = {}
    for name, tree in trees.items():
        # Each version resumes a run of its own records.
        benchmark, finished = large_run(work / name.replace(" ", "-"), args.turns // 15, tree)
        report, _, report_mb = timed(mad_eval("report", str(finished)), tree)
        run = work / f"resumed-{name.replace(' ', '-')}"
        shutil.copytree(finished, run)
        dropped = cut(run, args.missing)
        command = mad_eval("run", "--benchmark", str(benchmark), "--agents", "5", "--rounds",
                           "2", "--out", str(run))  # fmt: skip
        resume, _, resume_mb = timed(command, tree)
        ratios[name] = resume / report
        print(f"| {name} | {report:.1f} s, {report_mb:,.0f} MB | {resume:.1f} s, "
              f"{resume_mb:,.0f} MB ({dropped:,} turns asked again) | {ratios[name]:.2f} |",
              flush=True)  # fmt: skip
    summary = ", ".join(f"{name} {ratio:.2f}x" for name, ratio in ratios.items())
    print(f"resume of a {args.turns:,}-turn run {100 - 100 * args.missing:g}% done / report: "
          f"{summary}")  # fmt: skip


if __name__ == "__main__":
    main()
