"""Ten thousand mutated run folders (turns, manifest, metrics, questions, verdicts) thrown at
view, table and report: every outcome is a result or one sentence, within bounded time and
memory, never a traceback or a hang. Seeded, so a failure names the seed that reproduces it
(`fuzz_folders.fuzz(base, [SEED], work)`)."""

from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest
from fuzz_folders import bound_process, fuzz

import mad_eval

CASES = int(os.environ.get("MAD_EVAL_FUZZ_CASES", "10000"))
WORKERS = 2  # CI's cores
CHUNK = 250


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small finished, judged run: every record file a folder can hold."""
    root = tmp_path_factory.mktemp("fuzz") / "base"
    mad_eval.run(out=root, benchmark="arith", limit=3, agents=3, rounds=2)
    mad_eval.judge(root, "sim-judge", rounds="1")
    return root


@pytest.mark.slow
def test_mutated_run_folders_give_a_result_or_one_sentence(base: Path, tmp_path: Path) -> None:
    chunks = [list(range(start, min(start + CHUNK, CASES))) for start in range(0, CASES, CHUNK)]
    context = multiprocessing.get_context("spawn")
    failures: list[str] = []
    with ProcessPoolExecutor(WORKERS, mp_context=context, initializer=bound_process) as pool:
        work = [tmp_path / f"w{i}" for i in range(len(chunks))]
        for folder in work:
            folder.mkdir()
        results = pool.map(fuzz, [str(base)] * len(chunks), chunks, map(str, work))
        for found in results:
            failures.extend(found)
    assert not failures, f"{len(failures)} failures:\n" + "\n".join(failures[:20])
