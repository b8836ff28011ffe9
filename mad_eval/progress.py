"""What long work tells its caller as it goes: lines to show, warnings, counts of done work
and requests asked again. The library's own Listener logs and counts quietly (a training loop
or a notebook calling mad_eval.run wants no progress bars); the command line shows them with
rich. Also how a progress line words its pace and its requests asked again."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager

from mad_eval.sanitize import redact

log = logging.getLogger("mad_eval.progress")
# Quiet unless the program configures logging: without a handler of its own, Python would
# print its warnings (a tokenizer not found, say) to stderr through logging.lastResort.
log.addHandler(logging.NullHandler())

Advance = Callable[[int], None]


class Listener:
    def say(self, text: str) -> None:
        log.info(redact(text))

    def warn(self, label: str, text: str) -> None:
        log.warning("%s: %s", label, redact(text))

    def retried(self, why: str) -> None:
        """A request failed in a way that may pass and is asked again; `why` says how, in words
        that follow a count ("timed out", "rate limited": backends.base.TransientError)."""
        log.debug("a request %s and is asked again", why)

    @contextmanager
    def tracking(self, counts: list[tuple[str, int, str]]) -> Iterator[list[Advance]]:
        """One counter per (description, total, unit); yields the functions that advance
        each by a number done."""
        yield [_ignore for _ in counts]


def _ignore(done: int) -> None:
    pass


def pace(per_second: float | None, unit: str) -> str:
    """A rate as a progress line shows it: '340 turns/s', '2.4 turns/s', and below one a
    second the time each takes ('2.5 s/turn', '125 s/turn'); '' while nothing is done."""
    if per_second is None or per_second <= 0:
        return ""
    if per_second >= 10:
        return f"{per_second:,.0f} {unit}/s"
    if per_second >= 1:
        return f"{per_second:.1f} {unit}/s"
    each = 1 / per_second
    one = unit.removesuffix("s") or unit
    return f"{each:,.0f} s/{one}" if each >= 10 else f"{each:.1f} s/{one}"


def asked_again(counts: Mapping[str, int]) -> str:
    """Requests asked again so far, by how they failed: '3 timed out, 1 rate limited, asked
    again'; '' when none was."""
    # A copy made in one step: the progress thread reads while the event loop counts.
    said = [f"{n:,} {why}" for why, n in list(counts.items()) if n]
    return f"{', '.join(said)}, asked again" if said else ""
