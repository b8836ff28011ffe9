"""The protocol hooks that shape a debate beyond its reading graph: the speaking schedule
within a round (in order, by groups), each agent's role per round, a stop rule, the final
decision, and params() from the constructor; run through the real engine on the simulated
agents."""

from __future__ import annotations

import asyncio
import json
import textwrap
from collections.abc import Sequence

import pytest
from factories import sim_run

from mad_eval.backends import Backend, Generation, Request, make_backend
from mad_eval.debate.engine import Engine, shared_seats, to_ask_again
from mad_eval.grading.grader import Grade
from mad_eval.protocols import Decision, Protocol, ProtocolError, Role, check_protocol
from mad_eval.protocols.decentralized import Decentralized
from mad_eval.records import Question, Turn
from mad_eval.settings.config import RunConfig

QUESTIONS = [Question(f"q{i}", f"What is {i} + 1?", str(i + 1)) for i in range(3)]


class OneByOne(Decentralized):
    """Everyone reads everyone, one agent after another within each round."""

    name = "one-by-one"

    def schedule(self, round_: int, n_agents: int) -> list[list[int]]:
        return [[agent] for agent in range(n_agents)]


class Pairs(Decentralized):
    """Agents 0 and 1 speak first, together; then 2 and 3."""

    name = "pairs"

    def schedule(self, round_: int, n_agents: int) -> list[list[int]]:
        return [[0, 1], [2, 3]]


class Brief(Decentralized):
    """Ends after round 1, whatever --rounds says."""

    name = "brief"

    def stop(self, rounds: Sequence[Sequence[Turn]]) -> str | None:
        return "it is brief" if len(rounds) == 2 else None


class Judged(Decentralized):
    """Agent 2 judges from round 1 on, under a persona of its own, and alone decides."""

    name = "judged"

    def role(self, agent: int, round_: int, n_agents: int) -> Role | None:
        if agent == 2 and round_ >= 1:
            return Role(persona="You are the judge.", template="personas")
        return None

    def decision(self, n_agents: int) -> Decision:
        return Decision("hub", [2], 2)


class Logging(Backend):
    """The simulated agents, logging every request in the order it was sent."""

    spec = "sim"

    def __init__(self) -> None:
        self.inner = make_backend("sim:p0=0.5")
        self.sent: list[Request] = []

    async def generate(self, request: Request) -> Generation:
        self.sent.append(request)
        return await self.inner.generate(request)


def debate(protocol: Protocol, agents: int = 3, rounds: int = 1, done=None):
    config = RunConfig(agents=agents, rounds=rounds, max_tokens=64)
    backend = Logging()
    turns: list[Turn] = []
    progress: list[int] = []
    seats = shared_seats(config, backend)
    engine = Engine(config, protocol, seats, done or {}, turns.append, progress.append)
    asyncio.run(engine.run(QUESTIONS[:1]))
    return {t.key[2:]: t for t in turns}, backend.sent, sum(progress)


def test_one_by_one_agents_read_what_was_said_before_them_in_the_same_round():
    turns, sent, _ = debate(OneByOne(), agents=3, rounds=1)
    assert [turns[0, i].sees for i in range(3)] == [[], [0], [0, 1]]
    # Round 1: agent 1 reads agent 0's round-1 reply, its own and agent 2's of round 0.
    assert turns[1, 1].sees == [0, 1, 2]
    request = next(r for r in sent if r.messages and r.sampling.seed == turns[1, 1].seed)
    assert request.quoted == (turns[1, 0].text, turns[0, 1].text, turns[0, 2].text)
    # Each agent's request waited for the one before it.
    seeds = [r.sampling.seed for r in sent]
    assert seeds == [turns[r, i].seed for r in range(2) for i in range(3)]


def test_groups_speak_in_turn_and_together_within_a_group():
    turns, _, _ = debate(Pairs(), agents=4, rounds=0)
    assert [turns[0, i].sees for i in range(4)] == [[], [], [0, 1], [0, 1]]


def test_a_stop_rule_ends_the_debate_and_a_resumed_one_stops_where_it_did():
    turns, _, progress = debate(Brief(), agents=3, rounds=3)
    assert sorted({round_ for round_, _ in turns}) == [0, 1]
    assert progress == 3 * 4  # the rounds it ended without count as done
    done = {(0, "q0", *key): turn for key, turn in turns.items()}
    again, sent, progress = debate(Brief(), agents=3, rounds=3, done=done)
    assert sent == [] and again == {} and progress == 3 * 4


def test_a_role_gives_an_agent_another_persona_and_template_for_a_round():
    turns, sent, _ = debate(Judged(), agents=3, rounds=1)
    judge = next(r for r in sent if r.sampling.seed == turns[1, 2].seed)
    assert "You are the judge." in json.dumps(judge.messages)
    others = [r for r in sent if r is not judge]
    assert all("You are the judge." not in json.dumps(r.messages) for r in others)


def test_the_decision_names_who_votes_and_whose_answer_counts(tmp_path, monkeypatch):
    (tmp_path / "hooked.py").write_text(PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    sim_run(tmp_path / "r", agents=3, rounds=1, limit=2, protocol="hooked:Judging:judge=2")
    manifest = json.loads((tmp_path / "r" / "manifest.json").read_text())
    protocol = manifest["protocol"]
    assert (protocol["voters"], protocol["hub"], protocol["score"]) == ([2], 2, "hub")
    assert protocol["params"] == {"judge": 2}  # from __init__, with no params() written


PLUGIN = textwrap.dedent(
    """\
    from mad_eval.protocols import Decision, Protocol

    class Judging(Protocol):
        name = "judging"
        description = "agents 0 and 1 debate in turn; the judge reads both, last, and decides"

        def __init__(self, judge=2):
            self.judge = judge

        def sees(self, agent, n_agents):
            return [0, 1] if agent == self.judge else [0, 1][: agent + 1]

        def schedule(self, round_, n_agents):
            return [[0], [1], [self.judge]]

        def decision(self, n_agents):
            return Decision("hub", [self.judge], self.judge)
    """
)


def test_a_faulty_schedule_role_or_decision_is_one_sentence():
    class Skips(Decentralized):
        def schedule(self, round_, n_agents):
            return [[0], [2]]

    class Roles(Decentralized):
        def role(self, agent, round_, n_agents):
            return "judge"

    class Nobody(Decentralized):
        def decision(self, n_agents):
            return Decision(None, [])

    with pytest.raises(ProtocolError, match=r"schedule\(0\) returned \[\[0\], \[2\]\]; every"):
        check_protocol(Skips(), 3)
    with pytest.raises(ProtocolError, match=r"role\(0, 0\) returned 'judge'; it must return"):
        check_protocol(Roles(), 3)
    with pytest.raises(ProtocolError, match="voters\\(\\) is empty"):
        check_protocol(Nobody(), 3)
    with pytest.raises(ProtocolError, match=r"schedule\(1\)"):

        class Later(Decentralized):
            def schedule(self, round_, n_agents):
                return [[0, 1, 2]] if round_ == 0 else [[0, 1]]

        check_protocol(Later(), 3, rounds=1)


def test_retrying_a_failed_turn_asks_again_whoever_read_it_in_the_same_round():
    turns, _, _ = debate(OneByOne(), agents=3, rounds=1)
    done = {(0, "q0", *key): turn for key, turn in turns.items()}
    done[0, "q0", 0, 1].error = "RequestError: refused"
    again = to_ask_again(done, OneByOne(), 3)
    # Agent 2 read agent 1 in round 0; everyone reads agent 1 or 2 in round 1.
    assert again == {(0, "q0", 0, 1), (0, "q0", 0, 2)} | {(0, "q0", 1, i) for i in range(3)}
    assert to_ask_again(done, Decentralized(), 3) == {(0, "q0", 0, 1)} | {
        (0, "q0", 1, i) for i in range(3)
    }


def test_params_come_from_the_constructor():
    class Ring(Protocol):
        name = "ring"
        description = "a ring"

        def __init__(self, width: int = 1, *extra: int, label: str = "r", **more: int):
            self.width = width
            self.label = label

        def sees(self, agent, n_agents):
            return [agent]

    assert Ring(3).params() == {"width": 3, "label": "r"}
    assert Decentralized().params() == {}


def test_a_turn_is_made_from_a_generation_and_its_grade():
    generation = Generation(text="x", latency=0.123456, truncated=True, attempts=2, cached=True)
    turn = Turn.from_generation(
        (0, "q", 1, 2),
        generation,
        Grade("4", True),
        model="sim",
        seed=1,
        temperature=1.0,
        top_p=1.0,
        max_tokens=8,
        messages_hash="h",
        sees=[0],
    )
    assert turn.key == (0, "q", 1, 2)
    assert (turn.truncated_in_reasoning, turn.latency, turn.attempts, turn.cached) == (
        True,
        0.1235,
        2,
        True,
    )
    assert (turn.answer, turn.correct, turn.text) == ("4", True, "x")
