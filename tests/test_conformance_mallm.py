"""mad-eval against MALLM's own outputs (conformance/mallm/cases.jsonl, made by its generate.py
from the reference's code): its consensus thresholds, its simple, approval, cumulative and
ranked votes, and who reads whom under its memory, relay and report paradigms. Any
difference not declared in differences.toml fails, and so does a declared one that no longer
differs."""

from __future__ import annotations

import asyncio
import json
import random
from collections import Counter
from dataclasses import dataclass
from functools import cache
from typing import Any

import pytest
from conformance_suite import Suite

from mad_eval.backends.base import Backend, Generation, Request, answered
from mad_eval.debate.context import EstimateCounter, Fitter
from mad_eval.debate.engine import Engine
from mad_eval.debate.prompts import Speaker
from mad_eval.debate.seats import Seat
from mad_eval.grading.grader import same_answer
from mad_eval.protocols import resolve
from mad_eval.records import Question, Turn, derive_seed
from mad_eval.settings.config import RunConfig
from mad_eval.settings.templates import load_template
from mad_eval.voting.groups import answer_groups
from mad_eval.voting.rules import Weighted, get_rule
from mad_eval.voting.statements import STATEMENTS

SUITE = Suite("mallm", "MALLM")
FOLDER = SUITE.folder
cases, declared = SUITE.cases, SUITE.declared
RULE = {
    "simple": "plurality",
    "approval": "approval",
    "cumulative": "cumulative",
    "ranked": "borda",
}
STATED = {"approval": "approval", "cumulative": "points", "ranked": "ranking"}
NO_ONES = "no one's answer"  # a solution MALLM has no index for: no voter's answer


@cache
def same(a: str, b: str) -> bool:
    """The math kind's equivalence (math-verify), computed once per pair of answers."""
    return bool(same_answer("math")(a, b))


@dataclass
class Voter:
    """One agent's reply as a rule reads it: its answer and the statement it wrote."""

    agent: int
    answer: str | None
    text: str = ""
    correct: bool | None = None
    grade_timed_out: bool = False


def pick(rule: str, voters: list[Voter], case_id: str) -> Voter | None:
    agents = [v.agent for v in voters]
    return get_rule(rule).pick(voters, agents, None, random.Random(case_id), same)


def agree(a: str | None, b: str | None) -> bool:
    return a is not None and b is not None and (a == b or same(a, b))


def test_the_suite_holds_enough_cases() -> None:
    meta = json.loads((FOLDER / "meta.json").read_text())
    assert meta["commit"].startswith("d9e66bcc")
    assert len(cases("consensus")) >= 100
    votes = Counter(c["protocol"] for c in cases("vote"))
    assert set(votes) == set(RULE) and min(votes.values()) >= 100
    assert {c["paradigm"] for c in cases("paradigm")} == {"memory", "relay", "report"}


# ---- consensus --------------------------------------------------------------------------------


def window_answers(window: list[dict[str, Any]]) -> list[str]:
    """Each agent's answer in the turn: the solution it proposed, or the one it agreed with."""
    answers: list[str] = []
    for agreement in window:
        answers.append(agreement["solution"] or answers[-1])
    return answers


def consensus_covering(window: list[dict[str, Any]], largest_tie: bool) -> list[str]:
    answers = window_answers(window)
    latest = max(i for i, a in enumerate(window) if a["solution"] and not a["agreement"])
    before = answers[: latest + 1]
    found = []
    if any(a["agreement"] and a["solution"] for a in window):
        found.append("copied")
    if any(agree(x, y) for i, x in enumerate(before) for y in before[i + 1 :]):
        found.append("latest")
    if largest_tie:
        found.append("tie")
    return found


def test_consensus_ends_where_mallm_ends() -> None:
    differences = SUITE.ledger("consensus")
    total = 0
    for case in cases("consensus"):
        answers = window_answers(case["window"])
        voters = [Voter(i, answer) for i, answer in enumerate(answers)]
        agents = list(range(len(voters)))
        for name in ("majority", "supermajority", "unanimity"):
            total += 1
            rule = get_rule(name)
            reached = rule.reached(voters, agents, same)
            chosen = pick(name, voters, case["id"]) if reached else None
            theirs = case[name]
            if reached == theirs["decided"] and (
                not reached or agree(chosen and chosen.answer, theirs["answer"])
            ):
                continue
            sizes = Counter(
                next(j for j, a in enumerate(answers) if agree(a, b)) for b in answers
            ).most_common()
            tie = len(sizes) > 1 and sizes[0][1] == sizes[1][1]
            differences.found(f"{case['id']}/{name}", consensus_covering(case["window"], tie))
    differences.check(total)


# ---- votes ------------------------------------------------------------------------------------


def accepted(case: dict[str, Any], panelist: int) -> dict[str, Any] | None:
    """The reply MALLM counted for a panelist (its first valid one, the last one repeated
    while it asks again, ten times at most), or None when it dropped the vote."""
    replies = case["replies"][panelist]
    asked = case["asked"][panelist]
    for k in range(10):
        reply = replies[min(k, len(replies) - 1)]
        if reply["ok"]:
            assert asked == k + 1, f"{case['id']}: panelist {panelist} asked {asked} times"
            return reply
    assert asked == 10, f"{case['id']}: panelist {panelist} asked {asked} times"
    return None


def statement(protocol: str, means: Any, solutions: list[str]) -> str:
    """A vote over solution indices written as mad-eval's statement, naming the answers."""
    if means is None:  # a reply MALLM could not read: the label with nothing after it
        return f"{STATEMENTS.get(STATED[protocol]).label}:"

    def name(index: Any) -> str:
        index = int(index)
        return solutions[index] if 0 <= index < len(solutions) else NO_ONES

    if protocol == "cumulative":
        return STATEMENTS.get("points").write([(name(i), p) for i, p in means.items()])
    return STATEMENTS.get(STATED[protocol]).write([name(i) for i in means])


def ballot(case: dict[str, Any]) -> list[Voter]:
    """The case's votes as mad-eval's voters: in simple voting each voter's answer is the
    solution it voted for (mad-eval reads a vote as the reply's answer); otherwise each
    panelist's answer is its own solution and its reply states the vote MALLM counted, or,
    where MALLM dropped it, what its last reply meant to say."""
    protocol, solutions = case["protocol"], case["solutions"]
    voters = []
    for i, replies in enumerate(case["replies"]):
        counted = accepted(case, i)
        if protocol == "simple":
            voters.append(Voter(i, None if counted is None else solutions[counted["vote"]]))
        else:
            means = counted["vote"] if counted else replies[-1]["means"]
            voters.append(Voter(i, solutions[i], statement(protocol, means, solutions)))
    return voters


def tally(case: dict[str, Any]) -> list[int]:
    """The solutions MALLM's counted votes put on top (one: its decision; several: a tie,
    all of them when no vote counted)."""
    protocol, votes, n = case["protocol"], case["votes"], len(case["solutions"])
    scores = [0] * n
    for vote in votes:
        if protocol in ("simple", "approval"):
            for index in vote if isinstance(vote, list) else [vote]:
                scores[index] += 1
        elif protocol == "cumulative":
            for index, points in vote.items():
                scores[int(index)] += points
        else:
            for place, index in enumerate(vote):
                scores[index] += min(5, n) - place
    return [i for i, score in enumerate(scores) if score == max(scores)]


def names(protocol: str, text: str) -> list[str] | None:
    """The answers a statement names, or None when it is unreadable."""
    read = STATEMENTS.get(STATED[protocol]).read(text)
    if read is None or protocol != "cumulative":
        return read
    return [answer for answer, _ in read]


def falls_back(protocol: str, text: str) -> bool:
    """Whether mad-eval counts the rule's fallback for a statement (the voter's own answer):
    it is unreadable, or its points or ranking name an answer no voter gave."""
    if protocol not in STATED:
        return False
    named = names(protocol, text)
    return named is None or (protocol != "approval" and NO_ONES in named)


def own_alone(protocol: str, voters: list[Voter], i: int) -> bool:
    """Whether the rule counts voter i for its own answer alone (its fallback)."""
    rule = get_rule(RULE[protocol])
    assert isinstance(rule, Weighted)
    groups = answer_groups(voters, same)
    weights = rule.weights(voters[i], groups, same, len(voters))
    return [g for g, _ in weights] == [rule.own(voters[i], groups)]


def vote_covering(case: dict[str, Any], voters: list[Voter], mine: Voter | None) -> list[str]:
    protocol, solutions = case["protocol"], case["solutions"]
    top = tally(case)
    found = []
    if len(top) > 1 and mine and any(agree(mine.answer, solutions[i]) for i in top):
        found.append("tie")
    if any(agree(a, b) for i, a in enumerate(solutions) for b in solutions[i + 1 :]):
        found.append("pooled")
    dropped = [i for i in range(len(solutions)) if accepted(case, i) is None]
    if any(
        falls_back(protocol, voters[i].text) and own_alone(protocol, voters, i) for i in dropped
    ):
        found.append("dropped")
    counted = [r["vote"] for i in range(len(solutions)) if (r := accepted(case, i))]
    if protocol in ("approval", "ranked") and any(len(set(v)) < len(v) for v in counted):
        found.append("repeat")
    return found


@pytest.mark.parametrize("protocol", list(RULE))
def test_the_vote_decides_what_mallm_decides(protocol: str) -> None:
    differences = SUITE.ledger(protocol)
    chosen = [c for c in cases("vote") if c["protocol"] == protocol]
    for case in chosen:
        top = tally(case)
        assert (len(top) == 1) == case["decided"], f"{case['id']}: the tally is not MALLM's"
        voters = ballot(case)
        mine = pick(RULE[protocol], voters, case["id"])
        theirs = case["answer"] if case["decided"] else None
        if (mine is None and theirs is None) or agree(mine and mine.answer, theirs):
            continue
        differences.found(case["id"], vote_covering(case, voters, mine))
    differences.check(len(chosen))


def test_statements_refuse_what_mallm_refuses() -> None:
    """A reply MALLM refuses for its values (points that do not sum to exactly 10, negative
    points, a solution out of range, more than 5 ranked) is refused by mad-eval too, written
    as its statement: it falls back, or, an approval of no voter's answer, approves nothing;
    a reply MALLM counts reads back as the same vote."""
    checked = 0
    for case in cases("vote"):
        protocol, solutions = case["protocol"], case["solutions"]
        if protocol not in STATED:
            continue
        for replies in case["replies"]:
            for reply in replies:
                means = reply["vote"] if reply["ok"] else reply["means"]
                if means is None:
                    continue  # not even MALLM's format: nothing to write as a statement
                checked += 1
                text = statement(protocol, means, solutions)
                named = names(protocol, text)
                counts = not falls_back(protocol, text) and any(a != NO_ONES for a in named or [])
                assert counts == reply["ok"], f"{case['id']}: {reply['text']!r} as {text!r}"
                if reply["ok"] and protocol != "cumulative":
                    assert named == [solutions[int(i)] for i in means if int(i) < len(solutions)]
    assert checked >= 1000


# ---- paradigms --------------------------------------------------------------------------------


class Marking(Backend):
    """Answers each request with a mark of its round and agent, and records, for each
    request, the marks its messages hold, in order."""

    spec = "marking"

    def __init__(self, seats: dict[int, tuple[int, int]]):
        self.seats = seats  # seed -> (round, agent)
        self.reads: dict[tuple[int, int], list[tuple[int, int]]] = {}

    async def generate(self, request: Request) -> Generation:
        round_, agent = self.seats[request.sampling.seed]
        found = []
        for index, message in enumerate(request.messages):
            for r, a in self.seats.values():
                at = str(message["content"]).find(f"⟦r{r}a{a}⟧")
                if at >= 0:
                    found.append((index, at, a, r))
        self.reads[round_, agent] = [(a, r) for _, _, a, r in sorted(found)]
        return answered(f"⟦r{round_}a{agent}⟧ \\boxed{{{agent}}}", finish_reason="stop")


Event = tuple[int, list[tuple[int, int]]]  # (speaker, the (author, k-th reply) it reads)


def engine_events(paradigm: str, agents: int, rounds: int) -> list[Event]:
    """mad-eval's turns under the paradigm's preset, in speaking order: the speaker and the
    replies its prompt quotes, in order, each as (author, its author's k-th reply)."""
    choice = resolve(paradigm)
    protocol, template = choice.protocol, load_template(choice.prompt_template or "debate")
    config = RunConfig(protocol=paradigm, agents=agents, rounds=rounds, max_tokens=512)
    question = Question("q", "What is it?", "1", kind="number")
    seeds = {
        derive_seed(config.seed, 0, question.id, r, a): (r, a)
        for r in range(rounds + 1)
        for a in range(agents)
    }
    backend = Marking(seeds)
    seats = [
        Seat(agent, backend, Fitter(EstimateCounter("bare")), None, Speaker(template, i, agents))
        for i, agent in enumerate(config.team())
    ]
    turns: list[Turn] = []
    asyncio.run(Engine(config, protocol, seats, {}, turns.append).debate(0, question))
    return [
        (agent, backend.reads[round_, agent])
        for round_ in range(rounds + 1)
        for wave in protocol.schedule(round_, agents)
        for agent in wave
    ]


def mallm_events(case: dict[str, Any]) -> list[Event]:
    """MALLM's turns in speaking order (turn k: agent k % n), each read as mad-eval's are.
    Under report its moderator opens every turn: its first draft, read by no one before,
    has no counterpart in mad-eval, whose moderator reports after the others; from then on
    the moderator's k-th reply is mad-eval's (k-1)-th."""
    n = case["agents"]
    shift = 1 if case["paradigm"] == "report" else 0

    def reply(j: int) -> tuple[int, int]:
        author = j % n
        return author, j // n - (shift if author == 0 else 0)

    events = [(k % n, [reply(j) for j, _ in read]) for k, read in enumerate(case["reads"])]
    return events[1:] if shift else events


def latest_of_others(event: Event) -> dict[int, int]:
    """The latest reply of each other agent a turn reads (MALLM's opening draft aside)."""
    speaker, read = event
    latest: dict[int, int] = {}
    for author, k in read:
        if author != speaker and k >= 0:
            latest[author] = max(k, latest.get(author, k))
    return latest


def paradigm_covering(mine: Event, theirs: Event) -> list[str]:
    """The classes that explain how what MALLM's turn reads differs from mad-eval's; none
    when a message mad-eval quotes is not MALLM's, or one MALLM's holds is unexplained."""
    speaker, latest = theirs[0], latest_of_others(theirs)
    found = set()
    for author, k in set(theirs[1]) ^ set(mine[1]):
        if author == speaker:
            found.add("own")
        elif k < 0:
            found.add("opening")
        elif (author, k) in theirs[1] and k < latest[author]:
            found.add("history")
        else:
            return []
    common = [r for r in theirs[1] if r in mine[1]]
    if common != [r for r in mine[1] if r in theirs[1]]:
        found.add("order")
    return sorted(found)


@pytest.mark.slow
def test_each_agent_reads_whom_mallm_lets_it_read() -> None:
    """Memory, relay and report: every turn's speaker, and the latest reply of each other
    agent its request holds, are MALLM's; what else it holds differs only as declared."""
    differences = SUITE.ledger("paradigm")
    total = 0
    for case in cases("paradigm"):
        theirs = mallm_events(case)
        mine = engine_events(case["paradigm"], case["agents"], case["turns"] - 1)
        for k, (a, b) in enumerate(zip(mine, theirs, strict=False)):
            total += 1
            where = f"{case['id']}/turn {k}"
            assert a[0] == b[0], f"{where}: speaker {a[0]}, MALLM's {b[0]}"
            assert latest_of_others(a) == latest_of_others(b), f"{where}: {a[1]} against {b[1]}"
            if a[1] != b[1]:
                differences.found(where, paradigm_covering(a, b))
    differences.check(total)


def test_every_declared_difference_is_in_the_readme() -> None:
    readme = (FOLDER / "README.md").read_text(encoding="utf-8")
    for entry in declared()["class"] + declared()["design"]:
        assert f"**{entry['name']}**" in readme, entry["name"]
