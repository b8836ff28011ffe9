"""What the bounds on foreign input cost a simulated run, counted in instructions by
callgrind (the same count whatever else the machine is doing, so a 1% difference shows):

- the sandbox: the same run with its prompts from a template file (rendered in the
  sandbox, within every bound) against the shipped template (plain Jinja), prompts equal;
- every other check on a run's path (records and files read within bounds, writes that
  never follow a link, verdicts held to their golds): this tree against `--baseline`, a
  checkout from before them, on the shipped template.

Each is given twice: as the marginal cost of a turn (a run of N questions less a run of N0,
so imports and start-up cancel, over the turns between them) and as the whole run of N.

    .venv/bin/python perf/checks.py --baseline /tmp/base    # a worktree of the old commit
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from runs import HERE, checkouts, instructions, mad_eval

AGENTS, ROUNDS = 5, 2


def run_instructions(tree: Path, work: Path, questions: int, template: str) -> int:
    """Instructions for one whole `mad-eval run` from `tree`."""
    out = work / f"run-{questions}"
    shutil.rmtree(out, ignore_errors=True)
    command = mad_eval(
        "run", "--benchmark", "arith", "--limit", str(questions), "--agents", str(AGENTS),
        "--rounds", str(ROUNDS), "--prompt-template", template, "--out", str(out),
    )  # fmt: skip
    return instructions(command, tree, work)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", type=Path, help="a checkout from before the checks")
    parser.add_argument("--low", type=int, default=10, help="questions of the smaller run")
    parser.add_argument("--high", type=int, default=50, help="questions of the larger run")
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is needed (Debian: apt-get install valgrind)")
    work = Path(tempfile.mkdtemp(prefix="bench-checks-"))
    copy = work / "debate-copy.toml"  # the shipped text and one comment: not the shipped one
    copy.write_text((HERE / "templates" / "debate.toml").read_text() + "\n# a copy\n")
    turns = (args.high - args.low) * AGENTS * (ROUNDS + 1)
    print(f"| tree | prompts from | a turn ({args.low} -> {args.high} questions, {AGENTS} agents, "
          f"{ROUNDS} rounds) | the run of {args.high} questions |")  # fmt: skip
    print("| --- | --- | --- | --- |")
    turn, run = {}, {}
    for name, tree in checkouts(args.baseline).items():
        for label, template in (("shipped debate", "debate"), ("a file (copy)", str(copy))):
            low, high = (run_instructions(tree, work, n, template) for n in (args.low, args.high))
            key = name, label
            turn[key], run[key] = (high - low) / turns, high
            print(
                f"| {name} | {label} | {turn[key] / 1e3:,.0f} K | {high / 1e9:.3f} G |", flush=True
            )

    def ratio(a: tuple[str, str], b: tuple[str, str]) -> str:
        return f"{turn[a] / turn[b] - 1:+.1%} a turn, {run[a] / run[b] - 1:+.1%} the run"

    ours, file = ("this tree", "shipped debate"), ("this tree", "a file (copy)")
    print(f"sandbox, a template file against the shipped one: {ratio(file, ours)}")
    if args.baseline:
        base, base_file = ("baseline", "shipped debate"), ("baseline", "a file (copy)")
        print(f"this tree against the baseline, shipped template: {ratio(ours, base)}")
        print(f"this tree against the baseline, a template file: {ratio(file, base_file)}")
        print(f"the baseline's sandbox, the same way: {ratio(base_file, base)}")


if __name__ == "__main__":
    main()
