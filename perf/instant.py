"""An OpenAI-compatible server that answers at once (or after a seeded random delay), and
the minimal client mad-eval is measured against: `openai.AsyncOpenAI` and one semaphore,
sending the very requests a mad-eval run sent. perf/client.py and perf/latency.py use both.

    .venv/bin/python perf/instant.py serve --port 8011 --record /tmp/bodies.jsonl
    .venv/bin/python perf/instant.py replay /tmp/bodies.jsonl --base-url URL --concurrency 64

The server runs in a process of its own (aiohttp), so its CPU never counts against the
client measured. The replay runs as a whole process too, so both sides pay their start.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import random
import re
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

MODEL = "instant"


def app(delay: tuple[float, float], record: Path | None):  # an aiohttp web.Application
    from aiohttp import web

    out = record.open("a") if record else None
    rng = random.Random(0)

    async def models(_: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": MODEL, "object": "model"}]})

    async def complete(request: web.Request) -> web.Response:
        body = await request.json()
        if out:
            out.write(json.dumps(body) + "\n")
        if delay[1] > 0:
            await asyncio.sleep(rng.uniform(*delay))
        text = f"Adding them up, the answer is \\boxed{{{body.get('seed', 0) % 97}}}."
        chat = request.path.endswith("/chat/completions")
        choice: dict = {"index": 0, "finish_reason": "stop"}
        if chat:
            choice["message"] = {"role": "assistant", "content": text}
        else:
            choice["text"] = text
        return web.json_response(
            {
                "id": "cmpl-1",
                "object": "chat.completion" if chat else "text_completion",
                "model": body.get("model", MODEL),
                "choices": [choice],
                "usage": {"prompt_tokens": 50, "completion_tokens": 12, "total_tokens": 62},
            }
        )

    server = web.Application(client_max_size=64 * 2**20)
    server.router.add_get("/v1/models", models)
    server.router.add_post("/v1/chat/completions", complete)
    server.router.add_post("/v1/completions", complete)
    return server


def serve(port: int, delay: tuple[float, float], record: Path | None) -> None:
    from aiohttp import web

    web.run_app(app(delay, record), host="127.0.0.1", port=port, print=None, access_log=None)


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def serving(target: Callable[..., None], *args: Any) -> Iterator[str]:
    """target(port, *args) serving in its own process for the length of the block; yields
    its base URL once /v1/models answers."""
    import urllib.request

    port = free_port()
    process = multiprocessing.get_context("spawn").Process(
        target=target, args=(port, *args), daemon=True
    )
    process.start()
    url = f"http://127.0.0.1:{port}/v1"
    for _ in range(200):
        try:
            urllib.request.urlopen(f"{url}/models", timeout=1).read()
            break
        except OSError:
            time.sleep(0.05)
    try:
        yield url
    finally:
        process.terminate()
        process.join()


def instant_server(
    delay: tuple[float, float] = (0.0, 0.0), record: Path | None = None
) -> AbstractContextManager[str]:
    """The instant server for the length of a block; yields its base URL."""
    return serving(serve, delay, record)


def debates(bodies: list[dict], agents: int) -> list[list[list[dict]]]:
    """Recorded requests as debates: grouped by the question number a prompt names
    ("Question 17:"), then into rounds of `agents` in the order they arrived."""
    by_question: dict[str, list[dict]] = defaultdict(list)
    for body in bodies:
        text = json.dumps(body.get("messages") or body.get("prompt"))
        found = re.search(r"Question (\d+):", text)
        by_question[found[1] if found else ""].append(body)
    return [
        [asked[i : i + agents] for i in range(0, len(asked), agents)]
        for asked in by_question.values()
    ]


async def replay(bodies: list[dict], url: str, concurrency: int, agents: int | None) -> int:
    """Send every body once through the SDK, at most `concurrency` at a time; with `agents`,
    a question's round starts only when its previous round has its answers. The tokens the
    server generated, as its usage counts them."""
    import openai

    client = openai.AsyncOpenAI(base_url=url, api_key="EMPTY", max_retries=0)
    slots = asyncio.Semaphore(concurrency)

    async def send(body: dict) -> int:
        async with slots:
            reply = await client.chat.completions.create(**body)
        return reply.usage.completion_tokens if reply.usage else 0

    async def debate(rounds: list[list[dict]]) -> int:
        return sum([sum(await asyncio.gather(*(send(body) for body in asked))) for asked in rounds])

    if agents is None:
        tokens = sum(await asyncio.gather(*(send(body) for body in bodies)))
    else:
        tokens = sum(await asyncio.gather(*(debate(rounds) for rounds in debates(bodies, agents))))
    await client.close()
    return tokens


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    served = commands.add_parser("serve", help="run the server in the foreground")
    served.add_argument("--port", type=int, default=8011)
    served.add_argument("--delay", type=float, nargs=2, default=(0.0, 0.0), metavar=("LOW", "HIGH"))
    served.add_argument("--record", type=Path)
    replayed = commands.add_parser("replay", help="send recorded requests as the minimal client")
    replayed.add_argument("bodies", type=Path)
    replayed.add_argument("--base-url", required=True)
    replayed.add_argument("--concurrency", type=int, default=64)
    replayed.add_argument("--agents", type=int, help="keep rounds dependent, N per round")
    args = parser.parse_args()
    if args.command == "serve":
        serve(args.port, tuple(args.delay), args.record)
        return
    bodies = [json.loads(line) for line in args.bodies.open()]
    asyncio.run(replay(bodies, args.base_url, args.concurrency, args.agents))


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(__file__))
    main()
