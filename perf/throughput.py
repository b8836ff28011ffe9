"""How well a run keeps a server busy: `api.run` debates against local OpenAI-compatible
stubs whose every request takes a fixed time, as a model's generation would.

    .venv/bin/python perf/throughput.py --questions 200 --delay 0.05 --concurrency 64
    .venv/bin/python perf/throughput.py --replicas 3 --concurrency 32
    .venv/bin/python perf/throughput.py --cache /tmp/answers.db   # two runs: the second all hits

Prints requests per second, the most and the mean requests in flight (a harness that
keeps the servers busy holds the mean near replicas x the concurrency limit), the request
latency the client saw, and the CPU time the harness spent per request. Each stub runs in
its own process so its work does not count against the harness. The figures cover the
debate alone (from the first request to the last turn recorded, records written and
graded), timed by a Listener: not the plan, the servers' check or the closing report.
The request cache's key holds the endpoint, whose port is new with each stub, so `--cache`
makes both runs against the same stubs, in one process.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from runs import questions_file
from stub import Stub

from mad_eval import api


class Timing(api.Listener):
    """Times the debate (the span its progress is tracked) and shows the cache's count."""

    @contextmanager
    def tracking(self, counts: list[tuple[str, int, str]]) -> Iterator[list]:
        start, cpu = time.perf_counter(), time.process_time()
        with super().tracking(counts) as advances:
            yield advances
        self.wall, self.cpu = time.perf_counter() - start, time.process_time() - cpu

    def say(self, text: str) -> None:
        if text.startswith("Request cache"):
            print(text)

    def warn(self, label: str, text: str) -> None:
        pass  # the stub reports no context length and has no tokenizer


def debate(urls: list[str], benchmark: Path, out: Path, args: argparse.Namespace) -> None:
    """One run to its end; prints what it measured of the debate."""
    timing = Timing()
    api.run(model="openai:stub-model", base_url=urls, benchmark=str(benchmark),
            agents=args.agents, rounds=args.rounds, max_tokens=64, out=out,
            concurrency=args.concurrency, cache=args.cache, listener=timing)  # fmt: skip
    turns = [json.loads(line) for line in (out / "turns.jsonl").open()]
    elapsed, limit = timing.wall, args.concurrency * args.replicas
    failed = sum(turn["error"] is not None for turn in turns)
    latency = sum(turn["latency"] for turn in turns)
    print(f"turns: {len(turns)} ({failed} failed) in {elapsed:.2f} s")
    print(
        f"throughput: {len(turns) / elapsed:.0f} requests/s "
        f"({limit / args.delay:.0f} if a request took only the sleep)"
    )
    print(f"harness CPU: {1000 * timing.cpu / len(turns):.2f} ms per request")
    print(f"mean requests in flight: {latency / elapsed:.1f} (throughput x latency; limit {limit})")
    print(
        f"mean request latency: {1000 * latency / len(turns):.0f} ms "
        f"(the server sleeps {1000 * args.delay:.0f} ms per request)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--questions", type=int, default=200)
    parser.add_argument("--agents", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--delay", type=float, default=0.05, help="seconds per request")
    parser.add_argument("--concurrency", type=int, default=64, help="per replica")
    parser.add_argument("--replicas", type=int, default=1, help="stub servers, one process each")
    parser.add_argument("--cache", help="a new request cache file: two runs, the second all hits")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="bench-throughput-"))
    benchmark = questions_file(work, args.questions)
    with ExitStack() as stack:
        stubs = [stack.enter_context(Stub(args.delay)) for _ in range(args.replicas)]
        for run in range(2 if args.cache else 1):
            debate([stub.url for stub in stubs], benchmark, work / f"run{run}", args)
    shutil.rmtree(work)
    peaks = [stub.peak_in_flight for stub in stubs]
    print(f"peak requests in flight per server: {peaks} (limit {args.concurrency} each)")


if __name__ == "__main__":
    main()
