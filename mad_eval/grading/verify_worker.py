"""The math-verify worker: a plain child process that runs sympy where the grader can bound it,
kill it and replace it (mad_eval.grading.verifier is the parent's side).

The grader starts it as `python -m mad_eval.grading.verify_worker`, isolated from the working
directory (mad_eval.children; no multiprocessing, so a script that grades needs no main
guard). One JSON object per line each way; json.dumps escapes newlines, so no model text can
split a line or pass for a reply:

    worker -> parent, once warmed up:  {"ready": true}
    parent -> worker, per comparison:  {"answer": "...", "gold": "..."}
    worker -> parent:                  {"equal": true|false, "timed_out": true|false}
    parent -> worker, per reading:     {"text": "...", "gold": "..."|null, "settings": {...}}
    worker -> parent:                  {"answer": "..."|null, "equal": true|false,
                                        "timed_out": true|false}

A reading is the math-verify answer protocol's: Math-Verify searches the whole reply and,
given a gold, decides on its own parses as verl's MATH500 scorer does (settings: see
mad_eval.grading.math_verify_settings; none, verl's).

It exits at the end of its input, ignores SIGINT (the parent decides what Ctrl-C means) and
dies with its parent, even after `kill -9` and even inside a long sympy call.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import IO, Any, NamedTuple

from mad_eval.grading.math_verify_settings import MathVerifySettings

PARENT_ENV = "MAD_EVAL_VERIFY_PARENT"  # the PID the worker must die with
_PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>
_WATCH_INTERVAL_S = 0.2
PARSES = 8192  # parses a worker keeps (sympy expressions of short answers: a few MB)


class Comparison(NamedTuple):
    """math-verify's verdict on one answer; `timed_out`: it ran out of time without a match."""

    equal: bool
    timed_out: bool


class Extraction(NamedTuple):
    """The answer math-verify finds in a whole reply (None: none), whether it ran out of
    time without finding one (or, given a gold, without a match), and, given a gold,
    whether the reply's answer equals it (False when no gold was given)."""

    answer: str | None
    timed_out: bool
    equal: bool = False


# ---- the worker process --------------------------------------------------------------------


def _watch_parent(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(_WATCH_INTERVAL_S)
    os._exit(1)


def _die_with_parent(parent: int) -> None:
    """Linux's parent-death signal kills us in the kernel, even while the main thread holds the
    GIL in a huge integer power; the watchdog thread covers other systems."""
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # it died before the signal was armed
        sys.exit(f"mad_eval.grading.verify_worker: its parent process {parent} is gone")
    threading.Thread(target=_watch_parent, args=(parent,), name="parent-watch", daemon=True).start()


class _TimeoutSeen(logging.Handler):
    """Notes math-verify's own timeouts: it logs them ("Timeout during comparison", "Timeout
    during parsing: ...") and returns False, its only trace of them."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.seen = False

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage().startswith("Timeout during"):
            self.seen = True


def _numbers_apart(grader: Any) -> None:
    """Spare math-verify's symbolic step where numbers already decide it. Its last test of two
    expressions is whether sympy simplifies their difference to zero; two constants whose
    difference evaluates (strictly, to 30 digits) to a number clearly not zero are not equal,
    and simplifying is value-preserving, so that test could only say no: it is skipped. Every
    other case (a free symbol, infinities, an evaluation sympy cannot finish to precision)
    goes on to it as before. (conformance/quick_compare holds the verdicts on both paths.)"""
    import sympy

    symbolic = grader.sympy_symbolic_eq

    def sympy_symbolic_eq(a: Any, b: Any) -> bool:
        try:
            if isinstance(a, sympy.Expr) and isinstance(b, sympy.Expr):
                difference = a - b
                if not difference.free_symbols:
                    value = difference.evalf(30, strict=True)
                    if value.is_number and value.is_finite and abs(value) > 1e-20:
                        return False
        except Exception:  # no verdict from numbers (PrecisionExhausted, ...): sympy decides
            pass
        return bool(symbolic(a, b))

    grader.sympy_symbolic_eq = sympy_symbolic_eq


def _math_verify() -> tuple[
    Callable[[str, str], Comparison], Callable[[str, str | None, MathVerifySettings], Extraction]
]:
    """Import math-verify and route its warnings to a timeout detector instead of stderr; the
    comparer and the reader it serves."""
    import math_verify.grader
    import sympy
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify
    from math_verify.errors import TimeoutException
    from math_verify.utils import timeout

    _numbers_apart(math_verify.grader)

    detector = _TimeoutSeen()
    logger = logging.getLogger("math_verify")
    logger.addHandler(detector)
    logger.setLevel(logging.WARNING)
    logger.propagate = False

    parsed: dict[Any, Any] = {}  # LaTeX (or a gold and how it is read) -> its parse

    def once(key: Any, make: Callable[[], Any]) -> Any:
        """A parse kept (up to PARSES of them): a gold is compared with every answer to its
        question, and an answer often with several. A parse that timed out is not kept."""
        if key in parsed:
            return parsed[key]
        seen, detector.seen = detector.seen, False
        found = make()
        if not detector.seen:
            if len(parsed) >= PARSES:
                parsed.clear()
            parsed[key] = found
        detector.seen = seen or detector.seen
        return found

    def read(latex: str) -> Any:
        # Boxing makes math-verify read the whole string as one answer; on MATH500 golds it
        # gives the same parses as `$...$` at half the cost. Its 5 s signal timeouts stay on.
        return once(latex, lambda: parse(f"\\boxed{{{latex}}}"))

    def compare(answer: str, gold: str) -> Comparison:
        detector.seen = False
        try:
            equal = bool(verify(read(gold), read(answer)))
        except TimeoutException:  # an alarm landing outside math-verify's own handlers
            return Comparison(False, True)
        # One pairing of the parses may time out while another matches: then it did decide.
        return Comparison(equal, detector.seen and not equal)

    def targets(settings: MathVerifySettings) -> list[Any]:
        latex = LatexExtractionConfig(boxed_match_priority=settings.box_priority)
        return [ExprExtractionConfig() if t == "expr" else latex for t in settings.extract]

    def shown(found: list[Any], text: str, searched: list[Any]) -> str | None:
        """The answer as text: what Math-Verify matched, when its parse came from that match
        (the first one found), else the parse printed as LaTeX."""
        if not found or isinstance(found[0], str):  # nothing, or kept as text only
            return found[0] if found else None
        matched = found[-1] if len(found) > 1 and isinstance(found[-1], str) else None
        seen = detector.seen  # a timeout here changes the text shown, never the verdict
        first = parse(text, searched, fallback_mode="no_fallback", extraction_mode="first_match")
        detector.seen = seen
        if matched is not None and first:
            return matched
        try:
            return timeout(2)(sympy.latex)(found[0])
        except (Exception, TimeoutException):  # printing ran too long or failed
            return matched

    def reading(text: str, gold: str | None, settings: MathVerifySettings) -> Extraction:
        detector.seen = False
        searched = targets(settings)
        answer = None
        try:
            found = parse(text, searched)
            answer = shown(found, text, searched)
            if gold is None:
                return Extraction(answer, detector.seen and answer is None)
            if settings.gold == "boxed":  # as verl reads a gold: boxed, LaTeX alone
                key: Any = ("boxed", gold)
                golds = once(key, lambda: parse(f"\\boxed{{{gold}}}", [LatexExtractionConfig()]))
            else:
                key = ("searched", gold, settings.extract, settings.box_priority)
                golds = once(key, lambda: parse(gold, searched))
            equal = bool(found and golds) and bool(
                verify(
                    golds,
                    found,
                    float_rounding=settings.precision,
                    strict=settings.strict,
                    allow_set_relation_comp=settings.set_relations,
                )
            )
        except TimeoutException:
            return Extraction(answer, True)
        except Exception:  # as verl's scorer: any other failure is a wrong answer
            return Extraction(answer, False)
        return Extraction(answer, detector.seen and not equal, equal)

    return compare, reading


def _send(out: IO[bytes], message: dict[str, Any]) -> None:
    out.write(json.dumps(message).encode() + b"\n")
    out.flush()


def main() -> None:
    """Serve comparisons and extractions from stdin until it closes, in the main thread
    (math-verify's timeouts use signal.alarm)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _die_with_parent(int(os.environ.get(PARENT_ENV) or os.getppid()))
    replies = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # a stray print cannot forge a reply
    compare, reading = _math_verify()
    if compare("1", "1") != Comparison(True, False):
        sys.exit("math-verify failed its warm-up: it says 1 is not 1")
    _send(replies, {"ready": True})
    for line in sys.stdin.buffer:
        request = json.loads(line)
        if "text" in request:
            settings = MathVerifySettings.from_json(request.get("settings"))
            _send(replies, reading(request["text"], request.get("gold"), settings)._asdict())
        else:
            _send(replies, compare(request["answer"], request["gold"])._asdict())


if __name__ == "__main__":
    main()
