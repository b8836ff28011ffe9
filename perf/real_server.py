"""Is mad-eval the bottleneck against a real server? The same chat requests (the first round of
a debate: the same prompts, seeds, max_tokens and concurrency) sent to a real vLLM server by
`mad_eval.run` and by the minimal client (perf/instant.py's replay: `openai.AsyncOpenAI` and one
semaphore), alternating, each timed over the span of its requests; the figure is the server's
generated tokens per second under each, and their ratio.

    # the server started here (vLLM's CPU build, in its venv), on tests/real_model.py's model:
    .venv-vllm/bin/python perf/real_server.py --start CKPT
    # or one already running:
    .venv/bin/python perf/real_server.py --base-url URL --name NAME --tokenizer CKPT

The requests are those mad-eval sends: recorded once from a run against perf/instant.py's
server, then replayed verbatim (with the real model's name). Seeded, so both sides make the
same tokens: the script prints both counts, and they must agree.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parent.parent / "tests"))  # vllm_server

from instant import instant_server, replay
from throughput import Timing
from vllm_server import openai_server, vllm_environment

from mad_eval import api

# What serve: gives vLLM's CPU build (mad_eval.serving.installation.cpu_defaults), and no
# compilation at start-up (minutes here; the figure is a ratio of two clients of one server).
SERVER_ARGS = (
    "--max-model-len", "2048", "--dtype", "float32", "--no-enable-chunked-prefill",
    "--enforce-eager",
)  # fmt: skip


def settings(args: argparse.Namespace) -> dict:
    return {
        "benchmark": args.benchmark, "agents": args.agents, "rounds": 0, "limit": args.questions,
        "max_tokens": args.max_tokens, "concurrency": args.concurrency, "temperature": 1.0,
    }  # fmt: skip


def recorded(args: argparse.Namespace, work: Path) -> list[dict]:
    """The requests mad-eval's run sends, as perf/instant.py's server received them."""
    bodies = work / "bodies.jsonl"
    with instant_server(record=bodies) as url:
        api.run(model="openai:instant", base_url=[url], out=work / "recording",
                tokenizer=args.tokenizer, **settings(args))  # fmt: skip
    return [json.loads(line) for line in bodies.open()]


def through_mad_eval(url: str, args: argparse.Namespace, out: Path) -> tuple[float, int]:
    """(seconds from its first request to its last turn recorded, tokens generated)."""
    timing = Timing()
    with warnings.catch_warnings():  # a small model's cut-off replies: not what is measured
        warnings.simplefilter("ignore")
        api.run(model=f"openai:{args.name}", base_url=[url], out=out, tokenizer=args.tokenizer,
                listener=timing, **settings(args))  # fmt: skip
    turns = [json.loads(line) for line in (out / "turns.jsonl").open()]
    failed = [t for t in turns if t["error"] is not None]
    if failed:
        raise SystemExit(f"{len(failed)} turns failed under mad-eval: {failed[0]['error']}")
    return timing.wall, sum(t["completion_tokens"] for t in turns)


def through_client(url: str, bodies: list[dict], args: argparse.Namespace) -> tuple[float, int]:
    """(seconds from the first request to the last reply, tokens generated)."""
    start = time.perf_counter()
    tokens = asyncio.run(replay(bodies, url, args.concurrency, None))
    return time.perf_counter() - start, tokens


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--start", type=Path, help="a checkpoint to serve with vLLM here")
    where.add_argument("--base-url", help="a running server's /v1 URL")
    parser.add_argument("--name", default="smol", help="the served model's name")
    parser.add_argument("--tokenizer", help="its tokenizer (default: the --start checkpoint)")
    parser.add_argument("--benchmark", default="arith:terms=2,digits=1")
    parser.add_argument("--questions", type=int, default=20)
    parser.add_argument("--agents", type=int, default=5)
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--repeat", type=int, default=3, help="pairs, alternating")
    args = parser.parse_args()
    args.tokenizer = args.tokenizer or (str(args.start) if args.start else None)

    work = Path(tempfile.mkdtemp(prefix="bench-real-server-"))
    bodies = recorded(args, work)
    print(f"{len(bodies)} requests, max_tokens {args.max_tokens}, concurrency {args.concurrency}")
    with contextlib.ExitStack() as stack:
        url = args.base_url or stack.enter_context(
            openai_server(args.start, [args.name], work / "server.log",
                          vllm_environment(work / "vllm-cache"), *SERVER_ARGS)
        )  # fmt: skip
        asyncio.run(replay([{**bodies[0], "model": args.name}], url, 1, None))  # warm-up
        sent = [{**body, "model": args.name} for body in bodies]
        rates: dict[str, list[float]] = {"mad-eval": [], "client": []}
        for i in range(args.repeat):
            for side in ("mad-eval", "client") if i % 2 == 0 else ("client", "mad-eval"):
                if side == "mad-eval":
                    wall, tokens = through_mad_eval(url, args, work / f"run{i}")
                else:
                    wall, tokens = through_client(url, sent, args)
                rates[side].append(tokens / wall)
                print(f"pair {i + 1}, {side}: {tokens} tokens in {wall:.1f} s, "
                      f"{tokens / wall:.1f} tokens/s")  # fmt: skip
    ours, theirs = statistics.median(rates["mad-eval"]), statistics.median(rates["client"])
    print(f"median generated tokens/s: mad-eval {ours:.1f}, minimal client {theirs:.1f}; "
          f"ratio {ours / theirs:.3f} (target >= 0.95)")  # fmt: skip
    print(f"records: {work}")


if __name__ == "__main__":
    main()
