"""What long work tells its caller as it goes: lines to show, warnings, and counts of done
work. The library's own Listener logs and counts quietly (a training loop or a notebook
calling mad_eval.run wants no progress bars); the command line shows them with rich."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
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

    @contextmanager
    def tracking(self, counts: list[tuple[str, int, str]]) -> Iterator[list[Advance]]:
        """One counter per (description, total, unit); yields the functions that advance
        each by a number done."""
        yield [_ignore for _ in counts]


def _ignore(done: int) -> None:
    pass
