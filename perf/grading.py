"""How fast mad-eval takes graded answers: a debate on MATH500 (5 agents, 1 round: 5,000
turns) against a local server that answers at once with MATH500's own solution texts, 70%
of them the asked question's and 30% another question's (a wrong answer that math-verify
must compare with the gold). Timed as a whole process; prints turns per second.

    .venv/bin/python perf/grading.py --data-dir ../shared/data
    .venv/bin/python perf/grading.py --data-dir ../shared/data --baseline /tmp/base

For comparison, the same run against a server that answers every question with its gold
answer boxed, which grading settles by equal text without math-verify: the rate when
grading costs next to nothing. `MAD_EVAL_GRADERS` sets the number of math-verify workers.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from instant import serving
from runs import HERE, checkouts, mad_eval, timed

WRONG = 0.3


def serve(port: int, rows: list[dict], mode: str) -> None:
    from aiohttp import web

    starts = [(row["problem"][:80], i) for i, row in enumerate(rows)]

    def reply(prompt: str, seed: int) -> str:
        found = [(prompt.find(start), i) for start, i in starts if start in prompt]
        index = min(found)[1] if found else 0
        if mode == "gold":
            return f"The answer is $\\boxed{{{rows[index]['answer']}}}$."
        draw = int.from_bytes(hashlib.blake2b(str(seed).encode(), digest_size=4).digest(), "big")
        if draw % 1000 < WRONG * 1000:
            index = (index + 1 + draw % 7) % len(rows)  # another question's solution
        return rows[index]["solution"]

    async def models(_: web.Request) -> web.Response:
        return web.json_response({"data": [{"id": "solver", "object": "model"}]})

    async def chat(request: web.Request) -> web.Response:
        body = await request.json()
        text = reply(body["messages"][-1]["content"], body.get("seed", 0))
        return web.json_response({
            "id": "c", "object": "chat.completion", "model": body["model"],
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": text}}],
            "usage": {"prompt_tokens": 100, "completion_tokens": 200, "total_tokens": 300},
        })  # fmt: skip

    app = web.Application(client_max_size=64 * 2**20)
    app.router.add_get("/v1/models", models)
    app.router.add_post("/v1/chat/completions", chat)
    web.run_app(app, host="127.0.0.1", port=port, print=None, access_log=None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, default=HERE.parent / "shared" / "data")
    parser.add_argument("--limit", type=int, default=500, help="MATH500 questions")
    parser.add_argument("--baseline", type=Path, help="another mad-eval checkout to time too")
    args = parser.parse_args()
    data = args.data_dir.resolve()
    rows = [json.loads(line) for line in (data / "math500.jsonl").open()][: args.limit]
    turns = len(rows) * 10
    trees = checkouts(args.baseline)
    graders = os.environ.get("MAD_EVAL_GRADERS", "one per core")
    print(f"| replies ({turns:,} turns; graders: {graders}) | tree | wall | turns/s |")
    print("| --- | --- | --- | --- |")
    work = Path(tempfile.mkdtemp(prefix="bench-grading-"))
    rates = {}
    for mode, label in (("solutions", "solution texts, 30% wrong"), ("gold", "gold boxed")):
        with serving(serve, rows, mode) as url:
            for name, tree in trees.items():
                out = work / f"{mode}-{name.replace(' ', '-')}"
                command = mad_eval("run", "--model", "openai:solver", "--base-url", url,
                                   "--benchmark", "math500", "--data-dir", str(data),
                                   "--limit", str(len(rows)), "--agents", "5", "--rounds", "1",
                                   "--max-tokens", "1024", "--out", str(out))  # fmt: skip
                wall, _, _ = timed(command, tree)
                rates[(mode, name)] = turns / wall
                print(f"| {label} | {name} | {wall:.1f} s | {turns / wall:,.0f} |", flush=True)
    summary = ", ".join(
        f"{name} {rates[('solutions', name)]:,.0f} ({rates[('gold', name)]:,.0f} gold boxed)"
        for name in trees
    )
    print(f"graded turns/s, MATH500 solution texts (30% wrong): {summary}")


if __name__ == "__main__":
    main()
