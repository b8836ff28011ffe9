"""How well the engine keeps a server busy: debates against a local OpenAI-compatible stub
whose every request takes a fixed time, as a model's generation would.

    .venv/bin/python bench/throughput.py --questions 200 --delay 0.05 --concurrency 64
    .venv/bin/python bench/throughput.py --replicas 3 --concurrency 32
    .venv/bin/python bench/throughput.py --cache /tmp/answers.db   # twice: the second is all hits

Prints requests per second, the most and the mean requests in flight (a harness that
keeps the servers busy holds the mean near replicas x the concurrency limit), the request
latency the client saw, and the CPU time the harness spent per request. Each stub runs in
its own process so its work does not count against the harness.
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

from mad_eval.backends import Guarded, Replica, RetryPolicy, Where, make_backend
from mad_eval.backends.cache import Cached, RequestCache
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
    parser.add_argument("--concurrency", type=int, default=64, help="per replica")
    parser.add_argument("--replicas", type=int, default=1, help="stub servers, one process each")
    parser.add_argument("--cache", help="a request cache file (run twice to measure hits)")
    args = parser.parse_args()

    questions = [
        Question(f"q{i}", f"What is {i} + {i}?", str(2 * i)) for i in range(args.questions)
    ]
    config = RunConfig(agents=args.agents, rounds=args.rounds, max_tokens=64, model="openai:stub")
    turns = []
    servers = []
    for _ in range(args.replicas):
        urls: multiprocessing.Queue = multiprocessing.Queue()
        stop = multiprocessing.Event()
        process = multiprocessing.Process(target=serve, args=(args.delay, urls, stop))
        process.start()
        servers.append((process, urls, stop, urls.get(timeout=30)))

    async def go() -> None:
        slots = args.concurrency
        replicas = [
            Replica(
                make_backend("openai:stub-model", Where(base_url=url)),
                asyncio.Semaphore(slots),
                url,
            )
            for *_, url in servers
        ]
        backend = Guarded(replicas, 600.0, RetryPolicy())
        cache = RequestCache(args.cache) if args.cache else None
        if cache:
            backend = Cached(backend, cache, {"model": "openai:stub-model"})
        protocol = resolve("decentralized").protocol
        engine = Engine(config, protocol, shared_seats(config, backend), {}, turns.append)
        try:
            await engine.run(questions)
        finally:
            await backend.aclose()
            if cache:
                print(f"cache: {cache.hits} hits, {cache.stored} stored")
                cache.close()

    start, cpu = time.perf_counter(), time.process_time()
    asyncio.run(go())
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    peaks = []
    for process, urls, stop, _ in servers:
        stop.set()
        peaks.append(urls.get(timeout=30))
        process.join()
    limit = args.concurrency * args.replicas

    failed = sum(t.failed for t in turns)
    ideal = limit / args.delay
    print(f"turns: {len(turns)} ({failed} failed) in {elapsed:.2f} s")
    print(
        f"throughput: {len(turns) / elapsed:.0f} requests/s "
        f"({ideal:.0f} if a request took only the sleep)"
    )
    print(f"peak requests in flight per server: {peaks} (limit {args.concurrency} each)")
    print(f"harness CPU: {1000 * cpu / len(turns):.2f} ms per request")
    mean_latency = sum(t.latency for t in turns) / len(turns)
    busy = sum(t.latency for t in turns) / elapsed
    print(f"mean requests in flight: {busy:.1f} (throughput x latency; limit {limit})")
    print(
        f"mean request latency: {1000 * mean_latency:.0f} ms "
        f"(the server sleeps {1000 * args.delay:.0f} ms per request)"
    )


if __name__ == "__main__":
    main()
