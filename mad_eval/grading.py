"""Answer extraction and equivalence for math answers.

Model text is hostile input: extraction is a linear scan, and math-verify (sympy) runs in a
child process whose every call the parent bounds with a timeout, so no answer can hang a run.
The worker is spawned, so a script that grades needs the usual `if __name__ == "__main__":`.
"""

from __future__ import annotations

import atexit
import functools
import logging
import multiprocessing
import re
import threading
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass

log = logging.getLogger(__name__)

MAX_ANSWER_CHARS = 1000
"""Longer extracted answers count as unparsed: a truncated answer would be a guess."""
VERIFY_TIMEOUT_S = 10.0
"""Wall-clock bound on one math-verify comparison, enforced by the parent process."""
_STARTUP_TIMEOUT_S = 120.0  # spawning a worker imports sympy; kept out of the per-call bound

# A box opener, an escaped character (so `\{` and `\}` are not grouping) or a bare brace.
_TOKEN = re.compile(r"\\(?:boxed|fbox|framebox)\s*\{|\\.|[{}]", re.DOTALL)
# Fallbacks when nothing is boxed, tried in this order; the last occurrence of each counts.
_CUES = [re.compile(p, re.IGNORECASE) for p in (r"final answer is", r"the answer is", r"answer:")]
_SENTENCE_END = re.compile(r"\.(?:\s|$)")
_INTEGER = re.compile(r"[+-]?(?:\d+|\d{1,3}(?:,\d{3})+)")


@dataclass(frozen=True)
class Grade:
    """One graded text; an unparsed answer (None) is never correct."""

    answer: str | None  # extracted final answer; None when nothing could be extracted
    correct: bool  # False when unparsed


def _last_box(text: str) -> tuple[int, int, int] | None:
    """(macro start, content start, content end) of the box that closes last, i.e. the last
    top-level one; None if no box closes. One pass, so linear in len(text)."""
    stack: list[tuple[int, int] | None] = []  # (macro start, content start) for a box's brace
    last = None
    for m in _TOKEN.finditer(text):
        tok = m.group()
        if tok == "{":
            stack.append(None)
        elif tok == "}":
            if stack and (box := stack.pop()) is not None:
                last = (*box, m.start())
        elif len(tok) > 2:
            stack.append((m.start(), m.end()))
    return last


def _cue_answer(text: str) -> str | None:
    """Text after the last answer cue, up to the end of its line or sentence."""
    for cue in _CUES:
        if matches := list(cue.finditer(text)):
            line = text[matches[-1].end() :].split("\n", 1)[0]
            if stop := _SENTENCE_END.search(line):
                line = line[: stop.start()]
            return line.strip().strip("*").strip()
    return None


def extract_answer(text: str) -> str | None:
    """The last boxed answer, else the text after an answer cue; None if there is neither."""
    box = _last_box(text)
    answer = text[box[1] : box[2]] if box else _cue_answer(text)
    while answer is not None and len(answer) <= MAX_ANSWER_CHARS:
        answer = answer.strip().removesuffix(".").strip().strip("$").strip()
        box = _last_box(answer)
        if not box or box[0] != 0 or box[2] != len(answer) - 1:
            break
        answer = answer[box[1] : box[2]]  # `\boxed{\boxed{x}}` and `$\boxed{x}$.` both mean x
    if not answer or len(answer) > MAX_ANSWER_CHARS:
        return None
    return answer


def _integer_key(s: str) -> str | None:
    """Canonical digits of a plain integer ("+025", "1,000"), so equal ints compare equal."""
    if not _INTEGER.fullmatch(s):
        return None
    digits = s.lstrip("+-").replace(",", "").lstrip("0") or "0"
    return digits if s[0] != "-" or digits == "0" else "-" + digits


# ---- math-verify in a child process -------------------------------------------------------


def _warm_up() -> bool:
    """Import and exercise math-verify once so the first real call is not charged for it."""
    return _verify_in_worker("1", "1")


def _verify_in_worker(answer: str, gold: str) -> bool:
    """Runs in the worker's main thread, where math-verify's own signal timeouts work."""
    from math_verify import parse, verify

    # Boxing makes math-verify read the whole string as one answer; on MATH500 golds it gives
    # the same parses as `$...$` at half the cost. Its default 5 s signal timeouts stay on.
    return verify(parse(f"\\boxed{{{gold}}}"), parse(f"\\boxed{{{answer}}}"))


# One call at a time: the bound then times only that call, never the queue ahead of it.
_lock = threading.Lock()
_pool: ProcessPoolExecutor | None = None


def _kill(pool: ProcessPoolExecutor) -> None:
    """Kill the workers outright: a stuck sympy call ignores polite shutdown."""
    kill = getattr(pool, "kill_workers", None)  # public from Python 3.14
    if kill is not None:
        kill()
    else:
        for proc in list((getattr(pool, "_processes", None) or {}).values()):
            proc.kill()
    pool.shutdown(wait=False, cancel_futures=True)


def _get_pool() -> ProcessPoolExecutor:
    """The worker pool, started and warmed up on first use or after a kill (call with _lock)."""
    global _pool
    if _pool is None:
        pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"))
        try:
            pool.submit(_warm_up).result(timeout=_STARTUP_TIMEOUT_S)
        except Exception as exc:
            _kill(pool)
            raise RuntimeError(
                "could not start the math-verify worker process; a script that grades must "
                "guard its entry point with `if __name__ == '__main__':`"
            ) from exc
        _pool = pool
    return _pool


@atexit.register
def _shutdown() -> None:
    """Kill a worker that may still be busy, so interpreter exit never waits on sympy."""
    if _pool is not None:
        _kill(_pool)


def _math_verify(answer: str, gold: str) -> bool:
    """math-verify's verdict, or False when it exceeds the time bound or crashes its worker."""
    global _pool
    with _lock:
        pool = _get_pool()
        try:
            return pool.submit(_verify_in_worker, answer, gold).result(VERIFY_TIMEOUT_S)
        except (FutureTimeout, BrokenProcessPool) as exc:
            log.warning(
                "math-verify gave up (%s) on %.80r vs gold %.80r", type(exc).__name__, answer, gold
            )
            _pool = None
            _kill(pool)
            return False


@functools.lru_cache(maxsize=65536)
def equivalent(answer: str, gold: str) -> bool:
    """Whether answer means gold: cheap string and integer checks first, then math-verify."""
    a, g = " ".join(answer.split()), " ".join(gold.split())
    if a == g:
        return True
    a_int, g_int = _integer_key(a), _integer_key(g)
    if a_int is not None and g_int is not None:
        return a_int == g_int
    if not a or len(a) > MAX_ANSWER_CHARS:
        return False
    return _math_verify(a, g)


def grade(text: str | None, gold: str) -> Grade:
    """Extract the final answer from text and check it against gold."""
    answer = extract_answer(text) if text else None
    return Grade(answer, answer is not None and equivalent(answer, gold))
