"""What the bench scripts share: generated benchmarks, whole commands timed from a given
checkout of mad-eval, and large finished run folders made cheaply."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(HERE))  # this checkout's mad_eval writes questions.jsonl

from mad_eval.data.benchmarks import load_questions  # noqa: E402
from mad_eval.store.questions import write_questions  # noqa: E402


def checkouts(baseline: Path | None, name: str = "this tree") -> dict[str, Path]:
    """The trees a script measures: this one, and a `--baseline` checkout when given."""
    return {name: HERE, **({"baseline": baseline.resolve()} if baseline else {})}


def questions_file(folder: Path, n: int, period: int | None = None) -> Path:
    """N arithmetic questions as a benchmark JSONL, each naming its number ("Question 17:",
    which perf/instant.py's replay groups requests by); with `period`, question i asks
    what question i % period does."""
    path = folder / f"q{n}.jsonl"
    with path.open("w") as out:
        for i in range(n):
            j = i % period if period else i
            a, b = 17 + j % 83, 3 + j % 29
            text = f"Question {i}: what is {a} + {b}?"
            row = {"id": f"q{i}", "question": text, "answer": str(a + b)}
            out.write(json.dumps(row) + "\n")
    return path


def mad_eval(*args: str) -> list[str]:
    return [sys.executable, "-m", "mad_eval", *args]


def timed(command: list[str], tree: Path = HERE) -> tuple[float, float, float]:
    """(wall seconds, CPU seconds, peak resident MB) of one whole process run from `tree`
    (first on PYTHONPATH); its stderr is shown only if it fails. Python may keep its bytecode,
    as an installed mad-eval has it (a machine that forbids it compiles every module anew in
    every process)."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    start = time.perf_counter()
    with tempfile.TemporaryFile() as errors:
        process = subprocess.Popen(
            command, cwd=tree, env=env, stdout=subprocess.DEVNULL, stderr=errors
        )
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - start
        if status != 0:
            errors.seek(0)
            sys.stderr.write(errors.read().decode(errors="replace"))
            raise SystemExit(f"{' '.join(command[2:5])} ... failed (status {status})")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def instructions(command: list[str], tree: Path, cwd: Path) -> int:
    """Instructions callgrind counts for one whole process run from `tree` (first on
    PYTHONPATH): the same count however loaded the machine is."""
    counts = cwd / "callgrind.out"
    env = {**os.environ, "PYTHONPATH": str(tree)}
    traced = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={counts}", *command]
    subprocess.run(traced, cwd=cwd, env=env, check=True, capture_output=True)
    found = re.search(r"^totals: (\d+)", counts.read_text(), re.M)
    if found is None:
        raise SystemExit("callgrind wrote no totals")
    return int(found[1])


def large_run(
    folder: Path, questions: int, tree: Path = HERE, seed_questions: int = 200
) -> tuple[Path, Path]:
    """A finished simulated run (5 agents, 2 rounds: 15 turns a question) of `questions`
    questions, made by running the first `seed_questions` for real with the checkout `tree`
    (so its records are that version's) and copying their records under the other
    questions' ids; its benchmark file and its folder. The manifest is the real run's, so
    `run` resumes the folder and `report` reads it like any other."""
    folder.mkdir(parents=True, exist_ok=True)
    # Every question asks what its copied records' question did: their verdicts hold against
    # its gold, as every reader checks.
    benchmark = questions_file(folder, questions, period=seed_questions)
    out = folder / f"run{questions}"
    timed(mad_eval("run", "--benchmark", str(benchmark), "--agents", "5", "--rounds", "2",
                   "--limit", str(seed_questions), "--out", str(out)), tree)  # fmt: skip
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["config"]["limit"] = None  # the copy answers every question
    manifest["benchmark"]["questions"] = [f"q{i}" for i in range(questions)]  # and lists them
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2))
    # ... so it holds other questions than the real run recorded: questions.jsonl records
    # them all from the benchmark file, as a resume of the folder would.
    write_questions(out, load_questions(str(benchmark))[1])
    seed = (out / "turns.jsonl").read_text().splitlines()
    with (out / "turns.jsonl").open("w") as records:
        for start in range(0, questions, seed_questions):
            for line in seed:
                turn = json.loads(line)
                number = start + int(turn["question"].removeprefix("q"))
                if number < questions:
                    turn["question"] = f"q{number}"
                    records.write(json.dumps(turn, ensure_ascii=False) + "\n")
    (out / "metrics.json").unlink(missing_ok=True)
    return benchmark, out
