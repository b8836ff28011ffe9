"""mad-eval's chateval preset against ChatEval's own messages and decisions
(conformance/chateval/cases.jsonl, made by its generate.py from the reference's code). Any
difference not declared in differences.toml fails, and so does a declared one that no longer
differs."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from conformance_suite import Suite

from mad_eval.backends.base import Backend, Generation, Request, answered
from mad_eval.debate.engine import Engine, shared_seats
from mad_eval.grading.grader import grade, same_answer
from mad_eval.protocols import resolve
from mad_eval.records import Question, Turn, derive_seed
from mad_eval.settings.config import RunConfig
from mad_eval.voting.rules import default_rule, get_rule
from mad_eval.voting.ties import vote_ties

SUITE = Suite("chateval", "ChatEval")
FOLDER = SUITE.folder
cases, declared = SUITE.cases, SUITE.declared
Messages = list[dict[str, str]]


def test_the_suite_holds_enough_cases() -> None:
    orders = [c["order"] for c in cases("prompt")]
    assert len(orders) >= 100 and set(orders) == {"one-by-one", "simultaneous", "summarizer"}
    assert len(cases("vote")) >= 100
    meta = json.loads((FOLDER / "meta.json").read_text())
    assert meta["commit"].startswith("56b320c")


# ---- the messages --------------------------------------------------------------------------

FINAL = "\u27e8final\u27e9"


def placeholders(names: list[str], roles: list[str]) -> str:
    """templates/chateval.toml with ChatEval's sentences as generate.py hid them."""
    values = {
        "heading": "\u27e8heading\u27e9",
        "task": "\u27e8task\u27e9",
        "turn": "\u27e8turn\u27e9{name}\u27e8turn end\u27e9",
        "final": FINAL,
        "names": names,
        "roles": roles,
    }
    lines = [f"{key} = {json.dumps(value, ensure_ascii=False)}" for key, value in values.items()]
    return 'base = "chateval"\n\n[values]\n' + "\n".join(lines) + "\n"


class Scripted(Backend):
    """Answers each turn with the case's scripted reply and records every request."""

    spec = "scripted"

    def __init__(self, script: dict[tuple[int, int], str], seats: dict[int, tuple[int, int]]):
        self.script, self.seats = script, seats  # seed -> (round, agent)
        self.sent: dict[tuple[int, int], Messages] = {}

    async def generate(self, request: Request) -> Generation:
        key = self.seats[request.sampling.seed]
        self.sent[key] = [dict(m) for m in request.messages]
        return answered(self.script[key], finish_reason="stop")


def sent_by_mad_eval(case: dict[str, Any], tmp_path: Path) -> dict[tuple[int, int], Messages]:
    """Each (round, agent)'s messages in mad-eval's chateval preset of the case's order, its
    template given ChatEval's sentences as placeholders."""
    debaters, rounds = len(case["names"]), case["rounds"]
    summarizer = case["order"] == "summarizer"
    agents = debaters + summarizer
    names = case["names"] + (["Summarizer"] if summarizer else [])
    roles = case["roles"] + (["\u27e8summarizer role\u27e9"] if summarizer else [])
    path = tmp_path / f"{case['id']}.toml"
    path.write_text(placeholders(names, roles), encoding="utf-8")
    choice = resolve(f"chateval:order={case['order']},personas=false")
    assert choice.prompt_template == "chateval"  # the preset's own layout
    config = RunConfig(
        protocol="chateval", agents=agents, rounds=rounds, prompt_style=str(path), max_tokens=512
    )
    question = Question(case["id"], case["question"], "1", kind="number")
    script = {(r, a): case["replies"][r][a] for r in range(rounds + 1) for a in range(debaters)}
    if summarizer:
        script |= {(r, debaters): case["summaries"][r] for r in range(rounds + 1)}
    seeds = {derive_seed(config.seed, 0, question.id, r, a): (r, a) for r, a in script}
    backend = Scripted(script, seeds)
    turns: list[Turn] = []
    engine = Engine(config, choice.protocol, shared_seats(config, backend), {}, turns.append)
    asyncio.run(engine.debate(0, question))
    assert not [t for t in turns if t.failed]
    return backend.sent


def explained(mine: Messages, theirs: Messages, case: dict[str, Any], name: str) -> list[str]:
    """The declared classes that account for mine != theirs (none: unexplained). Each class
    undoes one documented difference; only when what is left is equal byte for byte do they
    count."""
    found = []
    if case["order"] == "summarizer":  # ChatEval keeps the others' raw messages besides
        own = (f"{name}: ", "Summarizer: ")
        kept = [m for m in theirs if m["role"] != "assistant" or m["content"].startswith(own)]
        found += ["summarizer"] if kept != theirs else []
        theirs = kept
    if mine == theirs:
        return found
    if theirs[-1] == {"role": "user", "content": ""}:  # not the agent's last turn
        mine = [{**m, "content": m["content"].replace(FINAL, "")} for m in mine]
        found.append("final prompt")
    if mine == theirs:
        return found
    if [m["role"] for m in theirs] == ["user", "user"] and mine == theirs[:1]:
        return [*found, "nothing said"]
    return []


@pytest.mark.slow
def test_the_chateval_preset_sends_the_messages_chateval_builds(tmp_path: Path) -> None:
    """One-by-one, simultaneous and with a summarizer: every request each debater sends
    equals ChatEval's, byte for byte, its sentences being the placeholders in both, or
    differs only as differences.toml declares."""
    differences = SUITE.ledger("prompt", every=True)
    identical = 0
    for case in cases("prompt"):
        sent = sent_by_mad_eval(case, tmp_path)
        for agent, name in enumerate(case["names"]):
            requests = case["sent"][name]
            assert len(requests) == case["rounds"] + 1, case["id"]
            for round_, theirs in enumerate(requests):
                mine = sent[round_, agent]
                if mine == theirs:
                    identical += 1
                    continue
                why = explained(mine, theirs, case, name)
                differences.found(f"{case['id']} round {round_} agent {agent}", why)
    differences.check()
    assert identical >= 100  # every agent's last turn, one-by-one and simultaneous


# ---- the decision --------------------------------------------------------------------------

# ChatEval's verdicts as the options of a choice question mad-eval grades.
LETTERS = {"Assistant 1": "A", "Assistant 2": "B", "Tie": "C"}
DECIDED = {"gpt35": "A", "vicuna": "B", "tie": "C"}


def as_choice(reply: str) -> str:
    """The reply with its verdict line written as mad-eval's choice protocol reads it."""
    body, _, verdict = reply.rpartition("\nAnswer: ")
    letter = LETTERS.get(verdict)
    return f"{body}\n\\boxed{{{letter}}}" if letter else reply


def test_the_vote_decides_what_chateval_decides() -> None:
    """ChatEval's majority_vote against the chateval preset's decision (plurality over its
    debaters' verdicts)."""
    differences = SUITE.ledger("vote", every=True)
    same = same_answer("choice")
    protocol = resolve("chateval").protocol
    for case in cases("vote"):
        decision = protocol.decision(len(case["replies"]))
        rule = get_rule(decision.rule or default_rule("choice"))
        graded = [grade(as_choice(r), "A", "choice", ["A", "B", "C"]) for r in case["replies"]]
        casts = [Cast(j, g.answer, g.correct) for j, g in enumerate(graded)]
        ties = vote_ties(0, 0, case["id"], 0)
        winner = rule.pick(casts, decision.voters, decision.agent, ties, same)
        mine, theirs = winner.answer if winner else None, DECIDED[case["decision"]]
        answers = [c.answer for c in casts]
        counts = {a: answers.count(a) for a in answers if a is not None}
        top = [a for a, k in counts.items() if k == max(counts.values(), default=0)]
        if mine == theirs:
            continue
        if None in answers:  # ChatEval counts an unreadable verdict as a vote for Tie
            differences.found(case["id"], ["unread"])
        elif len(top) > 1:  # mad-eval draws one of the tied answers
            assert mine in top, case["id"]
            differences.found(case["id"], ["tie"])
        else:
            differences.found(case["id"], [])
    differences.check()


class Cast:
    def __init__(self, agent: int, answer: str | None, correct: bool | None):
        self.agent, self.answer, self.correct = agent, answer, correct
        self.grade_timed_out = False


@pytest.mark.parametrize("order", ["one-by-one", "simultaneous", "summarizer"])
def test_the_preset_uses_chatevals_layout(order: str) -> None:
    assert resolve(f"chateval:order={order}").prompt_template == "chateval"
