"""Progress for a log file: off a terminal rich shows no live bar, so long work writes a
plain line instead: one at once, then each tenth of the work, and at least once a minute
whether or not a unit of work has finished (a slow server's first turns take minutes)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from mad_eval.progress import pace

# A line at least this often, however slowly the work advances.
EVERY_S = 60.0
# And one each time the first count passes another 1/STEPS of its total.
STEPS = 10


class ProgressLog:
    """Counts (description, total, unit) advanced by index; `write` gets each line, `clock`
    tells the time (a test gives a fake one) and `notes` what else the line says (requests
    asked again). `advance` and `tick` may come from different threads."""

    def __init__(
        self,
        counts: list[tuple[str, int, str]],
        write: Callable[[str], None],
        clock: Callable[[], float] = time.monotonic,
        every_s: float = EVERY_S,
        notes: Callable[[], str] = lambda: "",
    ) -> None:
        self.counts, self.write, self.clock, self.every_s = counts, write, clock, every_s
        self.notes = notes
        self.done = [0] * len(counts)
        self.shown: list[int] | None = None  # the counts the last line showed (None: no line)
        self.start = self.last = clock()
        self.step = 0  # tenths of the first count shown
        self.lock = threading.Lock()

    def begin(self) -> None:
        """The first line, before any work is done: the log shows the work has started."""
        with self.lock:
            self._line(self.clock())

    def advance(self, index: int, done: int) -> None:
        with self.lock:
            self.done[index] += done
            now = self.clock()
            if self._step() > self.step or now - self.last >= self.every_s:
                self._line(now)

    def tick(self) -> None:
        """A line if none was written for `every_s`, whether or not work finished since."""
        with self.lock:
            now = self.clock()
            if now - self.last >= self.every_s:
                self._line(now)

    def close(self) -> None:
        """The last line, where the counts moved since the one before (a stop included)."""
        with self.lock:
            if self.done != self.shown:
                self._line(self.clock())

    def _step(self) -> int:
        total = self.counts[0][1]
        return STEPS * self.done[0] // total if total > 0 else STEPS

    def _line(self, now: float) -> None:
        self.step, self.last, self.shown = self._step(), now, list(self.done)
        self.write(self.text(now))

    def text(self, now: float) -> str:
        """E.g. 'debating 4,080/40,800 turns (10%), runs 1/15 (6%); 0:00:12, 340 turns/s'
        (below a turn a second: '2.5 s/turn'), then what `notes` adds."""
        parts = []
        for (what, total, unit), done in zip(self.counts, self.done, strict=True):
            share = f" ({100 * done // total}%)" if total > 0 else ""
            named = "" if unit == what else f" {unit}"
            parts.append(f"{what} {done:,}/{total:,}{named}{share}")
        seconds = max(now - self.start, 0.0)
        minutes, secs = divmod(int(seconds), 60)
        hours, minutes = divmod(minutes, 60)
        rate = pace(self.done[0] / seconds, self.counts[0][2]) if seconds >= 1 else ""
        notes = self.notes()
        return (
            f"{', '.join(parts)}; {hours}:{minutes:02}:{secs:02}"
            + (f", {rate}" if rate else "")
            + (f"; {notes}" if notes else "")
        )


@contextmanager
def ticking(tick: Callable[[], None], every_s: float) -> Iterator[None]:
    """Call `tick` every `every_s` seconds from a thread of its own while inside: the event
    loop may be busy or the work may not advance for minutes."""
    stop = threading.Event()

    def loop() -> None:
        while not stop.wait(every_s):
            tick()

    thread = threading.Thread(target=loop, name="mad-eval progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
