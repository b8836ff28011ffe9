"""How fast mad-eval takes graded answers: a debate on MATH500 (5 agents, 1 round: 5,000
turns) against a local server that answers at once with MATH500's own solution texts, 70%
of them the asked question's and 30% another question's (a wrong answer that math-verify
must compare with the gold). Timed as a whole process (start, the run, its report); prints
turns per second.

    .venv/bin/python perf/grading.py --data-dir ../shared/data
    .venv/bin/python perf/grading.py --data-dir ../shared/data --baseline /tmp/base

Each tree runs four commands:
- request path alone: a server that answers every question with its gold answer boxed,
  which grading settles by equal text without math-verify (grading costs next to nothing);
- first run: the solution texts;
- first run with --cache: the same with an empty request cache (and verdict cache);
- cached re-run: that command again into a new folder: every answer comes from the request
  cache, and every verdict from the verdict cache where the tree keeps one.
`MAD_EVAL_GRADERS` sets the number of math-verify workers.
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
    import orjson
    from aiohttp import web

    starts: dict[str, int] = {}
    for i, row in enumerate(rows):
        starts.setdefault(row["problem"][:80], i)
    lengths = sorted({len(start) for start in starts}, reverse=True)

    def reply(prompt: str, seed: int) -> str:
        # The question opens the first message, after a debate prompt's "Problem:" line: a
        # few lookups, so the server's CPU stays small beside the client's.
        text = prompt.removeprefix("Problem:\n")
        found = (starts.get(text[:length]) for length in lengths)
        index = next((i for i in found if i is not None), 0)
        if mode == "gold":
            return f"The answer is $\\boxed{{{rows[index]['answer']}}}$."
        draw = int.from_bytes(hashlib.blake2b(str(seed).encode(), digest_size=4).digest(), "big")
        if draw % 1000 < WRONG * 1000:
            index = (index + 1 + draw % 7) % len(rows)  # another question's solution
        return rows[index]["solution"]

    async def models(_: web.Request) -> web.Response:
        return web.json_response({"data": [{"id": "solver", "object": "model"}]})

    async def chat(request: web.Request) -> web.Response:
        body = orjson.loads(await request.read())  # the server's CPU is kept small
        text = reply(body["messages"][0]["content"], body.get("seed", 0))
        answer = {
            "id": "c", "object": "chat.completion", "model": body["model"],
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": text}}],
            "usage": {"prompt_tokens": 100, "completion_tokens": 200, "total_tokens": 300},
        }  # fmt: skip
        return web.Response(body=orjson.dumps(answer), content_type="application/json")

    app = web.Application(client_max_size=64 * 2**20)
    app.router.add_get("/v1/models", models)
    app.router.add_post("/v1/chat/completions", chat)
    web.run_app(app, host="127.0.0.1", port=port, print=None, access_log=None)


# (server mode, what the row says, the request cache it runs with: none, or a name two rows
# share, the second re-running the first into a new folder)
RUNS = (
    ("gold", "request path alone (gold boxed)", None),
    ("solutions", "first run (solution texts, 30% wrong)", None),
    ("solutions", "first run with --cache", "solutions"),
    ("solutions", "cached re-run", "solutions"),
)


def command(url: str, data: Path, limit: int, cache: Path | None, out: Path) -> list[str]:
    cached = ["--cache", str(cache)] if cache else []
    return mad_eval("run", "--model", "openai:solver", "--base-url", url, "--benchmark",
                    "math500", "--data-dir", str(data), "--limit", str(limit), "--agents", "5",
                    "--rounds", "1", "--max-tokens", "1024", *cached,
                    "--out", str(out))  # fmt: skip


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
    print(f"| command ({turns:,} turns; graders: {graders}) | tree | wall | CPU | turns/s |")
    print("| --- | --- | --- | --- | --- |")
    work = Path(tempfile.mkdtemp(prefix="bench-grading-"))
    rates: dict[tuple[int, str], float] = {}
    for mode in ("gold", "solutions"):
        with serving(serve, rows, mode) as url:
            for name, tree in trees.items():
                for row, (run_mode, label, cache) in enumerate(RUNS):
                    if run_mode != mode:
                        continue
                    tag = f"{name.replace(' ', '-')}-{row}"
                    kept = work / f"{name.replace(' ', '-')}-{cache}.sqlite" if cache else None
                    wall, cpu, _ = timed(command(url, data, len(rows), kept, work / tag), tree)
                    rates[(row, name)] = turns / wall
                    print(f"| {label} | {name} | {wall:.2f} s | {cpu:.2f} s | "
                          f"{turns / wall:,.0f} |", flush=True)  # fmt: skip
    for name in trees:
        alone, first, _, again = (rates[(row, name)] for row in range(len(RUNS)))
        print(
            f"{name}: first run {first:,.0f} turns/s, {first / alone:.2f} of the request path "
            f"alone ({alone:,.0f}); cached re-run {again:,.0f} turns/s"
        )


if __name__ == "__main__":
    main()
