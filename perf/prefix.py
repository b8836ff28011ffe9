"""Does routing a question's requests to one replica pay? Debates against three local stub
servers (each in its own process) that model vLLM's prefix cache: each counts the prompt
characters that extend a prefix it has already seen, and spends a prefill time on each
character it has not. The same run is routed by question (mad-eval's default) and by least
busy replica alone.

    .venv/bin/python perf/prefix.py
    .venv/bin/python perf/prefix.py --questions 120 --replicas 3 --prefill-us 20

Prints, per routing, the share of prompt characters a prefix cache could reuse (over all
replicas), the makespan and requests per second, and a summary with the ratios.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from stub_server import StubServer

from mad_eval.backends import Guarded, Replica, RetryPolicy, Where, make_backend
from mad_eval.debate.engine import Engine, shared_seats
from mad_eval.protocols import resolve
from mad_eval.records import Question
from mad_eval.settings.config import RunConfig

# Replies of a few hundred characters, as a model's reasoning would be, so later rounds'
# prompts (which quote every peer) are long and mostly shared.
FILLER = "Let me work through this carefully, checking each step against the last. " * 4


def reply(body: dict) -> str:
    return f"{FILLER}So the answer is \\boxed{{{body['seed'] % 5}}}."


def serve(prefill: float, delay: float, urls: multiprocessing.Queue, stop: Any) -> None:
    with StubServer(reply=reply, delay=delay, prefill_per_char=prefill) as server:
        urls.put(server.base_url)
        stop.wait()
        urls.put((server.prompt_chars, server.reused_chars))


def run(questions: list[Question], args: argparse.Namespace, margin: int | None) -> dict:
    """One run on fresh servers; its makespan and the servers' prefix counts."""
    servers = []
    for _ in range(args.replicas):
        urls: multiprocessing.Queue = multiprocessing.Queue()
        stop = multiprocessing.Event()
        process = multiprocessing.Process(
            target=serve, args=(args.prefill_us / 1e6, args.delay, urls, stop)
        )
        process.start()
        servers.append((process, urls, stop, urls.get(timeout=30)))
    config = RunConfig(
        agents=args.agents, rounds=args.rounds, max_tokens=256, model="openai:stub-model"
    )
    turns: list = []

    async def go() -> None:
        replicas = [
            Replica(
                make_backend("openai:stub-model", Where(base_url=url)),
                asyncio.Semaphore(args.concurrency),
                url,
            )
            for *_, url in servers
        ]
        backend = Guarded(replicas, 600.0, RetryPolicy(), margin)
        protocol = resolve("decentralized").protocol
        engine = Engine(config, protocol, shared_seats(config, backend), {}, turns.append)
        try:
            await engine.run(questions)
        finally:
            await backend.aclose()

    start = time.perf_counter()
    asyncio.run(go())
    elapsed = time.perf_counter() - start
    prompt = reused = 0
    for process, urls, stop, _ in servers:
        stop.set()
        chars, seen = urls.get(timeout=30)
        prompt, reused = prompt + chars, reused + seen
        process.join()
    return {"seconds": elapsed, "turns": len(turns), "share": reused / prompt}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--questions", type=int, default=60)
    parser.add_argument("--agents", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--replicas", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=16, help="per replica")
    parser.add_argument("--delay", type=float, default=0.02, help="seconds per request")
    parser.add_argument("--prefill-us", type=float, default=20.0, help="per new character")
    args = parser.parse_args()
    # Questions of a few hundred characters, each its own.
    questions = [
        Question(f"q{i}", f"Problem {i}. " + "Consider the sequence defined below. " * 8
                 + f"What is {i} + {i}?", str(2 * i))
        for i in range(args.questions)
    ]  # fmt: skip
    margin = max(1, args.concurrency // 4)  # what plan.py gives Guarded
    results = {
        "least busy": run(questions, args, None),
        "by question": run(questions, args, margin),
    }
    print("| routing | prompt characters reused | makespan | requests/s |")
    print("| --- | --- | --- | --- |")
    for name, r in results.items():
        rate = r["turns"] / r["seconds"]
        print(f"| {name} | {100 * r['share']:.1f}% | {r['seconds']:.2f} s | {rate:.0f} |")
    busy, home = results["least busy"], results["by question"]
    print(
        f"by question vs least busy, {args.replicas} replicas: reused "
        f"{100 * home['share']:.1f}% vs {100 * busy['share']:.1f}%, makespan "
        f"{home['seconds'] / busy['seconds']:.2f}x"
    )


if __name__ == "__main__":
    main()
