"""The grader's side of the math-verify workers (mad_eval.grading.verify_worker): a pool of plain
subprocesses, one comparison or reading each at a time, every call bounded by
VERIFY_TIMEOUT_S.

Workers start lazily, a new one only when all are busy, up to one per usable CPU (or
$MAD_EVAL_GRADERS), so a slow answer holds up one worker, not every grade; a comparison goes
to the idle worker that parsed its LaTeX before. A worker past its bound or dead is killed,
reaped and replaced; no worker outlives the process that started it, and interpreter exit
kills them all. A verdict reached before is never asked again (mad_eval.grading.verdicts),
and threads asking for the same one at once make one request.
"""

from __future__ import annotations

import atexit
import contextlib
import contextvars
import functools
import hashlib
import json
import logging
import os
import queue
import selectors
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from typing import Any, TypeVar

from mad_eval.children import python_module
from mad_eval.errors import UserError
from mad_eval.grading.math_verify_settings import DEFAULT, MathVerifySettings
from mad_eval.grading.verdicts import VERDICTS, key
from mad_eval.grading.verify_worker import PARENT_ENV, PARSES, Comparison, Extraction

log = logging.getLogger(__name__)

VERIFY_TIMEOUT_S = 10.0
"""Wall-clock bound on one math-verify comparison or extraction, enforced by the parent process
from the moment the request reaches a worker (never counting the wait for a free one)."""
GRADERS_ENV = "MAD_EVAL_GRADERS"
"""Environment variable: the most math-verify worker processes to run at once."""
_STARTUP_TIMEOUT_S = 120.0  # a worker imports sympy first; kept out of the per-call bound
WORKER = "mad_eval.grading.verify_worker"


class WorkerGone(Exception):
    """The worker exited, closed its pipes or broke the protocol."""


class _Spawner:
    """One thread, alive as long as the process, that starts every worker: Linux sends the
    parent-death signal when the *thread* that forked a child ends, and callers' threads
    (asyncio.to_thread) come and go."""

    def __init__(self) -> None:
        self._requests: queue.SimpleQueue[tuple[Callable[[], Any], Future[Any]]]
        self._requests = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._serve, name="verify-spawner", daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            start, result = self._requests.get()
            try:
                result.set_result(start())
            except BaseException as exc:
                result.set_exception(exc)

    def run(self, start: Callable[[], Any]) -> Any:
        result: Future[Any] = Future()
        self._requests.put((start, result))
        return result.result()


_spawner: _Spawner | None = None
_spawner_lock = threading.Lock()


def _spawn(start: Callable[[], Any]) -> Any:
    global _spawner
    with _spawner_lock:
        if _spawner is None or not _spawner.thread.is_alive():
            _spawner = _Spawner()
        spawner = _spawner
    return spawner.run(start)


def _forget_spawner() -> None:
    """A forked child has no spawner thread, and the lock may have been held at the fork."""
    global _spawner, _spawner_lock
    _spawner, _spawner_lock = None, threading.Lock()


if hasattr(os, "register_at_fork"):  # POSIX only
    os.register_at_fork(after_in_child=_forget_spawner)


class Worker:
    """A running worker, used by one thread at a time; its stderr goes to a private file,
    whose last line explains a failure instead of reaching the user's terminal."""

    def __init__(self, startup_timeout: float) -> None:
        """Start a worker (same process group, so `kill -- -PGID` reaches it) and wait until
        it is ready; raises WorkerGone or TimeoutError after killing it."""
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 (closed in close())
        env = {**os.environ, PARENT_ENV: str(os.getpid())}
        popen = functools.partial(
            subprocess.Popen,
            python_module(WORKER),  # never importing from the working directory
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env=env,
        )
        try:
            self._proc: subprocess.Popen[bytes] = _spawn(popen)
        except BaseException:
            self._stderr.close()
            raise
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._stdin, self._out = self._proc.stdin, self._proc.stdout
        self._stdout = self._out.fileno()
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._stdout, selectors.EVENT_READ)
        self._pending = b""
        self._parsed: set[str] = set()  # the LaTeX its parse cache holds, as far as we know
        try:
            if self._read(time.monotonic() + startup_timeout) != {"ready": True}:
                raise WorkerGone("it sent something other than its ready line")
        except BaseException:
            self.close()
            raise

    @property
    def pid(self) -> int:
        return self._proc.pid

    def knows(self, parses: tuple[str, ...]) -> int:
        """How many of `parses` this worker has parsed (and so keeps) already."""
        return sum(latex in self._parsed for latex in parses)

    def parsed(self, parses: tuple[str, ...]) -> None:
        """Note what the worker has just parsed; it forgets its parses when it holds PARSES."""
        if len(self._parsed) + len(parses) > PARSES:
            self._parsed.clear()
        self._parsed.update(parses)

    def compare(self, answer: str, gold: str, timeout: float) -> Comparison:
        """math-verify's verdict; raises TimeoutError when no reply comes within `timeout`
        seconds of sending, WorkerGone when the worker fails. Either way, close it."""
        reply = self._request({"answer": answer, "gold": gold}, timeout)
        equal, timed_out = reply.get("equal"), reply.get("timed_out")
        if not isinstance(equal, bool) or not isinstance(timed_out, bool) or self._pending:
            raise WorkerGone(f"unexpected reply {reply!r:.200}")
        return Comparison(equal, timed_out)

    def read(
        self, text: str, gold: str | None, settings: MathVerifySettings, timeout: float
    ) -> Extraction:
        """The answer math-verify finds in a whole reply and, given a gold, its verdict;
        raises as compare() does."""
        message = {"text": text, "gold": gold, "settings": settings.to_json()}
        reply = self._request(message, timeout)
        answer, timed_out, equal = (reply.get(k) for k in ("answer", "timed_out", "equal"))
        ok = answer is None or isinstance(answer, str)
        if not ok or not isinstance(timed_out, bool) or not isinstance(equal, bool):
            raise WorkerGone(f"unexpected reply {reply!r:.200}")
        if self._pending:
            raise WorkerGone(f"unexpected reply {reply!r:.200}")
        return Extraction(answer, timed_out, equal)

    def _request(self, message: dict[str, Any], timeout: float) -> dict[str, Any]:
        """Send one request line; the reply line, read within `timeout` seconds of sending."""
        try:
            self._stdin.write(json.dumps(message).encode() + b"\n")
            self._stdin.flush()
        except OSError as exc:
            raise WorkerGone(self.describe_exit("its input was closed")) from exc
        return self._read(time.monotonic() + timeout)

    def _read(self, deadline: float) -> dict[str, Any]:
        """The next line from the worker as JSON, read without blocking past the deadline."""
        while b"\n" not in self._pending:
            left = deadline - time.monotonic()
            if left <= 0 or not self._selector.select(left):
                raise TimeoutError
            chunk = os.read(self._stdout, 65536)
            if not chunk:
                raise WorkerGone(self.describe_exit("it exited"))
            self._pending += chunk
        line, _, self._pending = self._pending.partition(b"\n")
        try:
            message = json.loads(line)
        except ValueError:
            message = None
        if not isinstance(message, dict):
            raise WorkerGone(f"malformed line {line!r:.200}")
        return message

    def kill(self) -> None:
        """SIGKILL and reap: a stuck sympy call ignores anything politer. Safe from any thread."""
        self._proc.kill()
        self._proc.wait()

    def close(self) -> None:
        """Kill the worker and release its pipes and files (by its owner only)."""
        self.kill()
        self._selector.close()
        for f in (self._stdin, self._out, self._stderr):
            with contextlib.suppress(OSError):  # buffered bytes cannot reach a dead worker
                f.close()

    def describe_exit(self, what: str) -> str:
        """`what`, the exit status when known, and the last line the worker wrote to stderr."""
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._proc.wait(timeout=1)  # the pipe closes a moment before the exit is reapable
        status = self._proc.returncode
        if status is not None:
            what += f" (signal {-status})" if status < 0 else f" (status {status})"
        size = os.fstat(self._stderr.fileno()).st_size
        tail = os.pread(self._stderr.fileno(), 4096, max(0, size - 4096))
        lines = tail.decode(errors="replace").strip().splitlines()
        return f"{what}: {lines[-1].strip()[:300]}" if lines else what


class GradersError(UserError, ValueError):
    """$MAD_EVAL_GRADERS is no number of workers."""


def max_graders() -> int:
    """How many math-verify workers may run at once: $MAD_EVAL_GRADERS, else one per CPU this
    process may use (each worker holds about 160 MB)."""
    raw = os.environ.get(GRADERS_ENV, "").strip()
    if not raw:
        affinity = getattr(os, "sched_getaffinity", None)
        return len(affinity(0)) if affinity else os.cpu_count() or 1
    try:
        count = int(raw)
    except ValueError:
        count = 0
    if count < 1:
        raise GradersError(
            f"{GRADERS_ENV} must be a positive integer (the most math-verify worker processes "
            f"to run at once), not {raw!r}"
        )
    return count


class _Pool:
    """Idle workers handed to one caller at a time; a new one starts only when all are busy."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._workers: set[Worker] = set()  # idle and busy
        self._idle: list[Worker] = []
        self._starting = 0

    def acquire(self, parses: tuple[str, ...] = ()) -> Worker:
        """An idle worker, the one that parsed most of `parses` before (each keeps its
        parses: a gold is compared with every answer to its question), or a new one."""
        limit = max_graders()  # read every time, so a bad value fails even with idle workers
        with self._changed:
            while not self._idle and len(self._workers) + self._starting >= limit:
                self._changed.wait()
            if self._idle:
                best = max(self._idle, key=lambda worker: worker.knows(parses))
                self._idle.remove(best)
                return best
            self._starting += 1
        try:  # outside the lock: start-up takes a second or two
            worker = Worker(_STARTUP_TIMEOUT_S)
        except (WorkerGone, TimeoutError, OSError) as exc:
            reason = f"it was not ready within {_STARTUP_TIMEOUT_S:.0f} s"
            raise RuntimeError(
                f"could not start a math-verify worker ({WORKER}): "
                f"{reason if isinstance(exc, TimeoutError) else exc}"
            ) from exc
        finally:
            with self._changed:
                self._starting -= 1
                self._changed.notify()
        with self._changed:
            self._workers.add(worker)
        return worker

    def release(self, worker: Worker) -> None:
        with self._changed:
            if worker in self._workers:
                self._idle.append(worker)
                self._changed.notify()
                return
        worker.close()  # stopped while it was busy

    def discard(self, worker: Worker) -> bool:
        """Close a failed worker; False when stop() had already taken it out of the pool."""
        worker.close()
        with self._changed:
            held = worker in self._workers
            self._workers.discard(worker)
            self._changed.notify()
        return held

    def stop(self) -> None:
        """Kill every worker; the next comparison starts afresh."""
        with self._changed:
            idle, busy = self._idle, self._workers.difference(self._idle)
            self._idle = []
            self._workers.clear()
            self._changed.notify_all()
        for worker in idle:
            worker.close()
        for worker in busy:
            worker.kill()  # its caller still reads its pipes and closes them

    def pids(self) -> list[int]:
        with self._changed:
            return sorted(w.pid for w in self._workers)


_pool = _Pool()


def _forget_pool() -> None:
    """A forked child must not talk over its parent's pipes: it starts workers of its own."""
    global _pool
    _pool = _Pool()


if hasattr(os, "register_at_fork"):  # POSIX only
    os.register_at_fork(after_in_child=_forget_pool)


@atexit.register
def stop_graders() -> None:
    """Kill all math-verify workers, so interpreter exit never waits on sympy; comparisons in
    progress raise RuntimeError, and the next one starts fresh workers."""
    _pool.stop()


def grader_pids() -> list[int]:
    """PIDs of the running math-verify workers, idle or busy: for tests and diagnostics."""
    return _pool.pids()


T = TypeVar("T", Comparison, Extraction)


def _ask(
    call: Callable[[Worker], T],
    timed_out: T,
    request: str,
    what: Callable[[], str],
    parses: tuple[str, ...],
) -> T:
    """One worker's reply to `call`, or `timed_out` past VERIFY_TIMEOUT_S; a worker that
    fails (WorkerGone) or is interrupted mid-request is killed and discarded. `request` names
    the kind of request ("a comparison") and `what` this one, for the messages; `parses`, the
    LaTeX it parses, so it goes to an idle worker that parsed them before."""
    worker = _pool.acquire(parses)
    try:
        result = call(worker)
        worker.parsed(parses)
    except TimeoutError:
        _pool.discard(worker)
        log.warning(
            "math-verify passed its %.0f s bound on %s; its worker was killed",
            VERIFY_TIMEOUT_S,
            what(),
        )
        return timed_out
    except WorkerGone as exc:
        if not _pool.discard(worker):  # a failure, not a verdict: never score it
            raise RuntimeError(f"the math-verify workers were stopped during {request}") from exc
        log.warning("math-verify worker %d failed on %s: %s", worker.pid, what(), exc)
        raise
    except BaseException:  # e.g. Ctrl-C while waiting: the worker is mid-request
        _pool.discard(worker)
        raise
    _pool.release(worker)
    return result


def _ask_twice(
    call: Callable[[Worker], T],
    timed_out: T,
    request: str,
    what: Callable[[], str],
    parses: tuple[str, ...] = (),
) -> T:
    """_ask, again once if the worker died; a worker that dies twice counts as a timeout."""
    try:
        return _ask(call, timed_out, request, what, parses)
    except WorkerGone:
        try:  # the first one may have been killed from outside while it was idle
            return _ask(call, timed_out, request, what, parses)
        except WorkerGone:
            return timed_out


class NeedsWorker(Exception):
    """Raised in place of asking a worker while grading inline (`inline`)."""


_inline = contextvars.ContextVar("inline", default=False)


@contextlib.contextmanager
def inline() -> Iterator[None]:
    """Within it, verify and extract raise NeedsWorker instead of asking a worker: for
    grading on the event loop what needs no math-verify (grading.grade_inline)."""
    token = _inline.set(True)
    try:
        yield
    finally:
        _inline.reset(token)


_flying: dict[str, Future[list[Any]]] = {}  # verdicts being asked for now, by key
_flying_lock = threading.Lock()


def _forget_flying() -> None:
    """A forked child has none of the threads asking: it must not wait for their verdicts."""
    global _flying, _flying_lock
    _flying, _flying_lock = {}, threading.Lock()


if hasattr(os, "register_at_fork"):  # POSIX only
    os.register_at_fork(after_in_child=_forget_flying)


def _comparison(kept: list[Any]) -> bool:
    return len(kept) == 2 and all(isinstance(field, bool) for field in kept)


def _extraction(kept: list[Any]) -> bool:
    if len(kept) != 3:
        return False
    answer, *flags = kept
    return (answer is None or isinstance(answer, str)) and all(isinstance(f, bool) for f in flags)


_SHAPES: dict[type, Callable[[list[Any]], bool]] = {
    Comparison: _comparison,
    Extraction: _extraction,
}


def _once(asked: str, make: type[T], ask: Callable[[], T]) -> T:
    """The verdict under the key `asked`: kept (mad_eval.grading.verdicts), else being asked
    for by another thread (awaited: five agents giving one answer make one request), else
    asked for now with `ask` and kept; `make` builds it from what was kept."""
    fits = _SHAPES[make]
    found = VERDICTS.get(asked, fits)
    if found is not None:
        return make(*found)
    if _inline.get():
        raise NeedsWorker
    with _flying_lock:
        found = VERDICTS.get(asked, fits)  # kept just now, by a thread that has let go of it
        flying = _flying.get(asked)
        mine = found is None and flying is None
        if mine:
            flying = _flying[asked] = Future()
    if found is not None:
        return make(*found)
    assert flying is not None
    if not mine:
        return make(*flying.result())  # raises what the asking thread's request raised
    try:
        result = ask()
    except BaseException as exc:
        flying.set_exception(exc)
        raise
    else:
        VERDICTS.put(asked, list(result), lasting=not result.timed_out)
        flying.set_result(list(result))
    finally:
        with _flying_lock:
            del _flying[asked]
    return result


def verify(answer: str, gold: str) -> Comparison:
    """math-verify's verdict; a worker that dies twice on the answer counts as a timeout. A
    verdict reached before is not asked again."""

    def ask() -> Comparison:
        result = _ask_twice(
            lambda worker: worker.compare(answer, gold, VERIFY_TIMEOUT_S),
            Comparison(False, True),
            "a comparison",
            lambda: f"{answer!r:.80} vs gold {gold!r:.80}",
            (answer, gold),
        )
        if result.timed_out:
            log.info("math-verify timed out on %.80r vs gold %.80r", answer, gold)
        return result

    return _once(key("compare", answer, gold), Comparison, ask)


def read(text: str, gold: str | None = None, settings: MathVerifySettings = DEFAULT) -> Extraction:
    """The answer math-verify finds in a whole reply and, given a gold, whether it equals it,
    as verl's MATH500 scorer decides (`settings`: Math-Verify's parameters); past the bound
    (or a worker dying twice on it) no answer, timed out. A reply read before (the simulated
    agents read each peer's reply many times; a re-run, all of them) is not read again."""

    def ask() -> Extraction:
        result = _ask_twice(
            lambda worker: worker.read(text, gold, settings, VERIFY_TIMEOUT_S),
            Extraction(None, True),
            "a reading",
            lambda: f"a reply of {len(text)} characters ending {text[-60:]!r}",
            (gold,) if gold is not None else (),
        )
        if result.timed_out:
            log.info("math-verify timed out reading a reply of %d characters", len(text))
        return result

    digest = hashlib.sha256(text.encode(errors="surrogatepass")).hexdigest()
    settings_text = json.dumps(settings.to_json(), sort_keys=True)
    return _once(key("read", digest, gold, settings_text), Extraction, ask)


def extract(text: str, settings: MathVerifySettings = DEFAULT) -> Extraction:
    """The answer math-verify finds in a whole reply, as verl's MATH500 scorer searches it."""
    return read(text, None, settings)
