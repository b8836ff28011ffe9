"""Regenerate cases.jsonl and meta.json: MALLM's own decisions and reading order on seeded inputs.

Run by hand, never by CI, in a scratch environment with MALLM's import-time dependencies
(its model client is never created; torch and its evaluator are stubbed here, in this script
only):

    python3.11 -m venv /tmp/mallm-venv
    /tmp/mallm-venv/bin/pip install numpy scikit-learn httpx langchain-core openai requests \\
        rich json-repair
    /tmp/mallm-venv/bin/python conformance/mallm/generate.py \\
        --repo PATH/TO/mallm.git --commit d9e66bcc99cb6ebac9113061bcfa72d4efd18379

`--repo` is a git clone (bare or not) of github.com/Multi-Agent-LLMs/mallm; its `mallm/` at
`--commit` is extracted to a temporary folder and imported from there. Nothing of the
reference is copied into this repository: the script calls its code and records what it
returns, and no prompt text of it is stored (requests are recorded as which earlier messages
they hold, found by marks the fake model writes into its replies).

Three sets of cases, one JSON object a line:
- consensus: one turn's agreements (who proposed which solution, who agreed with an empty or
  a copied solution) -> what majority, supermajority and unanimity consensus decide
  (`make_decision`);
- vote: the panelists' solutions and each panelist's replies to the vote request, tried in
  order (the last repeated while MALLM asks again) -> the protocol's verdict on every reply
  (`process_votes`), how often each panelist was asked, and the decision
  (`vote_with_alterations`, which runs `process_votes` and `process_results`), for simple,
  approval, cumulative and ranked voting;
- paradigm: a discussion run by MALLM's Coordinator under memory, relay or report with a fake
  model -> for every agent turn, in order, the speaker and which earlier turns' replies its
  request holds, in order, as its own (assistant) or another's (user).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import itertools
import json
import logging
import random
import subprocess
import sys
import tarfile
import tempfile
import types
from io import BytesIO
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SEED = 45

# Answers of the ballots. DISTINCT are pairwise different answers; EQUIVALENT adds ones equal
# to or equivalent with them (MALLM compares solutions by position, never by value).
DISTINCT = ["12", "7", "-2", "\\frac{3}{4}", "x+1", "5", "100"]
EQUIVALENT = ["12", "0.75", "1+x", "12", "7"]


# ---- loading the reference ----------------------------------------------------------------


def load_reference(repo: Path, commit: str, into: Path) -> None:
    """Put MALLM's `mallm/` at `commit` on the path, with torch and its evaluator stubbed."""
    git_dir = repo / ".git" if (repo / ".git").is_dir() else repo
    archive = subprocess.run(
        ["git", f"--git-dir={git_dir}", "archive", commit, "mallm"],
        check=True,
        capture_output=True,
    ).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    torch = types.ModuleType("torch")
    torch.Tensor = object  # type: ignore[attr-defined]
    sys.modules["torch"] = torch
    evaluator = types.ModuleType("mallm.evaluation.evaluator")
    evaluator.Evaluator = type("Evaluator", (), {})  # type: ignore[attr-defined]
    sys.modules["mallm.evaluation.evaluator"] = evaluator
    sys.path.insert(0, str(into))
    logging.disable(logging.CRITICAL)


class Panelist:
    """What the decision protocols read of a panelist: ids, a persona and a model."""

    def __init__(self, index: int, replies: list[str] | None = None):
        self.id = self.short_id = f"p{index}"
        self.persona, self.persona_description = f"Panelist {index}", ""
        self.llm = Scripted(replies or [])


class Scripted:
    """A model that answers each vote request with the next scripted reply (the last one
    again once they run out) and counts the requests."""

    def __init__(self, replies: list[str]):
        self.replies, self.asked = replies, 0

    def invoke(self, messages: list[dict[str, str]], **kw: Any) -> str:
        reply = self.replies[min(self.asked, len(self.replies) - 1)]
        self.asked += 1
        return reply


# ---- consensus ------------------------------------------------------------------------------


def consensus_cases(rng: random.Random, count: int) -> list[dict[str, Any]]:
    from mallm.decision_protocols.consensus import (
        MajorityConsensus,
        SupermajorityConsensus,
        UnanimityConsensus,
    )
    from mallm.utils.config import Config
    from mallm.utils.types import Agreement

    protocols = {
        "majority": MajorityConsensus,
        "supermajority": SupermajorityConsensus,
        "unanimity": UnanimityConsensus,
    }
    cases = []
    for k in range(count):
        big = k % 10 == 0  # the 0.66 threshold shows only with many agents (33 of 50)
        n = rng.choice([50, 100, 3 * 17]) if big else rng.randint(2, 7)
        copied = rng.random() < 0.25  # MALLM's own agents copy the solution they agree with
        pool = DISTINCT if rng.random() < 0.5 else DISTINCT[:3] + EQUIVALENT
        # Each agent proposes (a solution) or agrees with the latest proposal; the first
        # agent of the turn always proposes.
        # Many agents: each proposes its own answer until the latest proposal, which about
        # half, 66% or all of them hold (the agents after it agree).
        window: list[dict[str, Any]] = []
        near = rng.choice([round(0.66 * n), round(0.5 * n), n - 1])  # each threshold's edge
        tail = min(n, near + rng.randint(-2, 2)) if big else None
        for i in range(n):
            proposes = i == 0 or (rng.random() < 0.4 if tail is None else i <= n - tail)
            if proposes:
                solution = rng.choice(pool) if tail is None else str(1000 + i)
                window.append({"agreement": False, "solution": solution})
            else:
                latest = next(a["solution"] for a in reversed(window) if a["solution"])
                window.append({"agreement": True, "solution": latest if copied else ""})
        agreements = [
            Agreement(
                agreement=a["agreement"],
                response="",
                solution=a["solution"],
                agent_id=f"p{i}",
                persona=f"Panelist {i}",
                message_id=i,
            )
            for i, a in enumerate(window)
        ]
        panelists = [Panelist(i) for i in range(n)]
        decided = {}
        for name, cls in protocols.items():
            answer, agreed, *_ = cls(panelists, 0, None).make_decision(
                list(agreements), 1, n - 1, "", "", Config("", "")
            )
            decided[name] = {"answer": answer, "decided": agreed}
        cases.append({"id": f"consensus-{k:04d}", "set": "consensus", "window": window, **decided})
    return cases


# ---- votes ------------------------------------------------------------------------------------


def vote_string(protocol: str, rng: random.Random, n: int) -> tuple[str, Any]:
    """A reply to the vote request as a model might write it, and what it means to say
    (None: nothing readable): a valid vote most of the time, else a broken one."""
    if protocol == "simple":
        choice = rng.randrange(n)
        return rng.choice(
            [
                (str(choice), choice),
                (f" {choice}\n", choice),
                (f"Solution {choice}", choice),
                (f"I vote {choice} of {n}", choice),  # MALLM reads every digit: invalid
                (str(n + rng.randint(0, 3)), n),  # past the last solution
                ("none of them", None),
            ]
        )
    if protocol == "approval":
        chosen = sorted(rng.sample(range(n), rng.randint(1, n)))
        text = ", ".join(map(str, chosen))
        return rng.choice(
            [
                (text, chosen),
                (text, chosen),
                (f"{text}, {chosen[0]}", [*chosen, chosen[0]]),  # one approved twice
                (f"{text}, {n + 1}", [*chosen, n + 1]),  # one past the last
                (str(n + 2), [n + 2]),
                (f"[{text}]", None),
                (" ".join(map(str, chosen)), None if len(chosen) > 1 else chosen),
                ("all of them", None),
            ]
        )
    if protocol == "cumulative":
        keys = rng.sample(range(n), rng.randint(1, n))
        points = dict.fromkeys(keys, 0)
        for _ in range(10):
            points[rng.choice(keys)] += 1
        if rng.random() < 0.2:
            points[keys[0]] += rng.choice([-3, -1, 1, 4])  # no longer 10 in all
        if rng.random() < 0.1:
            points = {**points, n: 0}  # a solution past the last, with no points
        text = "{" + ", ".join(f"{k}: {v}" for k, v in points.items()) + "}"
        if rng.random() < 0.15:
            points = {**points, keys[0]: points[keys[0]] - 12}
            points[rng.randrange(n)] = 12  # negative points, 10 in all
            text = "{" + ", ".join(f"{k}: {v}" for k, v in points.items()) + "}"
        return rng.choice(
            [
                (text, points),
                (text, points),
                (text.replace(", ", ",\n"), points),
                ('{"' + text[1:].replace(": ", '": ').replace(", ", ', "'), points),
                ("```json\n" + text + "\n```", None),
                ("ten points to the first", None),
            ]
        )
    ranking = rng.sample(range(n), rng.randint(1, min(n, 5)))
    if rng.random() < 0.1:
        ranking = [*ranking, ranking[0]]  # one ranked twice
    if rng.random() < 0.08:
        ranking = [*ranking, n]  # one past the last
    if rng.random() < 0.05:
        ranking = (ranking * 6)[:6]  # six places
    text = " ".join(map(str, ranking))
    return rng.choice(
        [
            (text, ranking),
            (text, ranking),
            (", ".join(map(str, ranking)), None if len(ranking) > 1 else ranking),
            ("the first is best", None),
        ]
    )


def vote_cases(rng: random.Random, protocol: str, count: int) -> list[dict[str, Any]]:
    from mallm.decision_protocols.approval_voting import ApprovalVoting
    from mallm.decision_protocols.cumulative_voting import CumulativeVoting
    from mallm.decision_protocols.ranked_voting import RankedVoting
    from mallm.decision_protocols.simple_voting import SimpleVoting
    from mallm.models.discussion.ResponseGenerator import ResponseGenerator

    cls, prompt = {
        "simple": (SimpleVoting, ResponseGenerator.generate_voting_prompt),
        "approval": (ApprovalVoting, ResponseGenerator.generate_approval_voting_prompt),
        "cumulative": (CumulativeVoting, ResponseGenerator.generate_cumulative_voting_prompt),
        "ranked": (RankedVoting, ResponseGenerator.generate_ranking_prompt),
    }[protocol]
    cases = []
    for k in range(count):
        n = rng.randint(2, 6)
        if rng.random() < 0.5:
            solutions = rng.sample(DISTINCT, n)
        else:
            solutions = [rng.choice(DISTINCT[:3] + EQUIVALENT) for _ in range(n)]
        # Every panelist writes one to three replies; a panelist whose last one is invalid
        # is asked again until MALLM gives up (its vote dropped).
        if k % 7 == 0:  # a tie by construction: each panelist votes for its own solution
            tries = [[own_vote(protocol, i)] for i in range(n)]
        else:
            tries = [
                [vote_string(protocol, rng, n) for _ in range(rng.choice([1, 1, 1, 2, 3]))]
                for _ in range(n)
            ]
        panelists = [Panelist(i, [text for text, _ in replies]) for i, replies in enumerate(tries)]
        voting = cls(panelists, 0, None)
        verdicts = [[verdict(voting, solutions, text) for text, _ in replies] for replies in tries]
        agreed, answer, results, _ = voting.vote_with_alterations(
            [(s, 0) for s in solutions], "", "", "", voting._name, prompt
        )
        result = results.alterations["anonymous"]
        cases.append(
            {
                "id": f"{protocol}-{k:04d}",
                "set": "vote",
                "protocol": protocol,
                "solutions": solutions,
                "replies": [
                    [
                        {"text": text, "means": means, **checked}
                        for (text, means), checked in zip(replies, judged, strict=True)
                    ]
                    for replies, judged in zip(tries, verdicts, strict=True)
                ],
                "asked": [p.llm.asked for p in panelists],
                "votes": result.votes,
                "answer": answer,
                "decided": agreed,
            }
        )
    return cases


def own_vote(protocol: str, i: int) -> tuple[str, Any]:
    return {
        "simple": (str(i), i),
        "approval": (str(i), [i]),
        "cumulative": (f"{{{i}: 10}}", {i: 10}),
        "ranked": (str(i), [i]),
    }[protocol]


def verdict(voting: Any, solutions: list[str], text: str) -> dict[str, Any]:
    """MALLM's reading of one reply: whether it counts and the vote it counts as."""
    try:
        _, votes, ok, _ = voting.process_votes(solutions, voting.panelists[0], text, [], "")
    except Exception as error:  # what MALLM catches (or not) and asks again for
        return {"ok": False, "error": type(error).__name__}
    if not ok:
        return {"ok": False, "vote": None}
    # approval extends the list of votes with the reply's approvals, the others append one
    return {"ok": True, "vote": votes if voting._name == "approval_voting" else votes[0]}


# ---- paradigms --------------------------------------------------------------------------------


class Recorder:
    """A fake model for whole discussions: every agent turn is two requests (the turn, then
    the solution's extraction); each turn's reply carries a mark ⟦m{k}⟧, and the record keeps,
    for each turn request, the marks its messages hold in order with their roles."""

    model = "fake"

    def __init__(self) -> None:
        self.calls, self.turns = 0, []  # type: list[list[list[Any]]]

    def invoke(self, messages: list[dict[str, str]], **kw: Any) -> str:
        self.calls += 1
        k = len(self.turns)
        if self.calls % 2 == 0:  # the extraction that follows turn k-1
            assert f"⟦m{k - 1}⟧" in messages[-2]["content"], "not the previous turn's extraction"
            return f"solution {k - 1}"
        self.turns.append([[j, role] for _, j, role in self.marks(messages, k)])
        return f"[DISAGREE] reply ⟦m{k}⟧"

    @staticmethod
    def marks(messages: list[dict[str, str]], k: int) -> list[tuple[int, int, str]]:
        """(where, turn, role) of every mark of turns 0..k-1 in the messages, in order."""
        found = []
        for index, message in enumerate(messages):
            text = message["content"]
            for j in range(k):
                at = text.find(f"⟦m{j}⟧")
                if at >= 0:
                    found.append((index * 10**9 + at, j, message["role"]))
        return sorted(found)


def paradigm_cases() -> list[dict[str, Any]]:
    from mallm.coordinator import Coordinator
    from mallm.utils.config import Config
    from mallm.utils.types import InputExample
    from rich.console import Console

    cases = []
    with tempfile.TemporaryDirectory() as scratch:
        for paradigm in ("memory", "relay", "report"):
            for n, turns in itertools.product(range(2, 9), range(1, 6)):
                model = Recorder()
                config = Config(
                    f"{scratch}/in.json", f"{scratch}/out.json", task_instruction_prompt="task",
                    max_turns=turns, discussion_paradigm=paradigm,
                    decision_protocol="unanimity_consensus", num_agents=n,
                    agent_generators_list=["mock"] * n, use_chain_of_thought=True,
                )  # fmt: skip
                coordinator = Coordinator(
                    model, None, agent_generators=["mock"] * n,
                    console=Console(file=io.StringIO(), record=True),
                )  # fmt: skip
                sample = InputExample("1", None, ["question"], None, ["answer"])
                with contextlib.redirect_stdout(io.StringIO()):  # its console's summary
                    coordinator.discuss(config, sample, None)
                assert len(model.turns) == n * turns, (paradigm, n, len(model.turns))
                cases.append(
                    {
                        "id": f"{paradigm}-{n}-{turns}",
                        "set": "paradigm",
                        "paradigm": paradigm,
                        "agents": n,
                        "turns": turns,
                        # turn k is spoken by agent k % n in MALLM's turn k // n + 1
                        "reads": model.turns,
                    }
                )
    return cases


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repo", type=Path, required=True)
    parser.add_argument("--commit", required=True)
    parser.add_argument("--consensus", type=int, default=400)
    parser.add_argument("--votes", type=int, default=300)
    args = parser.parse_args()
    rng = random.Random(SEED)
    with tempfile.TemporaryDirectory() as scratch:
        load_reference(args.repo, args.commit, Path(scratch))
        cases = consensus_cases(rng, args.consensus)
        for protocol in ("simple", "approval", "cumulative", "ranked"):
            cases += vote_cases(rng, protocol, args.votes)
        cases += paradigm_cases()
    with open(HERE / "cases.jsonl", "w", encoding="utf-8") as out:
        for case in cases:
            out.write(json.dumps(case, ensure_ascii=False) + "\n")
    counts: dict[str, int] = {}
    for case in cases:
        name = case.get("protocol", case["set"])
        counts[name] = counts.get(name, 0) + 1
    meta = {
        "reference": "github.com/Multi-Agent-LLMs/mallm",
        "commit": args.commit,
        "version": "1.0.5",
        "seed": SEED,
        "python": sys.version.split()[0],
        "langchain-core": importlib.import_module("langchain_core").__version__,
        "cases": counts,
    }
    (HERE / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    print(json.dumps(counts))


if __name__ == "__main__":
    main()
