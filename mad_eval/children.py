"""How mad-eval starts the processes it runs (grading workers, `vllm serve`, `nvidia-smi`):
never importing from the working directory, or running a program found there, which may be
a cloned repository holding a `sympy/`, a `mad_eval/` folder or a `vllm` script of its own.

`python -m` puts the working directory first on `sys.path`, and a relative or empty entry of
PYTHONPATH means it too; a Python child therefore runs isolated (`-I`: no working
directory, no PYTHONPATH, no user site) on an explicit path that starts where this
process's own mad_eval was imported from, so a worker runs the same mad_eval as its parent
(a checkout on PYTHONPATH, a git worktree, an editable install alike)."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Mapping

# Run as `python -I -c BOOT MODULE DIR... -- ARG...`: the directories go first on sys.path,
# then the module runs as __main__ with the arguments, as `-m` would run it.
_BOOT = (
    "import runpy, sys; module = sys.argv[1]; end = sys.argv.index('--'); "
    "sys.path[:0] = sys.argv[2:end]; del sys.argv[1 : end + 1]; "
    "runpy.run_module(module, run_name='__main__', alter_sys=True)"
)


def import_path() -> list[str]:
    """Where a child imports from before its interpreter's own site-packages: the folder
    holding this mad_eval package, then PYTHONPATH's absolute entries."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    given = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    absolute = [entry for entry in given if os.path.isabs(entry) and entry != package]
    return [package, *absolute]


def python_module(module: str, *args: str) -> list[str]:
    """The command line of `python -m module args...` for this interpreter, isolated from
    the working directory and the environment's Python settings."""
    return [sys.executable, "-I", "-c", _BOOT, module, *import_path(), "--", *args]


def environment(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """`env` (default: this process's) for a child that is a Python program started by its
    own name (`vllm`): PYTHONPATH without the relative and empty entries, which mean the
    working directory."""
    env = dict(os.environ if env is None else env)
    if "PYTHONPATH" in env:
        kept = [p for p in env["PYTHONPATH"].split(os.pathsep) if os.path.isabs(p)]
        if kept:
            env["PYTHONPATH"] = os.pathsep.join(kept)
        else:
            del env["PYTHONPATH"]
    return env


def program(name: str, path: str | None = None) -> str | None:
    """Where the program `name` is on PATH (or `path`), never in the working directory: a
    relative or empty PATH entry, which means it, is skipped."""
    given = os.environ.get("PATH", os.defpath) if path is None else path
    kept = os.pathsep.join(p for p in given.split(os.pathsep) if os.path.isabs(p))
    return shutil.which(name, path=kept) if kept else None
