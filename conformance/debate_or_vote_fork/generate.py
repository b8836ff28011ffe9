"""Regenerate cases.jsonl and meta.json: a later fork of Debate-or-Vote's outputs on the inputs
of conformance/debate_or_vote (the same seeded replies and votes).

Run by hand, never by CI, after conformance/debate_or_vote/generate.py (whose prompt cases it
checks), with the same Python (numpy only):

    /tmp/dov-venv/bin/python conformance/debate_or_vote_fork/generate.py \\
        --repo PATH/TO/fork.git --commit 8efe8032377c2d9b2ab40a95ca973885b4c843a3

`--repo` is a git clone (bare or not) of github.com/dreaming-madao/debate-or-vote. Its commits
of 2026 rewrite the math reader (`evaluate_arithmetics`) and leave the prompt builders as the
paper's repository has them; the script checks the latter by building the paper suite's prompt
cases with the fork's code and comparing them with the stored ones, so only the reader and
vote sets are written here.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
PAPER = HERE.parent / "debate_or_vote"
sys.path.insert(0, str(PAPER))
import generate as paper  # noqa: E402  (conformance/debate_or_vote/generate.py)

REFERENCE = "github.com/dreaming-madao/debate-or-vote"


def main() -> None:
    args = paper.arguments(__doc__)
    cases, _ = paper.generate(args.repo, args.commit, args.readers, args.votes)
    with open(PAPER / "cases.jsonl", encoding="utf-8") as lines:
        stored = [case for line in lines if (case := json.loads(line))["set"] == "prompt"]
    prompts = [case for case in cases if case["set"] == "prompt"]
    if prompts != stored:
        sys.exit("the fork's prompts differ from the paper's stored ones: store them here too.")
    paper.write(
        HERE,
        [case for case in cases if case["set"] != "prompt"],
        args.commit,
        REFERENCE,
        prompts=f"the {len(stored)} prompt cases of conformance/debate_or_vote, identical",
    )


if __name__ == "__main__":
    main()
