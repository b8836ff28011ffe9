"""Running the real `mad-eval` command from tests, and reading what it recorded."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


def mad_eval(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "mad_eval", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "COLUMNS": "200", **(env or {})},
    )


def small_run(tmp_path: Path, *extra: str, agents: str = "2") -> subprocess.CompletedProcess:
    """A quick simulated run into tmp_path/r that must succeed."""
    args = ("run", "--agents", agents, "--rounds", "1", "--limit", "3", "--out", "r", *extra)
    result = mad_eval(*args, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    return result


def turns_of(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "turns.jsonl").read_text().splitlines()]


def without_timing(turns: list[dict]) -> list[dict]:
    return sorted(
        ({k: v for k, v in t.items() if k != "latency"} for t in turns),
        key=lambda t: (t["run"], t["question"], t["round"], t["agent"]),
    )
