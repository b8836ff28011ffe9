"""How long building one debate prompt takes, per template: the engine builds one per agent
per round in a worker thread, so this is harness CPU on every turn.

    .venv/bin/python perf/prompts.py [--agents 5] [--calls 4000]
"""

from __future__ import annotations

import argparse
import time

from mad_eval.debate.context import EstimateCounter, Fitter
from mad_eval.debate.prompts import Said, Speaker, build_prompt
from mad_eval.records import Question
from mad_eval.settings.templates import builtin_templates, load_template


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=5)
    parser.add_argument("--calls", type=int, default=4000)
    args = parser.parse_args()
    question = Question("q", "What is 12 + 30?", "42")
    texts = [f"Working through the problem, I get \\boxed{{{i}}}" for i in range(args.agents)]
    # Two rounds of history, so a conversation template renders its whole conversation.
    history = [{j: Said(text, list(range(args.agents))) for j, text in enumerate(texts)}] * 2
    sees, fitter = list(range(args.agents)), Fitter(EstimateCounter())
    print(f"round-2 prompt of one of {args.agents} agents, {args.calls} calls each:")
    for name in builtin_templates():
        template = load_template(name)
        start = time.perf_counter()
        for i in range(args.calls):
            speaker = Speaker(template, i % args.agents, args.agents)
            build_prompt(speaker, question, history, sees, fitter, None)
        per_call = (time.perf_counter() - start) / args.calls * 1e6
        print(f"  {name:<13} {per_call:6.0f} µs")


if __name__ == "__main__":
    main()
