"""One `vllm serve` process on this node (`LocalServer`), and `served`: a checkpoint's
replicas started for a run and always stopped after it.

The server runs in its own process group (its engine and worker children with it), led by
a guard (guard.py) that stops the whole group once mad-eval is gone, kill -9 included; with
CUDA_VISIBLE_DEVICES set to its GPUs and its output in a log file. stop() sends SIGTERM to
the group and SIGKILL after a grace period."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Protocol

import aiohttp

from mad_eval.backends.bodies import ReplyTooLarge, parse_json, read_body
from mad_eval.children import environment
from mad_eval.errors import UserError
from mad_eval.progress import Listener
from mad_eval.sanitize import printable, redact
from mad_eval.serving.installation import NO_VLLM, has_vllm, server_command
from mad_eval.serving.spec import ServeSpec, shown
from mad_eval.store.files import APPEND, open_record

TAIL_LINES = 5
PORT_TRIES = 3  # a port taken between finding it and binding it: another, twice more
POLL = 0.5  # seconds between start-up checks
GUARD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "guard.py")


class ServerError(UserError):
    """A server could not be started: one sentence naming the label and the log file."""


class _PortTaken(Exception):
    pass


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on now (the kernel's pick for port 0)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def guarded(command: Sequence[str], grace: float) -> list[str]:
    """`command` run by the guard (guard.py), which stops its group when this process goes."""
    guard = [sys.executable, "-I", "-S", GUARD, str(os.getpid()), f"{grace:g}"]
    return [*guard, *command]


def log_tail(log: Path, lines: int = TAIL_LINES) -> str:
    """The log's last non-empty lines, redacted and printable, joined on one line."""
    try:
        with log.open("rb") as f:
            f.seek(max(f.seek(0, os.SEEK_END) - 16384, 0))
            text = f.read().decode("utf-8", errors="replace")
    except OSError:
        return ""
    # The command line this module wrote before each start is in the log, not the tail.
    kept = [line.strip()[:300] for line in text.splitlines() if line.strip()]
    last = [line for line in kept if not line.startswith("$ ")][-lines:]
    return printable(redact(" | ".join(last)))


# What vLLM puts before a line of its log: the process's name and pid, then a level, a time
# and the file that logged it ("(EngineCore_DP0 pid=81) ERROR 11-28 12:00:01 [core.py:710] ").
_PREFIX = re.compile(r"^(?:\([^()]*pid=\d+\)\s*)?(?:[A-Z]+ \d\d-\d\d [\d:.]+ \[[^\]]*\]\s*)?")
_NAME = re.compile(r"[A-Za-z_][\w.]*")  # a dotted class name, matched in linear time
_FRAME = re.compile(r'^File "([^"]+)", line (\d+), in (\S+)')
ERROR_BYTES = 4 * 1024 * 1024  # a log's last bytes searched for its last start's first error

# A failure vLLM's CPU build is known for, and what avoids it: (words of the error, advice).
KNOWN_ERRORS = (
    (
        "CPU Generator does not use offset",
        "vLLM's CPU build cannot sample seeded requests whose prompts it prefills in chunks; "
        "serve without chunked prefill: mad-eval does unless --serving args says otherwise "
        "or the vllm on PATH runs (then add --serving args=--no-enable-chunked-prefill)",
    ),
)


def first_error(log: Path) -> str | None:
    """The first exception the server's last start logged, with the frame that raised it
    ("RuntimeError: ... (raised at core.py:710 in step)"), redacted and printable; None when
    the log holds none. What it says after (its shutdown) is only the consequence."""
    try:
        with log.open("rb") as f:
            f.seek(max(f.seek(0, os.SEEK_END) - ERROR_BYTES, 0))
            text = f.read().decode("utf-8", errors="replace")
    except OSError:
        return None
    # Lines cut at 2,000 characters: a log may echo requests, whose text is anyone's.
    start = text.split("\n$ ")[-1].splitlines()
    lines = [_PREFIX.sub("", line[:2000]).strip() for line in start]
    frame = None
    for line in lines:
        if (found := _FRAME.match(line)) is not None:
            frame = f"{Path(found[1]).name}:{found[2]} in {found[3]}"
        elif raised(line):
            where = f" (raised at {frame})" if frame else ""
            return printable(redact(line[:400] + where))
    return None


def raised(line: str) -> bool:
    """Whether a log line is an exception's last line: `Name: message` or `Name`, where the
    name (dotted or not) ends in Error, Exception or Failure and starts with a capital."""
    name = line.partition(":")[0]
    last = name.rpartition(".")[2]
    return (
        _NAME.fullmatch(name) is not None
        and last[:1].isupper()
        and last.endswith(("Error", "Exception", "Failure"))
    )


def known_fix(error: str | None) -> str | None:
    """What avoids a failure of the server that KNOWN_ERRORS names."""
    return next((fix for words, fix in KNOWN_ERRORS if error and words in error), None)


def why_it_ended(log: Path) -> str:
    """What a server's log says of its end, for a message: its first error (and what avoids
    it, where known), else the last lines it wrote; '' for an empty log."""
    error = first_error(log)
    if error is None:
        tail = log_tail(log)
        return f": {tail}" if tail else ""
    fix = known_fix(error)
    return f"; its first error: {error}" + (f"; {fix}" if fix else "")


class Server(Protocol):
    """One replica as the pool starts, watches and stops it: a LocalServer, or a RayServer
    (serving.ray_pool) that Ray places."""

    url: str | None
    exit_code: int | None
    log: Path

    @property
    def where(self) -> str: ...

    async def start(self) -> str: ...

    def alive(self) -> bool: ...

    async def stop(self) -> None: ...

    def kill(self) -> None: ...


class LocalServer:
    """One `vllm serve` process on this node, on `gpus`, writing to `log`."""

    def __init__(
        self,
        spec: ServeSpec,
        gpus: Sequence[int],
        log: Path,
        *,
        start_timeout: float = 900,
        grace: float = 30,
        host: str = "127.0.0.1",
    ):
        self.spec, self.gpus, self.log = spec, list(gpus), Path(log)
        self.start_timeout, self.grace, self.host = start_timeout, grace, host
        self.process: subprocess.Popen[bytes] | None = None
        self.url: str | None = None
        self.exit_code: int | None = None  # how its last process ended, once stopped

    def _fail(self, what: str) -> ServerError:
        return ServerError(
            f"the vllm server for {self.spec.label} {what}; see {self.log}{why_it_ended(self.log)}"
        )

    async def start(self) -> str:
        """Start the server and wait until /health and /v1/models answer; its base URL."""
        if not has_vllm():
            raise ServerError(f"cannot serve {self.spec.label}: {NO_VLLM}")
        self.log.parent.mkdir(parents=True, exist_ok=True)
        for attempt in range(PORT_TRIES):
            port = free_port(self.host)
            self._spawn(server_command(self.spec.command(port, self.host)))
            try:
                self.url = await self._ready(f"http://{self.host}:{port}")
                return self.url
            except _PortTaken:
                await self.stop()
                if attempt == PORT_TRIES - 1:
                    raise self._fail(f"found {PORT_TRIES} ports taken in a row") from None
            except BaseException:
                await self.stop()
                raise
        raise AssertionError("unreachable")

    def _spawn(self, command: list[str]) -> None:
        env = environment()  # vllm is a Python program: nothing from the working directory
        if self.gpus:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(map(str, self.gpus))
        fd = open_record(self.log, APPEND, "check the folder's permissions.")  # never a link
        with os.fdopen(fd, "ab") as log:
            log.write(f"$ {shown(command)}\n".encode())
            log.flush()
            self.process = subprocess.Popen(
                guarded(command, self.grace),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,  # its own group: stop() reaches its children
            )

    async def _ready(self, root: str) -> str:
        deadline = time.monotonic() + self.start_timeout
        timeout = aiohttp.ClientTimeout(total=5)
        async with aiohttp.ClientSession(timeout=timeout) as session:
            while True:
                assert self.process is not None
                if self.process.poll() is not None:
                    tail = log_tail(self.log, 50).lower()
                    if "address already in use" in tail or "errno 98" in tail:
                        raise _PortTaken
                    raise self._fail(f"exited during start-up (code {self.process.returncode})")
                if await self._answers(session, root):
                    return root + "/v1"
                if time.monotonic() > deadline:
                    raise self._fail(f"did not answer within {self.start_timeout:g} s")
                await asyncio.sleep(POLL)

    async def _answers(self, session: aiohttp.ClientSession, root: str) -> bool:
        try:
            async with session.get(root + "/health") as health:
                if health.status != 200:
                    return False
            async with session.get(root + "/v1/models") as models:
                if models.status != 200:
                    return False
                listed = parse_json(await read_body(models))
        except (aiohttp.ClientError, TimeoutError, ValueError, ReplyTooLarge):
            return False
        data = listed.get("data") if isinstance(listed, dict) else None
        names = {m.get("id") for m in data if isinstance(m, dict)} if isinstance(data, list) else ()
        return self.spec.label in names

    @property
    def where(self) -> str:
        """Where it runs, for progress lines."""
        return f"GPUs {','.join(map(str, self.gpus))}" if self.gpus else "no GPU set"

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    async def stop(self) -> None:
        """SIGTERM to the server's group, SIGKILL to what is left after `grace`; idempotent."""
        process = self.process
        if process is None:
            return
        group = process.pid
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(group, signal.SIGTERM)
        deadline = time.monotonic() + self.grace
        while process.poll() is None and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        # The leader gone, its children may linger a moment: they go with the group.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(group, signal.SIGKILL)
        self.exit_code = process.wait()
        self.process = None

    def kill(self) -> None:
        """SIGKILL to the group at once: the last resort when no event loop is left."""
        if self.process is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.process.pid, signal.SIGKILL)


def log_path(folder: Path, label: str, replica: int) -> Path:
    """server-LABEL-N.log in the run (or experiment) folder."""
    safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in label)
    return folder / f"server-{safe}-{replica}.log"


@contextlib.asynccontextmanager
async def served(
    spec: ServeSpec,
    placement: Sequence[Sequence[int]],
    folder: Path,
    listener: Listener,
    **limits: float,
) -> AsyncIterator[list[str]]:
    """Start a replica on each GPU set of `placement` (all at once) and yield their URLs;
    stop every one afterwards, on success, error or cancellation alike."""
    async with replicas(spec, placement, folder, listener, LocalServer, **limits) as servers:
        yield [server.url or "" for server in servers]


async def first_exit(servers: Sequence[Server], poll: float = 0.2) -> Server:
    """Wait until one of the servers exits on its own; that server. Asked off the event loop:
    a server placed by Ray answers over the network (up to 30 s from a node that hangs),
    and the run's requests share the loop."""

    def gone() -> Server | None:
        return next((server for server in servers if not server.alive()), None)

    while True:
        server = await asyncio.to_thread(gone)
        if server is not None:
            return server
        await asyncio.sleep(poll)


@contextlib.asynccontextmanager
async def replicas(
    spec: ServeSpec,
    placement: Sequence[Sequence[int]],
    folder: Path,
    listener: Listener,
    make: Callable[..., Server] = LocalServer,
    **limits: float,
) -> AsyncIterator[list[Server]]:
    """`served`, yielding the ready servers themselves (to watch them); `make` makes each
    one from (spec, gpus, log, **limits): LocalServer, or a RayServer placed by Ray."""
    servers = [
        make(spec, gpus, log_path(folder, spec.label, i), **limits)
        for i, gpus in enumerate(placement)
    ]
    try:
        for one in servers:
            listener.say(f"Starting vllm serve for {spec.label} ({one.where}); log: {one.log}")
        starting = [asyncio.ensure_future(server.start()) for server in servers]
        try:
            urls = await asyncio.gather(*starting)
        except BaseException:  # one failed: the others stop starting
            for task in starting:
                task.cancel()
            await asyncio.gather(*starting, return_exceptions=True)
            raise
        for url in urls:
            listener.say(f"Server {spec.label} ready at {url}")
        yield servers
    finally:
        ready = sum(1 for server in servers if server.url)
        try:
            await asyncio.shield(asyncio.gather(*(server.stop() for server in servers)))
        finally:
            for server in servers:
                server.kill()
        if ready:
            listener.say(f"Server {spec.label} stopped ({ready} replica(s)).")
