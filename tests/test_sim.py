"""The simulated agents: parameters, determinism, and the drift theorem they must obey."""

from __future__ import annotations

import asyncio

import pytest

from mad_eval.backends import BackendError, Request, Sampling, make_backend
from mad_eval.backends.sim import SimParams, candidates
from mad_eval.debate.engine import Engine, shared_seats
from mad_eval.grading.grader import extract_answer
from mad_eval.protocols import resolve
from mad_eval.records import Question, Turn
from mad_eval.settings.config import RunConfig

DECENTRALIZED = resolve("decentralized").protocol


def test_spec_parses_every_key():
    params = SimParams.parse("p0=0.4,s0=2,k=4,mbeta=2,skill=0.5,w=1")
    assert params == SimParams(p0=0.4, s0=2.0, k=4, mbeta=2.0, skill=0.5, w=1.0)
    assert SimParams.parse("") == SimParams()


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        ("sim:foo=1", "unknown simulated-agent parameter 'foo'"),
        ("sim:p0=high", "p0 must be a number"),
        ("sim:p0=1.5", "p0 must lie in [0, 1]"),
        ("sim:k=1", "k must be at least 2"),
    ],
)
def test_bad_spec_is_one_clear_sentence(spec, words):
    with pytest.raises(BackendError, match=words.replace("[", r"\[").replace("]", r"\]")):
        make_backend(spec)


def test_candidates_are_distinct_and_hold_the_gold_first():
    options = candidates("q-7", "025", 6)
    assert options[0] == "025"
    assert len(set(options)) == 6
    assert "25" not in options[1:]  # equal to the gold as a number, so never a wrong option
    assert candidates("q-7", "025", 6) == options
    latex = candidates("math-1", "\\frac{14}{3}", 4)
    assert latex[0] == "\\frac{14}{3}" and len(set(latex)) == 4


def test_same_seed_same_answer_and_state():
    backend = make_backend("sim:p0=0.5")
    question = Question("q1", "What is 2+2?", "4")
    request = Request(
        [{"role": "user", "content": question.text}], Sampling(1.0, 0.9, 64, seed=11), question
    )
    first = asyncio.run(backend.generate(request))
    second = asyncio.run(backend.generate(request))
    assert first == second
    assert first.text.endswith("}")
    assert extract_answer(first.text) in candidates("q1", "4", 4)
    assert first.state["alpha"] == pytest.approx([1.0, 1 / 3, 1 / 3, 1 / 3], abs=1e-6)


def mean_accuracy_by_round(spec: str, agents: int, rounds: int, questions: int) -> list[float]:
    """Run the real engine (prompts, protocol, grading) over synthetic questions."""
    config = RunConfig(agents=agents, rounds=rounds, model=spec, max_tokens=64, seed=3)
    turns: list[Turn] = []
    seats = shared_seats(config, make_backend(spec))
    engine = Engine(config, DECENTRALIZED, seats, {}, turns.append)
    items = [Question(f"q{i}", f"Question {i}?", str(100 + i)) for i in range(questions)]
    asyncio.run(engine.run(items))
    assert len(turns) == questions * agents * (rounds + 1)
    return [
        sum(t.correct for t in turns if t.round == r) / (questions * agents)
        for r in range(rounds + 1)
    ]


@pytest.mark.slow
def test_no_critique_skill_means_no_drift():
    """skill = 0 is the martingale case: mean agent accuracy stays at p0 round after round."""
    accuracy = mean_accuracy_by_round("sim:p0=0.4,s0=2,k=4,mbeta=2,skill=0,w=1", 3, 2, 3000)
    for value in accuracy:
        assert value == pytest.approx(0.4, abs=0.02)


@pytest.mark.slow
def test_critique_skill_drifts_by_the_theorem():
    """Round 1 mean accuracy is p0 + delta / (s0 + mbeta + w|N(i)|), delta = mbeta*skill*(1-p0)."""
    p0, s0, mbeta, skill, w, agents = 0.4, 2.0, 2.0, 0.5, 1.0, 3
    spec = f"sim:p0={p0},s0={s0},k=4,mbeta={mbeta},skill={skill},w={w}"
    accuracy = mean_accuracy_by_round(spec, agents, 1, 3000)
    delta = mbeta * skill * (1 - p0)
    expected = p0 + delta / (s0 + mbeta + w * agents)  # decentralized: each sees all N
    assert accuracy[0] == pytest.approx(p0, abs=0.02)
    assert accuracy[1] == pytest.approx(expected, abs=0.02)
    assert accuracy[1] - accuracy[0] > 0.05
