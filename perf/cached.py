"""A fully cached re-run: `mad-eval run --cache FILE` against perf/instant.py's server,
then the same command into a new folder, every answer now in the cache and nothing sent.
Prints the turns per second of the second run, timed as a whole process (start, the run and
its closing report).

    .venv/bin/python perf/cached.py                        # 10,000 turns
    .venv/bin/python perf/cached.py --turns 10000 --baseline /tmp/base

`--baseline TREE` re-runs from another checkout of mad-eval against its own cache file, in
the same session.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from instant import instant_server
from runs import checkouts, mad_eval, questions_file, timed

AGENTS, ROUNDS = 5, 1


def command(benchmark: Path, url: str, cache: Path, out: Path) -> list[str]:
    return mad_eval("run", "--model", "openai:instant", "--base-url", url, "--benchmark",
                    str(benchmark), "--agents", str(AGENTS), "--rounds", str(ROUNDS),
                    "--cache", str(cache), "--out", str(out))  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=10000)
    parser.add_argument("--repeat", type=int, default=3, help="cached re-runs per tree")
    parser.add_argument("--baseline", type=Path, help="another mad-eval checkout to time too")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-cached-"))
    benchmark = questions_file(work, args.turns // (AGENTS * (ROUNDS + 1)))
    trees = checkouts(args.baseline)
    print(f"| tree | first run ({args.turns:,} turns) | cached re-runs | turns/s (best) |")
    print("| --- | --- | --- | --- |")
    rates = {}
    with instant_server() as url:
        for name, tree in trees.items():
            cache = work / f"{name.replace(' ', '-')}.db"
            first, _, _ = timed(command(benchmark, url, cache, work / f"{name}-0"), tree)
            again = [
                timed(command(benchmark, url, cache, work / f"{name}-{i}"), tree)[0]
                for i in range(1, args.repeat + 1)
            ]
            rates[name] = args.turns / min(again)
            walls = ", ".join(f"{w:.2f} s" for w in again)
            print(f"| {name} | {first:.2f} s | {walls} | {rates[name]:,.0f} |", flush=True)
    summary = ", ".join(f"{name} {rate:,.0f}" for name, rate in rates.items())
    print(f"fully cached re-run of {args.turns:,} turns, turns/s of the whole process: {summary}")


if __name__ == "__main__":
    main()
