"""A stand-in `vllm` for serve: tests: a small Python script put first on PATH that takes
`vllm serve CKPT --port P --served-model-name NAME ...`, records its argv, pid and
CUDA_VISIBLE_DEVICES (one JSON line per start, in $STAND_IN_RECORD), and serves
tests/stub_server.StubServer on that port until SIGTERM.

What it does is steered by the environment: STAND_IN_FAIL=TEXT prints TEXT and exits 3
(a server dying at start-up); STAND_IN_TAKEN=N says "Address already in use" for the first
N starts; STAND_IN_SILENT=1 never answers; STAND_IN_CHILD=1 starts a child process in its
group (an engine worker) and records its pid, STAND_IN_CHILD=deaf one that ignores SIGTERM
(an engine that never hears its API server go); STAND_IN_DELAY=SECONDS slows each reply;
STAND_IN_DIE_AFTER=N with STAND_IN_DIE_STARTS=K: the first K starts exit (code 7) at their
N+1th request, or with STAND_IN_DIE_ERROR=TEXT log a traceback ending in TEXT, then shutdown
lines, and exit 0 (as vLLM's API server does when its engine dies); STAND_IN_MODELS=NAME
answers /v1/models with stub_server.HOSTILE_BODIES[NAME]."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import mad_eval

TESTS = Path(__file__).resolve().parent

SCRIPT = """\
import json, os, signal, subprocess, sys, time
sys.path.insert(0, {tests!r})
args = sys.argv[1:]
record = os.environ["STAND_IN_RECORD"]
with open(record) if os.path.exists(record) else open(os.devnull) as f:
    starts = sum(1 for _ in f)
entry = {{"argv": args, "pid": os.getpid(), "pgid": os.getpgid(0), "ppid": os.getppid(),
          "cuda": os.environ.get("CUDA_VISIBLE_DEVICES")}}
if os.environ.get("STAND_IN_CHILD"):
    deaf = "import signal; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
    sleep = "import time; time.sleep(600)"
    code = (deaf if os.environ["STAND_IN_CHILD"] == "deaf" else "") + sleep
    child = subprocess.Popen([sys.executable, "-c", code])
    entry["child"] = child.pid
with open(record, "a") as f:
    f.write(json.dumps(entry) + "\\n")
print("stand-in vllm", " ".join(args), flush=True)
if os.environ.get("STAND_IN_FAIL"):
    print(os.environ["STAND_IN_FAIL"], flush=True)
    sys.exit(3)
if starts < int(os.environ.get("STAND_IN_TAKEN", "0")):
    print("OSError: [Errno 98] Address already in use", flush=True)
    sys.exit(1)
assert args[0] == "serve", args
while os.environ.get("STAND_IN_SILENT"):  # up, never answering
    time.sleep(3600)
port = int(args[args.index("--port") + 1])
host = args[args.index("--host") + 1] if "--host" in args else "127.0.0.1"
names = []
for arg in args[args.index("--served-model-name") + 1:]:
    if arg.startswith("--"):
        break
    names.append(arg)
from stub_server import StubServer
answered = [0]
import threading
dying = threading.Lock()
die = starts < int(os.environ.get("STAND_IN_DIE_STARTS", "0"))
def fault(body, attempt):
    answered[0] += 1
    if die and answered[0] > int(os.environ["STAND_IN_DIE_AFTER"]):
        error = os.environ.get("STAND_IN_DIE_ERROR")
        if error:
            engine = "(EngineCore_DP0 pid=81) ERROR 11-28 12:00:01 [core.py:710] "
            lines = ["Traceback (most recent call last):",
                     '  File "/v/vllm/v1/worker/gpu_model_runner.py", line 2210, in sync',
                     "    generator.set_offset(offset)", error]
            with dying:  # one traceback, whole, whichever request gets here first
                os.write(1, "".join(engine + line + "\\n" for line in lines).encode()
                         + b"(APIServer pid=80) [shutdown] MPClient: complete\\n")
                os._exit(0)
        os._exit(7)  # a crash mid-run, its requests unanswered
server = StubServer(model=names[0], aliases=tuple(names[1:]), port=port, host=host, fault=fault,
                    delay=float(os.environ.get("STAND_IN_DELAY", "0")),
                    models_fault=os.environ.get("STAND_IN_MODELS"))
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # leaves a child behind, as a crash would
with server:
    print("ready", flush=True)
    while True:
        time.sleep(3600)
"""


def install_stand_in(folder: Path) -> dict[str, str]:
    """Write the stand-in `vllm` into folder/bin; the environment that puts it first on
    PATH and names its record file (folder/starts.jsonl)."""
    bin_dir = folder / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    script = bin_dir / "vllm"
    script.write_text(f"#!{sys.executable}\n" + SCRIPT.format(tests=str(TESTS)))
    script.chmod(0o755)
    return {
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        "STAND_IN_RECORD": str(folder / "starts.jsonl"),
    }


def install_stand_in_module(folder: Path) -> dict[str, str]:
    """The same stand-in as an importable `vllm.entrypoints.openai.api_server` (what mad-eval
    runs with `python -m` when no vllm is on PATH) under folder/pkgs; the environment that
    puts it on PYTHONPATH, no stand-in on PATH, and names its record file."""
    package = folder / "pkgs" / "vllm" / "entrypoints" / "openai"
    package.mkdir(parents=True, exist_ok=True)
    for level in (package, package.parent, package.parent.parent):
        (level / "__init__.py").write_text("")
    as_serve = (  # `--model CKPT ARGS` as `vllm serve CKPT ARGS`
        "import sys\nargv = sys.argv[1:]\nat = argv.index('--model')\n"
        "sys.argv[1:] = ['serve', argv[at + 1], *argv[:at], *argv[at + 2:]]\n"
    )
    (package / "api_server.py").write_text(as_serve + SCRIPT.format(tests=str(TESTS)))
    return {
        "PATH": f"/usr/bin{os.pathsep}/bin",
        "PYTHONPATH": str(folder / "pkgs"),
        "STAND_IN_RECORD": str(folder / "starts.jsonl"),
    }


def starts(env: dict[str, str]) -> list[dict]:
    """Every start of the stand-in so far, in order."""
    path = Path(env["STAND_IN_RECORD"])
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def alive(pid: int) -> bool:
    """Whether a process runs (a zombie waiting to be reaped does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    return state not in ("Z", "X")


def wait_until(done: Callable[[], object], timeout: float) -> bool:
    """Wait (generously: CI machines are loaded) until done() holds; whether it did."""
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def wait_gone(pid: int, timeout: float = 60.0) -> bool:
    """Wait until a process is gone; whether it went."""
    return wait_until(lambda: not alive(pid), timeout)


def group(pgid: int) -> list[int]:
    """The live processes of a process group (Linux: read from /proc)."""
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rpartition(")")[2].split()
        except OSError:
            continue
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            members.append(int(stat.parent.name))
    return members


def group_gone(pgid: int, timeout: float = 120.0) -> bool:
    """Wait until no process of a group runs; whether none does."""
    return wait_until(lambda: not group(pgid), timeout)


def serving(path: Path) -> list[int]:
    """Live processes whose command line names `path` or a path under it (read from /proc):
    the servers of checkpoints kept there, their guards and their engines."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if str(path).encode() in cmdline.read_bytes() and alive(int(cmdline.parent.name)):
                found.append(int(cmdline.parent.name))
        except (OSError, ValueError):
            continue
    return found


def checkpoint(folder: Path) -> Path:
    """A checkpoint folder as serve: specs see one (its config.json)."""
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    return folder


def served_models(root: Path, names: tuple[str, ...], settings: str = "") -> str:
    """[models] lines: each name a checkpoint under root/ckpts, labelled in capitals, with
    `settings` (TOML keys) next to its model."""
    extra = f", {settings}" if settings else ""
    return "\n".join(
        f'"{name.upper()}" = {{ model = "serve:{checkpoint(root / "ckpts" / name)}"{extra} }}'
        for name in names
    )


def experiment_file(root: Path, models: str) -> Path:
    """A small experiment (2 arith questions, 2 agents, 1 round) over [models] `models`."""
    path = root / "exp.toml"
    path.write_text(
        '[experiment]\nout = "out"\n\n[settings]\nlimit = 2\nruns = 1\nrounds = 1\nretries = 1\n'
        f'\n[models]\n{models}\n\n[grids.main]\nbenchmarks = ["arith"]\nagents = [2]\n'
    )
    return path


class Heard(mad_eval.Listener):
    """A listener that keeps what it is told."""

    def __init__(self) -> None:
        self.said: list[str] = []

    def say(self, text: str) -> None:
        self.said.append(text)


def most_at_once(said: list[str]) -> tuple[int, int]:
    """From a listener's lines, in the order mad-eval started and stopped servers: the most
    up at once, and how many were still up at the end."""
    up = most = 0
    for text in said:
        if text.startswith("Starting vllm serve for "):
            up += 1
        elif text.startswith("Server ") and " stopped " in text:
            up -= 1
        most = max(most, up)
    return most, up
