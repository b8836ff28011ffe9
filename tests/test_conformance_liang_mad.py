"""mad-eval's judged preset against Liang et al.'s own debate (conformance/liang_mad/cases.jsonl,
made by its generate.py from Skytliang/Multi-Agents-Debate's interactive.Debate): every request
it sends, byte for byte under a template of its wording, when the debate ends and its answer.
Any difference not declared in differences.toml fails, and so does a declared one that no
longer differs."""

from __future__ import annotations

import asyncio
import hashlib
import json
import tomllib
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from mad_eval.backends.base import Backend, Generation, Request, answered
from mad_eval.debate.context import EstimateCounter, Fitter
from mad_eval.debate.engine import Engine
from mad_eval.debate.prompts import Speaker
from mad_eval.debate.seats import Seat
from mad_eval.grading.kinds import get_kind
from mad_eval.protocols import resolve
from mad_eval.protocols.base import ProtocolError, check_protocol
from mad_eval.protocols.judged import Judged
from mad_eval.records import Question, Stop, Turn, derive_seed
from mad_eval.settings.config import RunConfig
from mad_eval.settings.templates import Template, load_template
from mad_eval.voting.rules import get_rule
from mad_eval.voting.ties import vote_ties

FOLDER = Path(__file__).resolve().parent.parent / "conformance" / "liang_mad"
AGENTS = {"affirmative": 0, "negative": 1, "moderator": 2}
GOING_ON = '{"debate_answer": ""}'  # a moderator's reply past where the reference stopped


@cache
def cases() -> list[dict[str, Any]]:
    with open(FOLDER / "cases.jsonl", encoding="utf-8") as lines:
        return [json.loads(line) for line in lines]


@cache
def meta() -> dict[str, Any]:
    return json.loads((FOLDER / "meta.json").read_text(encoding="utf-8"))


@cache
def declared() -> dict[str, Any]:
    return tomllib.loads((FOLDER / "differences.toml").read_text(encoding="utf-8"))


def read_answer(text: str) -> str | None:
    """The reference's final answer as the number kind reads it (None: no number)."""
    return get_kind("number").read(text.strip(), None, ())


# Each class of differences.toml: whether it covers a case.
PREDICATES: dict[str, Callable[[dict[str, Any]], bool]] = {
    "final-judge": lambda case: case["final_judge"],
    "crash": lambda case: case["error"] is not None,
    "unread-answer": lambda case: (
        case["answer"] is not None and read_answer(case["answer"]) is None
    ),
}


def placeholders(folder: Path) -> Template:
    """templates/liang.toml with the reference's prompts as generate.py hid them: its
    placeholders, marks and line breaks."""
    values = "\n".join(f"{key} = {json.dumps(text)}" for key, text in meta()["skeletons"].items())
    path = folder / "liang-placeholders.toml"
    path.write_text(f'base = "liang"\n\n[values]\n{values}\n', encoding="utf-8")
    return load_template(str(path))


class Scripted(Backend):
    """Answers each player with the case's replies, round by round, and records every
    request's messages."""

    spec = "scripted"

    def __init__(self, case: dict[str, Any], seats: dict[int, tuple[int, int]]):
        self.replies = [case["replies"][name] for name in AGENTS]
        self.seats = seats  # seed -> (round, agent)
        self.sent: dict[tuple[int, int], list[dict[str, str]]] = {}

    async def generate(self, request: Request) -> Generation:
        round_, agent = self.seats[request.sampling.seed]
        self.sent[round_, agent] = [dict(m) for m in request.messages]
        given = self.replies[agent]
        return answered(given[round_] if round_ < len(given) else GOING_ON, finish_reason="stop")


class Debated:
    """A case's debate as mad-eval's engine runs it under the judged preset."""

    def __init__(self, case: dict[str, Any], template: Template):
        protocol = resolve("judged:ends=answer").protocol
        config = RunConfig(
            protocol="judged:ends=answer", agents=3, rounds=case["max_round"] - 1,
            prompt_style=str(template.path), quote="verbatim", max_tokens=512,
        )  # fmt: skip
        question = Question(
            case["id"], case["question"], "1", kind="number", answer="debate-answer"
        )
        seeds = {
            derive_seed(config.seed, 0, question.id, r, a): (r, a)
            for r in range(case["max_round"])
            for a in range(3)
        }
        self.backend = Scripted(case, seeds)
        seats = [
            Seat(agent, self.backend, Fitter(EstimateCounter()), None,
                 Speaker(template, i, 3, None, False, agent.quote))
            for i, agent in enumerate(config.team())
        ]  # fmt: skip
        self.stops: list[Stop] = []
        engine = Engine(config, protocol, seats, {}, lambda turn: None, on_stop=self.stops.append)
        last: list[Turn] = asyncio.run(engine.debate(0, question))
        decision = protocol.decision(3)
        rule = get_rule(decision.rule or "")
        pick = rule.pick(last, decision.voters, decision.agent, vote_ties(0, 0, case["id"], 0),
                         lambda a, b: a == b)  # fmt: skip
        self.answer = pick.answer if pick else None
        # The round (1-based, as the reference counts) whose judge gave the final answer.
        self.ended = (self.stops[0].round if self.stops else len(last) and last[0].round) + 1
        if self.answer is None:
            self.ended = None

    def requests(self) -> list[tuple[int, int, list[dict[str, str]]]]:
        return [(r, a, self.backend.sent[r, a]) for r, a in sorted(self.backend.sent)]


def reference_requests(case: dict[str, Any]) -> list[tuple[int, int, list[dict[str, str]]]]:
    """The reference's debate requests as (round, agent, messages), the final judge's left out."""
    sent = [r for r in case["requests"] if r["agent"] in AGENTS]
    return [(i // 3, AGENTS[r["agent"]], r["messages"]) for i, r in enumerate(sent)]


def test_the_suite_holds_enough_debates() -> None:
    assert len(cases()) >= 100
    assert {c["max_round"] for c in cases()} == {1, 2, 3}
    assert meta()["commit"].startswith("022a7a8")
    ended = [c for c in cases() if c["ended"] is not None]
    assert {c["ended"] for c in ended} == {1, 2, 3}  # the moderator ends it at every round
    assert sum(c["ended"] is not None and c["ended"] < c["max_round"] for c in cases()) >= 30


@pytest.mark.slow
def test_the_judged_preset_sends_and_decides_as_liang_et_al(tmp_path: Path) -> None:
    """Every request of the reference (the final judge's apart) equals mad-eval's, message for
    message, and both end the debate at the same round with the same answer, except where
    differences.toml says why not."""
    template = placeholders(tmp_path)
    classes = {c["name"]: c for c in declared()["class"]}
    hits = dict.fromkeys(classes, 0)
    for case in cases():
        debated = Debated(case, template)
        theirs, ours = reference_requests(case), debated.requests()
        # Every request the reference sent, mad-eval sent the same, in the same order.
        assert ours[: len(theirs)] == theirs, f"{case['id']}: the requests differ"
        covering = [name for name, holds in PREDICATES.items() if holds(case)]
        same_end = debated.ended == case["ended"]
        expected = None if case["answer"] is None else read_answer(case["answer"])
        same = (
            case["error"] is None  # the reference decided (it did not stop on an exception)
            and same_end
            and debated.answer == expected
            and len(ours) == len(case["requests"])
        )
        if not same or covering:
            assert covering, (
                f"{case['id']}: mad-eval ends at {debated.ended} with {debated.answer!r}, "
                f"Liang et al. at {case['ended']} with {case['answer']!r}, undeclared"
            )
            hits[covering[0]] += 1
            assert not same, f"{case['id']}: declared {covering[0]} but nothing differs"
    stale = [name for name, count in hits.items() if not count and name in PREDICATES]
    assert not stale, f"differences.toml declares classes that no longer differ: {stale}"
    assert set(classes) == {*PREDICATES, "one-round"}


def test_a_debate_of_one_round_is_refused_where_liang_et_al_run_it() -> None:
    """The declared class one-round: max_round 1 (no debate round) is --rounds 0, refused."""
    assert any(c["max_round"] == 1 for c in cases())
    with pytest.raises(ProtocolError, match="needs debate rounds"):
        check_protocol(Judged(ends="answer"), 3, 0)


def test_the_sentences_match_their_hashes_only_in_a_users_own_template() -> None:
    """The placeholders stand for sentences kept only as hashes, and liang.toml's own wording
    is none of them."""
    ours = load_template("liang").values
    hashes = set(meta()["sentences"].values())
    for key, text in ours.items():
        for line in (text if isinstance(text, str) else "").split("\n"):
            for piece in line.split("##"):
                assert hashlib.sha256(piece.strip().encode()).hexdigest() not in hashes, key
    assert set(meta()["skeletons"]) <= set(ours) | {"judge_prompt_last1", "judge_prompt_last2"}


def test_ends_is_checked() -> None:
    with pytest.raises(ProtocolError, match="ends='never' is not one of"):
        Judged(ends="never")
    assert Judged(ends="answer").asks(2, 0, 3) == [] and Judged().asks(2, 0, 3) == ["verdict"]
