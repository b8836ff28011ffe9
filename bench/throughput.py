"""How well the engine keeps a server busy: debates against a local OpenAI-compatible stub
whose every request takes a fixed time, as a model's generation would.

    .venv/bin/python bench/throughput.py --questions 200 --delay 0.05 --concurrency 64

Prints requests per second, the most and the mean requests in flight (a harness that
keeps the server busy holds the mean near the concurrency limit), the request latency the
client saw, and the CPU time the harness spent per request. The stub
runs in its own process so its work does not count against the harness.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from stub_server import StubServer

from mad_eval.backends import Guarded, make_backend
from mad_eval.config import RunConfig
from mad_eval.engine import Engine, shared_seats
from mad_eval.protocols import resolve
from mad_eval.records import Question


def serve(delay: float, urls: multiprocessing.Queue, stop: multiprocessing.Event) -> None:
    with StubServer(delay=delay) as server:
        urls.put(server.base_url)
        stop.wait()
        urls.put(server.peak_in_flight)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--questions", type=int, default=200)
    parser.add_argument("--agents", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--delay", type=float, default=0.05, help="seconds per request")
    parser.add_argument("--concurrency", type=int, default=64)
    args = parser.parse_args()

    questions = [
        Question(f"q{i}", f"What is {i} + {i}?", str(2 * i)) for i in range(args.questions)
    ]
    config = RunConfig(agents=args.agents, rounds=args.rounds, max_tokens=64, model="openai:stub")
    turns = []
    urls: multiprocessing.Queue = multiprocessing.Queue()
    stop = multiprocessing.Event()
    server = multiprocessing.Process(target=serve, args=(args.delay, urls, stop))
    server.start()
    base_url = urls.get(timeout=30)
    backend = Guarded.single(make_backend("openai:stub-model", base_url), args.concurrency)
    protocol = resolve("decentralized").protocol
    engine = Engine(config, protocol, shared_seats(config, backend), {}, turns.append)

    async def go() -> None:
        try:
            await engine.run(questions)
        finally:
            await backend.aclose()

    start, cpu = time.perf_counter(), time.process_time()
    asyncio.run(go())
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    stop.set()
    peak = urls.get(timeout=30)
    server.join()

    failed = sum(t.failed for t in turns)
    ideal = args.concurrency / args.delay
    print(f"turns: {len(turns)} ({failed} failed) in {elapsed:.2f} s")
    print(
        f"throughput: {len(turns) / elapsed:.0f} requests/s "
        f"({ideal:.0f} if a request took only the sleep)"
    )
    print(f"peak requests in flight at the server: {peak} (limit {args.concurrency})")
    print(f"harness CPU: {1000 * cpu / len(turns):.2f} ms per request")
    mean_latency = sum(t.latency for t in turns) / len(turns)
    busy = sum(t.latency for t in turns) / elapsed
    print(f"mean requests in flight: {busy:.1f} (throughput x latency; limit {args.concurrency})")
    print(
        f"mean request latency: {1000 * mean_latency:.0f} ms "
        f"(the server sleeps {1000 * args.delay:.0f} ms per request)"
    )


if __name__ == "__main__":
    main()
