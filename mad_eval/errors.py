"""The base of every error a user can cause: a setting, file or server that cannot work.

Each module keeps its own error class (ConfigError, StoreError, ...), named for where the
problem is; all of them derive from UserError, so the command line catches one class and
shows its message, one sentence naming the problem and the fix, without importing every
module that could raise one.
"""

import re
import signal
import threading
from collections.abc import Callable, Collection, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any


class UserError(Exception):
    """A problem the user can fix; its message says what and how, in one sentence."""


class Interrupted(KeyboardInterrupt):
    """Ctrl-C, SIGTERM or SIGHUP stopped the work: every finished record (a turn, a
    verdict: `what`) is kept in `records` (None: the work keeps none, as a report), and the
    same call resumes."""

    def __init__(
        self, sig: signal.Signals, records: str | None = "its run folder", what: str = "turn"
    ):
        super().__init__(f"stopped by {sig.name}")
        self.signal, self.records, self.what = sig, records, what


# The signals that stop a command: Ctrl-C, then those a system sends (no SIGHUP on Windows).
STOPS = tuple(
    getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name)
)


@contextmanager
def handling(
    handler: Callable[[int, Any], None], signals: Iterable[signal.Signals]
) -> Iterator[None]:
    """`handler` for `signals` inside, the previous handlers after. Only in the main thread
    (where Python runs signal handlers), and a signal ignored by whoever started the process
    (nohup's SIGHUP, a background job's Ctrl-C) stays ignored."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    heard = [sig for sig in signals if signal.getsignal(sig) is not signal.SIG_IGN]
    before = {sig: signal.signal(sig, handler) for sig in heard}
    try:
        yield
    finally:
        for sig, previous in before.items():
            signal.signal(sig, signal.SIG_DFL if previous is None else previous)


def stop_here(number: int, frame: Any) -> None:
    """A signal handler: stop the work where it runs, as Ctrl-C does, for work that keeps
    no records (a report, a site: written whole or not at all)."""
    raise Interrupted(signal.Signals(number), records=None)


class SkippedRun(UserWarning):
    """A run folder found inside a folder given to a whole-folder command (`table results/`)
    was left out: it holds no turns (a run that crashed before its first) or lacks what the
    command needs (a judge's verdicts). The message names the folder and why."""


class SuspiciousResult(UserWarning):
    """A run's numbers are suspect: most of its final answers went unread (unparsed, cut off,
    failed), so Maj and Debate say little of the model. The message says why and what to
    change; metrics.json keeps the same sentence in `alerts`."""


# Whether the command line is the caller (it sets this around each library call): its
# messages name options (--data-dir), a library caller's name keywords (data_dir).
COMMAND_LINE: ContextVar[bool] = ContextVar("mad_eval_command_line", default=False)

# An option as a sentence names it; one inside quotes is a value the sentence shows (a
# recorded `vllm serve` argument, '--seed'), never reworded.
_OPTION = re.compile(r"(?<!['\"\w-])--([a-z][a-z0-9-]*)")


@contextmanager
def on_command_line() -> Iterator[None]:
    """Messages (errors, alerts) inside are for the command line, which names options."""
    token = COMMAND_LINE.set(True)
    try:
        yield
    finally:
        COMMAND_LINE.reset(token)


def for_keywords(text: str, keywords: Collection[str]) -> str:
    """`text` as a caller of the library reads it: each option that is one of its call's
    `keywords` written as that keyword (--data-dir as data_dir: a keyword is its long
    option with underscores)."""

    def keyword(found: re.Match[str]) -> str:
        name = found[1].replace("-", "_")
        return name if name in keywords else found[0]

    return _OPTION.sub(keyword, text)
