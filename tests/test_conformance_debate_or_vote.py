"""mad-eval against Debate-or-Vote's own outputs (conformance/debate_or_vote/cases.jsonl, made by
its generate.py from the paper's code): its math reader, its vote and its prompt layout; and
the reader and vote of a later fork (conformance/debate_or_vote_fork/) under dov-math-fork.
Any difference not declared in a suite's differences.toml fails, and so does a declared one
that no longer differs."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from conformance_suite import Suite

from mad_eval.backends.base import Backend, Generation, Request, answered
from mad_eval.data.benchmarks import load_spec
from mad_eval.debate.context import EstimateCounter, Fitter, bare_render
from mad_eval.debate.engine import Engine
from mad_eval.debate.plan import make_plan
from mad_eval.debate.prompts import Speaker, pair_prompt
from mad_eval.debate.seats import Seat
from mad_eval.grading.answers import get_answer_protocol
from mad_eval.grading.dov import as_text, round_one
from mad_eval.grading.grader import grade, number_gold, same_answer
from mad_eval.grading.reasoning import drop_reasoning, verbatim
from mad_eval.protocols.centralized import Centralized
from mad_eval.protocols.decentralized import Decentralized
from mad_eval.protocols.sparse import Sparse
from mad_eval.records import Question, Turn, derive_seed
from mad_eval.settings.config import ConfigError, RunConfig
from mad_eval.settings.templates import Template, load_template
from mad_eval.voting.rules import Plurality
from mad_eval.voting.ties import vote_ties

SUITE = Suite("debate_or_vote", "Debate-or-Vote")
FORK = Suite("debate_or_vote_fork", "the Debate-or-Vote fork")
FOLDER = SUITE.folder
cases = SUITE.cases
# Each suite's reader: the paper's under dov-math, the fork's under its own name.
READERS = {"dov-math": SUITE, "dov-math-fork": FORK}


def gold_of(value: float) -> str:
    """A gold as Debate-or-Vote compares it (rounded to one decimal), as the number kind
    holds it."""
    found = number_gold(as_text(round_one(float(value))) or "")
    assert found is not None
    return found


def value_of(answer: str | None) -> str | None:
    """A read answer (the number kind's exact form) as the reference's value text."""
    return None if answer is None else repr(float(Fraction(answer)))


def has_reasoning(reply: str) -> bool:
    return drop_reasoning(reply) != reply


def non_finite(value: str | None) -> bool:
    return value in ("inf", "-inf", "nan")


# Each class of differences.toml: whether it covers a reply the reference read as `value`.
PREDICATES: dict[str, Callable[[str, str | None], bool]] = {
    "reasoning": lambda reply, value: has_reasoning(reply),
    "non-finite": lambda reply, value: non_finite(value),
}


def covering(replies: list[str], values: list[str | None]) -> list[str]:
    return [
        name
        for name, holds in PREDICATES.items()
        if any(holds(r, v) for r, v in zip(replies, values, strict=True))
    ]


def test_the_suite_holds_enough_cases() -> None:
    assert len(cases("reader")) >= 2000 and len(cases("vote")) >= 200
    assert {c["topology"] for c in cases("prompt")} == {"decentralized", "sparse", "centralized"}
    meta = json.loads((FOLDER / "meta.json").read_text())
    assert meta["reference"].endswith("deeplearning-wisc/debate-or-vote")
    assert meta["commit"].startswith("82c929e")
    fork = json.loads((FORK.folder / "meta.json").read_text())
    assert fork["reference"].endswith("dreaming-madao/debate-or-vote")
    assert fork["commit"].startswith("8efe803")
    assert fork["cases"] == {"reader": len(cases("reader")), "vote": len(cases("vote"))}
    # The same inputs, read by each reference.
    assert [c["reply"] for c in FORK.cases("reader")] == [c["reply"] for c in cases("reader")]


def test_the_readers_differ_where_the_paper_reads_the_last_group() -> None:
    aside = "{final answer: 8} (since 2^{3} = 8)"
    assert get_answer_protocol("dov-math").locate(aside) == "3.0"
    assert get_answer_protocol("dov-math-fork").locate(aside) == "8.0"
    # Runs read by the fork's reader (revision 1) are not resumed under the paper's.
    assert get_answer_protocol("dov-math").revision == 2
    paper = {c["id"]: c["value"] for c in cases("reader")}
    differ = sum(paper[c["id"]] != c["value"] for c in FORK.cases("reader"))
    assert differ >= 100  # the suites tell the two readers apart


@pytest.mark.parametrize("protocol", READERS)
def test_the_math_reader_reads_what_debate_or_vote_reads(protocol: str) -> None:
    suite, reader = READERS[protocol], get_answer_protocol(protocol)
    differences = suite.ledger("reader", first=True)
    for case in suite.cases("reader"):
        found = reader.find(case["reply"]).answer
        graded = grade(case["reply"], gold_of(case["gold"]), "number", answer=protocol)
        read = None if found is None else repr(float(found))
        if read != value_of(graded.answer):
            pytest.fail(
                f"{case['id']}: the protocol found {found!r}, the kind read {graded.answer!r}"
            )
        if read != case["value"] or bool(graded.correct) != case["correct"]:
            differences.found(case["id"], covering([case["reply"]], [case["value"]]))
    differences.check(len(suite.cases("reader")))


@dataclass
class Cast:
    agent: int
    answer: str | None
    correct: bool | None
    grade_timed_out: bool = False


@pytest.mark.parametrize("protocol", READERS)
def test_the_vote_picks_what_debate_or_vote_picks(protocol: str) -> None:
    suite = READERS[protocol]
    differences = suite.ledger("vote", first=True)
    same = same_answer("number")
    for case in suite.cases("vote"):
        gold = gold_of(case["gold"])
        turns = [
            Cast(j, g.answer, g.correct)
            for j, reply in enumerate(case["replies"])
            if (g := grade(reply, gold, "number", answer=protocol))
        ]
        winner = Plurality().pick(turns, list(range(5)), None, vote_ties(0, 0, case["id"], 0), same)
        mine = [value_of(winner.answer if winner else None), bool(winner and winner.correct)]
        winners = case["winners"]
        if mine not in winners:
            differences.found(case["id"], covering(case["replies"], case["values"]))
        elif len(winners) > 1:
            differences.found(case["id"], ["tie"])  # one of the tied answers: as declared
    differences.check(len(suite.cases("vote")))


# ---- the prompt layout ---------------------------------------------------------------------

# templates/dov.toml with the reference's sentences as generate.py hid them: its placeholders.
PLACEHOLDERS = """base = "dov"

[values]
opinions = "\u27e8opinions\u27e9"
peer_heading = "\u27e8peer\u27e9"
hub_heading = "\u27e8hub\u27e9"
own_heading = "\u27e8own\u27e9"
request = "\u27e8request\u27e9"
instruction = "\u27e8suffix\u27e9"
"""


class Scripted(Backend):
    """Answers round 0 with the case's replies (as a server returns them whole, <think>
    blocks included) and records every request."""

    spec = "scripted"

    def __init__(self, replies: list[str], seats: dict[int, tuple[int, int]]):
        self.replies, self.seats = replies, seats  # seed -> (round, agent)
        self.sent: dict[tuple[int, int], str] = {}

    async def generate(self, request: Request) -> Generation:
        round_, agent = self.seats[request.sampling.seed]
        self.sent[round_, agent] = bare_render(request.messages)
        text = self.replies[agent] if round_ == 0 else "{final answer: 1}"
        return answered(text, finish_reason="stop")


def debate_prompts(
    case: dict[str, Any], template: Template, quote: str = "verbatim"
) -> dict[tuple[int, int], str]:
    """The text each agent is sent in rounds 0 and 1 of the case's debate, run by the engine
    under --template bare and `quote` (verbatim: as the reference quotes)."""
    agents, topology = case["agents"], case["topology"]
    protocol = {
        "decentralized": lambda: Decentralized(),
        "sparse": lambda: Sparse(order="ring"),
        "centralized": lambda: Centralized(hub=0),
    }[topology]()
    config = RunConfig(
        protocol=topology, agents=agents, rounds=1, prompt_style=str(template.path),
        quote=quote, template="bare", max_tokens=512,
    )  # fmt: skip
    question = Question(case["id"], case["question"], "1", kind="number", answer="dov-math")
    seeds = {
        derive_seed(config.seed, 0, question.id, r, a): (r, a)
        for r in (0, 1)
        for a in range(agents)
    }
    backend = Scripted(case["replies"], seeds)
    seats = [
        Seat(
            agent,
            backend,
            Fitter(EstimateCounter("bare")),
            None,
            Speaker(template, i, agents, None, i == protocol.hub, agent.quote, protocol.hub),
        )
        for i, agent in enumerate(config.team())
    ]
    turns: list[Turn] = []
    engine = Engine(config, protocol, seats, {}, turns.append)
    asyncio.run(engine.debate(0, question))
    # A reply split apart is kept as written only where someone quotes it so.
    split = [t for t in turns if t.round == 0 and t.reasoning]
    assert all((t.reply is not None) == (quote == "verbatim") for t in split)
    return backend.sent


@pytest.mark.slow
def test_the_dov_template_sends_the_prompts_debate_or_vote_builds(tmp_path: Path) -> None:
    """Decentralized, sparse (its ring order) and centralized rounds, <think> replies among
    them: the texts the engine sends equal the reference's, byte for byte, its sentences
    being the placeholders in both."""
    path = tmp_path / "dov-placeholders.toml"
    path.write_text(PLACEHOLDERS, encoding="utf-8")
    template = load_template(str(path))
    thinking = 0
    for case in cases("prompt"):
        sent = debate_prompts(case, template)
        for agent in range(case["agents"]):
            assert sent[0, agent] == case["round0"], f"{case['id']}: round 0 of agent {agent}"
            assert sent[1, agent] == case["round1"][agent], f"{case['id']}: agent {agent}"
        thinking += any("<think>" in reply for reply in case["replies"])
    assert thinking >= 30  # reasoning replies are quoted as written, tags and all


def test_a_verbatim_template_with_another_quote_is_refused() -> None:
    with pytest.raises(ConfigError, match="--quote verbatim"):
        make_plan({"protocol": "decentralized", "agents": 3, "prompt_template": "dov", "limit": 1})


def test_gsm8k_dov_reads_and_limits_as_debate_or_vote() -> None:
    spec = load_spec("gsm8k_dov")
    assert (spec.kind, spec.answer, spec.max_tokens) == ("number", "dov-math", 512)


def test_replies_are_kept_as_written_only_where_an_agent_quotes_them_so() -> None:
    think = "<think>\nsum it\n</think>\n\n{final answer: 2}"
    split = answered(think, finish_reason="stop")
    assert (split.text, split.reasoning, split.reply) == ("{final answer: 2}", "sum it", think)
    assert answered("{final answer: 2}", finish_reason="stop").reply is None
    assert (
        verbatim("{final answer: 2}", "sum it", None)
        == "<think>\nsum it\n</think>\n\n{final answer: 2}"
    )


def test_replies_are_recorded_as_written_only_in_runs_that_quote_them_so() -> None:
    case = next(c for c in cases("prompt") if c["topology"] == "decentralized" and c["agents"] == 3)
    assert all("<think>" in reply for reply in case["replies"])
    sent = debate_prompts(case, load_template("debate"), quote="full")  # checks the records
    assert "<think>" in sent[1, 0]  # the reasoning is quoted, in the debate template's way


def test_training_pairs_under_the_dov_template_quote_the_rollouts_as_they_are() -> None:
    question = Question("q", "What is 1+1?", "2", kind="number", answer="dov-math")
    own, partner = "<think>\nhm\n</think>\n\n{final answer: 2}", "{final answer: 3}"
    (message,) = pair_prompt(question, own, partner, load_template("dov"))
    assert f" \n{partner}\n\n\n" in message["content"] and f"\n{own}\n\n\n" in message["content"]
