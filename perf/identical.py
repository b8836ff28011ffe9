"""Do two checkouts of mad-eval write the same records? Runs the offline demo
(experiments/offline_demo.toml: `experiment run`, then `experiment tables`) with this tree and
with a baseline tree, each into its own scratch folder, and compares every turns.jsonl,
manifest.json, metrics.json and table file byte for byte, with timing fields masked.

    git archive 8bbe201 | tar -x -C /tmp/base31        # the baseline tree
    MAD_EVAL_DATA=... .venv/bin/python perf/identical.py --baseline /tmp/base31

Each tree runs with itself first on PYTHONPATH (the same interpreter), from a scratch folder
holding a copy of its experiment file, so relative paths match; the trees' and the scratch
folders' own paths are written as <TREE> and <OUT> before comparing. Keys added on purpose
(ADDED: metrics.json's schema_version, the manifest's benchmark.answer_revision, a turn's
reply; issue 35's alerts; issue 45's protocol.waves, roles, asks and ends, all null for the
demo's protocols; issue 46's interval of each point of metrics.json's maj@m curve and
rounds[].ties, the share of votes a seeded draw decided) are dropped, and a CSV's numbers are
compared at the 12 significant digits issue 35's tables write. Masked: timing fields
(any key holding "latency", the keys in TIMING), the numbers of a table line naming a
latency and those of a table's timed columns (the cost layout's latency s and wall s).
turns.jsonl is compared in key order (run, question, round, agent): the order of its lines
is the order the concurrent debates finished in, which no run repeats. Prints each
difference; exits 1 if there is any.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parents[1]
DEMO = Path("experiments") / "offline_demo.toml"
# Fields that time a run or name the process and tree that wrote it: masked, not compared.
TIMING = {
    "latency",
    "wall_seconds",
    "wall_time",
    "seconds",
    "elapsed",
    "started",
    "finished",
    "created",
    "timestamp",
    "time",
    "git_commit",
    "commit",
    "command",
    "argv",
    "versions",
    "version",
    "mad_eval_version",
    "python",
    "platform",
    "host",
    "pid",
}
# Keys a file gains on purpose, dropped from its top level before comparing (in both trees,
# so only the key is spared, never its neighbours): metrics.json's `schema_version` (issue
# 31: metrics.json is versioned; the baseline writes none).
# Keys added on purpose since the baseline, by file, dotted for a nested one: metrics.json's
# version (issue 31), the answer protocol's revision a resume checks and a turn's reply as
# written, null unless the run quotes replies verbatim (issue 32).
ADDED = {
    # issue 46: each point of the compute-matched maj@m curve carries its 95% interval; each
    # round the share of its votes a seeded draw decided.
    "metrics.json": (
        "schema_version",
        "alerts",
        "matched.curve[].accuracy_ci",
        "rounds[].ties",
        "rounds[].ties_std",
        "per_run[].rounds[].ties",
    ),
    "manifest.json": (
        "benchmark.answer_revision",
        "protocol.waves",
        "protocol.roles",
        "protocol.asks",
        "protocol.ends",
    ),
    "turns.jsonl": ("reply",),
}
NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
RECORDS = ("turns.jsonl", "manifest.json", "metrics.json")
TABLES = (".csv", ".md", ".tex")


def run_demo(tree: Path, out: Path, replicates: int) -> None:
    """The demo with `tree`'s mad_eval, in `out` (results/offline_demo/ under it)."""
    (out / "experiments").mkdir(parents=True)
    for name in ("offline_demo.toml", "prices.example.toml"):
        shutil.copy(tree / "experiments" / name, out / "experiments" / name)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(tree), os.environ.get("PYTHONPATH", "")]),
    }
    for args in (["run", str(DEMO)], ["tables", str(DEMO), "--replicates", str(replicates)]):
        command = [sys.executable, "-m", "mad_eval", "experiment", *args]
        done = subprocess.run(command, cwd=out, env=env, capture_output=True, text=True)
        if done.returncode != 0:
            sys.exit(f"{tree}: {' '.join(args)} failed:\n{done.stderr}")


def timing(key: str) -> bool:
    return key in TIMING or "latency" in key


def masked(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: "<masked>" if timing(k) else masked(v) for k, v in value.items()}
    if isinstance(value, list):
        return [masked(v) for v in value]
    return value


def normal(text: str, tree: Path, out: Path) -> str:
    """The text with the tree's and the scratch folder's paths named alike."""
    for path, name in ((out.resolve(), "<OUT>"), (tree.resolve(), "<TREE>")):
        text = text.replace(str(path), name)
    return text


def drop_added(data: dict[str, Any], name: str) -> dict[str, Any]:
    """`data` (a file's JSON, or one line's) without the keys ADDED names for the file (a
    part ending in [] names each item of a list)."""
    for key in ADDED.get(name, ()):
        _drop(data, key.split("."))
    return data


def _drop(holder: Any, parts: list[str]) -> None:
    first, *rest = parts
    if not isinstance(holder, dict):
        return
    if not rest:
        holder.pop(first, None)
    elif first.endswith("[]"):
        for item in holder.get(first.removesuffix("[]")) or []:
            _drop(item, rest)
    else:
        _drop(holder.get(first), rest)


def lines_of(path: Path, tree: Path, out: Path) -> list[str]:
    """The file as compared: JSON with timing fields masked, anything else as written."""
    text = normal(path.read_text(), tree, out)
    if path.suffix == ".json":
        data = drop_added(json.loads(text), path.name)
        return json.dumps(masked(data), indent=1, ensure_ascii=False).splitlines()
    if path.suffix == ".jsonl":
        records = [masked(drop_added(json.loads(line), path.name)) for line in text.splitlines()]
        records.sort(
            key=lambda r: tuple(str(r.get(k)) for k in ("run", "question", "round", "agent"))
        )
        return [json.dumps(record, ensure_ascii=False) for record in records]
    lines = text.splitlines()
    if path.suffix == ".csv":  # issue 35 writes 12 significant digits: both sides alike
        lines = [NUMBER.sub(lambda m: f"{float(m[0]):.12g}", line) for line in lines]
    lines = [NUMBER.sub("<t>", line) if "latency" in line else line for line in lines]
    return timed_columns_masked(lines, "|" if path.suffix == ".md" else "&")


def timed_columns_masked(lines: list[str], sep: str) -> list[str]:
    """A Markdown or LaTeX table's lines with the numbers of its timed columns (a header
    naming "latency s" or "wall s", as the cost layout's) masked: the seconds a run took."""
    timed: set[int] = set()
    found = []
    for line in lines:
        cells = line.split(sep)
        if any(cell.strip().endswith(("latency s", "wall s")) for cell in cells):
            timed = {
                i for i, cell in enumerate(cells) if cell.strip().endswith(("latency s", "wall s"))
            }
        elif timed and len(cells) > max(timed):
            cells = [NUMBER.sub("<t>", c) if i in timed else c for i, c in enumerate(cells)]
            line = sep.join(cells)
        found.append(line)
    return found


def compared(root: Path) -> list[Path]:
    """The files compared, relative to the demo's folder."""
    return sorted(
        p.relative_to(root)
        for p in root.rglob("*")
        if p.is_file() and (p.name in RECORDS or (p.parent.name == "tables" and p.suffix in TABLES))
    )


def differences(ours: tuple[Path, Path], theirs: tuple[Path, Path]) -> list[str]:
    (tree_a, out_a), (tree_b, out_b) = ours, theirs
    root_a, root_b = out_a / "results" / "offline_demo", out_b / "results" / "offline_demo"
    files_a, files_b = compared(root_a), compared(root_b)
    found = [f"only in this tree: {p}" for p in sorted(set(files_a) - set(files_b))]
    found += [f"only in the baseline: {p}" for p in sorted(set(files_b) - set(files_a))]
    for rel in sorted(set(files_a) & set(files_b)):
        a = lines_of(root_a / rel, tree_a, out_a)
        b = lines_of(root_b / rel, tree_b, out_b)
        if a != b:
            at = next(
                (i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y),
                min(len(a), len(b)),
            )
            found.append(f"{rel}: differs at line {at + 1}")
            found.append(f"  this tree: {a[at][:300] if at < len(a) else '(end)'}")
            found.append(f"  baseline:  {b[at][:300] if at < len(b) else '(end)'}")
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", type=Path, required=True, help="another mad-eval tree")
    parser.add_argument("--work", type=Path, help="scratch folder (default: a new temporary one)")
    parser.add_argument("--replicates", type=int, default=200, help="bootstrap resamples")
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="identical-"))
    outs = {"this": work / "this", "baseline": work / "baseline"}
    for out in outs.values():
        if out.exists():
            shutil.rmtree(out)
    run_demo(HERE, outs["this"], args.replicates)
    run_demo(args.baseline.resolve(), outs["baseline"], args.replicates)
    found = differences((HERE, outs["this"]), (args.baseline, outs["baseline"]))
    files = len(compared(outs["this"] / "results" / "offline_demo"))
    for line in found:
        print(line)
    verdict = "differ" if found else "are identical (timing fields masked)"
    print(f"{files} files compared in {work}: this tree and {args.baseline} {verdict}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
