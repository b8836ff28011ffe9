"""tests/stub_server.py's server in a process of its own, for the bench scripts."""

from __future__ import annotations

import multiprocessing
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))


def _serve(delay: float, queue: Any, stop: Any) -> None:
    from stub_server import StubServer

    server = StubServer(delay=delay)
    with server:
        queue.put(server.base_url)
        stop.wait()
        queue.put(server.peak_in_flight)


class Stub:
    """The stub, every request taking `delay` seconds, in a process of its own (so its
    threads take no time from the harness) for the length of a `with` block: its base URL
    while it runs, its peak of requests in flight after."""

    def __init__(self, delay: float):
        self.delay, self.url, self.peak_in_flight = delay, "", 0

    def __enter__(self) -> Stub:
        self._queue: Any = multiprocessing.Queue()
        self._stop = multiprocessing.Event()
        self._process = multiprocessing.Process(
            target=_serve, args=(self.delay, self._queue, self._stop), daemon=True
        )
        self._process.start()
        self.url = self._queue.get(timeout=30)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self.peak_in_flight = self._queue.get(timeout=30)
        self._process.join()
