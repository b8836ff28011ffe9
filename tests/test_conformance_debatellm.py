"""mad-eval's DebateLLM baselines against DebateLLM's own outputs (conformance/debatellm/
cases.jsonl, made by its generate.py from the reference's code): Medprompt's choice shuffle,
mapping back and vote, `most_frequent` against the plurality vote, and Ensemble Refinement's
requests. The presets are run through the engine; any difference not declared in
differences.toml fails, and so does a declared one that no longer differs."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from dataclasses import dataclass
from typing import Any

import pytest
from conformance_suite import Suite

from mad_eval.backends.base import Backend, Generation, Request, answered
from mad_eval.debate.context import bare_render
from mad_eval.debate.engine import Engine, shared_seats
from mad_eval.grading.grader import same_answer
from mad_eval.grading.kinds.choice import choice_question
from mad_eval.protocols import Choice, resolve
from mad_eval.records import Question, Turn, derive_seed
from mad_eval.settings.config import RunConfig
from mad_eval.voting.rules import default_rule, get_rule
from mad_eval.voting.ties import vote_ties

SUITE = Suite("debatellm", "DebateLLM")
FOLDER = SUITE.folder
cases, declared = SUITE.cases, SUITE.declared
UNPARSED = "-1"  # DebateLLM's extractors' answer for a reply they cannot read


@dataclass
class Cast:
    agent: int
    answer: str | None
    correct: bool | None = None
    grade_timed_out: bool = False


def vote(preset: Choice, casts: list[Any], agents: int, case_id: str) -> str | None:
    """The preset's decision over `casts` (turns or Casts): its rule over its voters."""
    decision = preset.protocol.decision(agents)
    rule = get_rule(decision.rule or default_rule("choice"))
    winner = rule.pick(
        casts, decision.voters, decision.agent, vote_ties(0, 0, case_id, 0), same_answer("choice")
    )
    return winner.answer if winner is not None else None


def vote_class(answers: list[str], theirs: str, mine: str | None) -> str | None:
    """Why mad-eval's pick over `answers` (DebateLLM's, "-1" unparsed) may differ from
    most_frequent's: None where it must not."""
    parsed = Counter(a for a in answers if a != UNPARSED)
    top = max(parsed.values(), default=0)
    tied = [a for a, n in parsed.items() if n == top]
    if mine is not None and mine not in tied:
        return None  # never declared: the vote picks a most frequent answer
    if theirs == UNPARSED:
        return "unparsed"
    if len(tied) > 1:
        return "tie"
    return None


def test_the_suite_holds_enough_cases() -> None:
    assert len(cases("medprompt")) >= 100 and len(cases("vote")) >= 100
    assert len(cases("er")) >= 100
    meta = json.loads((FOLDER / "meta.json").read_text())
    assert meta["commit"].startswith("6af602b")
    text = (FOLDER / "cases.jsonl").read_text(encoding="utf-8")
    assert all(mark in text for mark in meta["sentences"])  # hidden as hashes, never stored


def test_most_frequent_and_the_plurality_vote_pick_alike() -> None:
    preset = resolve("medprompt")
    differences = SUITE.ledger("vote")
    for case in cases("vote"):
        answers = case["answers"]
        casts = [Cast(j, None if a == UNPARSED else a) for j, a in enumerate(answers)]
        mine = vote(preset, casts, len(answers), case["id"])
        if mine != case["pick"]:
            differences.found(case["id"], vote_class(answers, case["pick"], mine))
        elif vote_class(answers, case["pick"], mine) == "tie":
            differences.found(case["id"], "tie")  # one of the tied answers: as declared
    differences.check(len(cases("vote")))


class Scripted(Backend):
    """Answers each agent with its scripted reply and records the question it was asked and
    the text and temperature of its request, by (round, agent)."""

    spec = "scripted"

    def __init__(self, replies: dict[tuple[int, int], str], seats: dict[int, tuple[int, int]]):
        self.replies, self.seats = replies, seats
        self.asked: dict[tuple[int, int], Question] = {}
        self.sent: dict[tuple[int, int], str] = {}
        self.temperature: dict[tuple[int, int], float] = {}

    async def generate(self, request: Request) -> Generation:
        key = self.seats[request.sampling.seed]
        self.asked[key] = request.question
        self.sent[key] = bare_render(request.messages)
        self.temperature[key] = request.sampling.temperature
        return answered(self.replies[key], finish_reason="stop")


def run_engine(
    preset: Choice, agents: int, rounds: int, question: Question, replies: dict, orders=None
) -> tuple[Scripted, list[Turn]]:
    """The preset's debate of `question` through the engine, each agent answering as
    scripted; `orders`: the option order each agent is given (in place of the seeded draw)."""
    protocol = preset.protocol
    if orders is not None:

        class Given(type(protocol)):  # type: ignore[misc,valid-type]
            def option_order(self, agent: int, n_agents: int, options: int, seed: int) -> list[int]:
                return orders[agent]

        protocol = Given()
    config = RunConfig(
        protocol="x", agents=agents, rounds=rounds, max_tokens=64, template="bare",
        prompt_style=preset.prompt_template or "debate",
    )  # fmt: skip

    seats = {
        derive_seed(config.seed, 0, question.id, r, a): (r, a)
        for r in range(rounds + 1)
        for a in range(agents)
    }
    backend = Scripted(replies, seats)
    turns: list[Turn] = []
    engine = Engine(config, protocol, shared_seats(config, backend), {}, turns.append)
    asyncio.run(engine.debate(0, question))
    return backend, turns


def reply_for(letter: str) -> str:
    return "I cannot tell." if letter == UNPARSED else f"Working it out. \\boxed{{{letter}}}"


def order_of(step: dict[str, Any], options: list[str]) -> list[int]:
    """The option order a Medprompt step showed: each shown text's position in the question
    (a repeated text takes its first unused place)."""
    free = list(range(len(options)))
    order = []
    for text in step["options"]:
        at = next(i for i in free if options[i] == text)
        free.remove(at)
        order.append(at)
    return order


@pytest.mark.slow
def test_medprompt_maps_each_shuffled_letter_back_and_votes_as_debatellm() -> None:
    """Given each step's order, the engine shows the options in it, maps the agent's letter
    back as DebateLLM's mapping does, and the preset's vote picks what most_frequent picks."""
    preset = resolve("medprompt")
    differences = SUITE.ledger("medprompt")
    for case in cases("medprompt"):
        steps, options = case["steps"], case["options"]
        if any(step["mapping"] is None for step in steps):
            differences.found(case["id"], "unshuffled")  # its shuffle fell back: none
            continue
        orders = [order_of(step, options) for step in steps]
        question = Question(
            case["id"], choice_question(case["question"], options), "A", {"options": options},
            "choice",
        )  # fmt: skip
        replies = {(0, i): reply_for(step["letter"]) for i, step in enumerate(steps)}
        backend, turns = run_engine(preset, len(steps), 0, question, replies, orders)
        mapped = []
        for turn, step in zip(sorted(turns, key=lambda t: t.agent), steps, strict=True):
            assert backend.asked[0, turn.agent].options == step["options"], case["id"]
            assert turn.option_order == orders[turn.agent]
            theirs = step["mapped"]
            mine = UNPARSED if turn.answer is None else turn.answer
            mapped.append(mine)
            if mine != theirs:
                repeated = len(set(options)) < len(options)
                differences.found(case["id"], "repeated-option" if repeated else None)
        mine = vote(preset, turns, len(steps), case["id"])
        if mapped != [s["mapped"] for s in steps]:
            continue  # counted above
        if mine != case["answer"]:
            differences.found(case["id"], vote_class(mapped, case["answer"], mine))
    differences.check(len(cases("medprompt")))


@pytest.mark.slow
def test_ensemble_refinement_sends_the_requests_debatellm_sends() -> None:
    """Its samples read the question alone; each aggregation reads the question and every
    sample, in order, once; the aggregations are voted as most_frequent votes them."""
    preset = resolve("ensemble_refinement")
    differences = SUITE.ledger("er")
    for case in cases("er"):
        k, m, replies = case["reasoning"], case["aggregation"], case["replies"]
        requests = case["requests"]
        assert len(requests) == k + m
        samples = [f"⟨reply {i}⟩" for i in range(k)]
        for request in requests[:k]:  # theirs: a sample reads the question and no reply
            text = "".join(msg["content"] for msg in request)
            assert "⟨question⟩" in text and "⟨reply" not in text, case["id"]
        for request in requests[k:]:
            # theirs: the samples as assistant turns between its system message and the question
            assert [msg["role"] for msg in request] == ["system", *["assistant"] * k, "user"]
            assert [msg["content"] for msg in request[1:-1]] == samples, case["id"]
            assert "⟨question⟩" in request[-1]["content"]
        options = case["options"]
        question = Question(
            case["id"], choice_question("Which fits?", options), "A", {"options": options},
            "choice",
        )  # fmt: skip
        answers = case["answers"]
        script = {(0, i): f"{replies[i]} {reply_for(answers[i])}" for i in range(k)}
        script |= {(1, j): reply_for(answers[k + j] if j < m else "A") for j in range(k)}
        backend, turns = run_engine(preset, k, 1, question, script)
        for i in range(k):  # ours: the same reads, in one user message
            assert not any(r in backend.sent[0, i] for r in replies), case["id"]
            assert question.text in backend.sent[0, i]
        for j in range(k):
            text = backend.sent[1, j]
            at = [text.find(script[0, i]) for i in range(k)]
            assert all(a >= 0 for a in at) and at == sorted(at), case["id"]
            assert all(text.count(script[0, i]) == 1 for i in range(k))
            assert question.text in text
        differences.found(case["id"], "layout")
        if case["temperatures"][k:] != case["temperatures"][:1] * m:
            same = {backend.temperature[1, j] for j in range(k)} == {backend.temperature[0, 0]}
            differences.found(case["id"], "temperature" if same else None)
        if m != k:
            differences.found(case["id"], "aggregations")  # k of ours, m of theirs: not voted
            continue
        last = [t for t in turns if t.round == 1]
        mine = vote(preset, last, k, case["id"])
        theirs = answers[k:]
        if mine != case["answer"]:
            differences.found(case["id"], vote_class(theirs, case["answer"], mine))
    differences.check(len(cases("er")))
