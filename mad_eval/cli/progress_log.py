"""Progress for a log file: off a terminal rich shows no live bar, so long work writes a
plain line now and then instead (each tenth of the work, at least once a minute)."""

from __future__ import annotations

import time
from collections.abc import Callable

# A line at least this often while work advances, however slowly.
EVERY_S = 60.0
# And one each time the first count passes another 1/STEPS of its total.
STEPS = 10


class ProgressLog:
    """Counts (description, total, unit) advanced by index; `write` gets each line and
    `clock` tells the time (a test gives a fake one)."""

    def __init__(
        self,
        counts: list[tuple[str, int, str]],
        write: Callable[[str], None],
        clock: Callable[[], float] = time.monotonic,
        every_s: float = EVERY_S,
    ) -> None:
        self.counts, self.write, self.clock, self.every_s = counts, write, clock, every_s
        self.done = [0] * len(counts)
        self.shown = list(self.done)  # the counts the last line showed
        self.start = self.last = clock()
        self.step = 0  # tenths of the first count shown

    def advance(self, index: int, done: int) -> None:
        self.done[index] += done
        now = self.clock()
        if self._step() > self.step or now - self.last >= self.every_s:
            self._line(now)

    def close(self) -> None:
        """The last line, where the counts moved since the one before (a stop included)."""
        if self.done != self.shown:
            self._line(self.clock())

    def _step(self) -> int:
        total = self.counts[0][1]
        return STEPS * self.done[0] // total if total > 0 else STEPS

    def _line(self, now: float) -> None:
        self.step, self.last, self.shown = self._step(), now, list(self.done)
        self.write(self.text(now))

    def text(self, now: float) -> str:
        """E.g. 'debating 4,080/40,800 turns (10%), runs 1/15 (6%); 0:00:12, 340 turns/s'."""
        parts = []
        for (what, total, unit), done in zip(self.counts, self.done, strict=True):
            share = f" ({100 * done // total}%)" if total > 0 else ""
            named = "" if unit == what else f" {unit}"
            parts.append(f"{what} {done:,}/{total:,}{named}{share}")
        seconds = max(now - self.start, 0.0)
        minutes, secs = divmod(int(seconds), 60)
        hours, minutes = divmod(minutes, 60)
        rate = f", {self.done[0] / seconds:,.0f} {self.counts[0][2]}/s" if seconds >= 1 else ""
        return f"{', '.join(parts)}; {hours}:{minutes:02}:{secs:02}{rate}"
