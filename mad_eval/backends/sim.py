"""Simulated debate agents: the Dirichlet-compound-multinomial model of debate with private
critique, so every feature runs offline with the dynamics the theory predicts.

Over K candidate answers (the gold first, then K-1 wrong ones derived from the question id;
for a choice or preference question its option letters, the gold's first; for a summary the
article's lead sentences first, then other extracts),
an agent holds Dirichlet pseudo-counts alpha. Round 0: alpha = s0 * (p0, (1-p0)/(K-1), ...).
Each answer is y ~ Categorical(theta), theta ~ Dirichlet(alpha). In a debate round the agent
counts the answers quoted in its prompt (c), draws a private critique
beta = mbeta * ((1 - skill) * theta' + skill * e_gold) with theta' ~ Dirichlet(alpha), and
updates alpha <- alpha + beta + w * c. skill = 0 is the martingale case (no drift); with
skill > 0 the expected belief in the gold rises by
mbeta * skill * (1 - p) / (|alpha| + mbeta + w * |c|).

Other frameworks' shapes need no parameter (docs/explanation/debate-theory.md): a reply read
from the same round counts like one from the round before, a summary is one reply stating one
answer, a judge updates like any agent and ends the debate once its belief in its answer
reaches `end`, and what a rule asks a reply to state is written from theta (_stated).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, fields

import numpy as np

from mad_eval.backends.base import (
    Backend,
    BackendError,
    BackendType,
    Generation,
    Request,
    Where,
    answered,
)
from mad_eval.grading.answers import get_answer_protocol
from mad_eval.grading.grader import check_answer_protocol, extract
from mad_eval.grading.kinds import Kind, get_kind
from mad_eval.grading.kinds.math import numbers_near
from mad_eval.grading.kinds.summary import summaries as summary_extracts
from mad_eval.records import Question
from mad_eval.voting.statements import POINTS, STATEMENTS


@dataclass(frozen=True)
class SimParams:
    p0: float = 0.5  # initial mean belief in the gold answer
    s0: float = 2.0  # initial concentration (total pseudo-count)
    k: int = 4  # number of candidate answers
    mbeta: float = 2.0  # mass of the private critique per round
    skill: float = 0.5  # critique skill lambda: pull of the critique towards the gold
    w: float = 1.0  # weight of each peer answer read
    delay: float = 0.0  # seconds each generation takes, to mimic a server
    words: int = 0  # words of working written before the answer, to exercise context budgets
    think: int = 0  # 1: wrap that working in <think>...</think>, as reasoning models do
    end: float = 0.6  # a judge's verdict ends the debate once its belief in its answer reaches it

    @classmethod
    def parse(cls, text: str) -> SimParams:
        """Parse 'p0=0.4,s0=2,k=4,...' (every key optional)."""
        types = {f.name: f.type for f in fields(cls)}
        values: dict[str, float | int] = {}
        for item in filter(None, (part.strip() for part in text.split(","))):
            key, _, raw = item.partition("=")
            key = key.strip()
            if key not in types:
                raise BackendError(
                    f"unknown simulated-agent parameter '{key}'; accepted: {', '.join(types)}."
                )
            try:
                values[key] = int(raw) if types[key] == "int" else float(raw)
            except ValueError:
                raise BackendError(f"sim parameter {key} must be a number, got '{raw}'.") from None
        params = cls(**values)  # type: ignore[arg-type]
        params.validate()
        return params

    def validate(self) -> None:
        checks = [
            (0.0 <= self.p0 <= 1.0, "p0 must lie in [0, 1]"),
            (self.s0 > 0, "s0 must be positive"),
            (self.k >= 2, "k must be at least 2"),
            (self.mbeta >= 0, "mbeta must be >= 0"),
            (0.0 <= self.skill <= 1.0, "skill must lie in [0, 1]"),
            (self.w >= 0, "w must be >= 0"),
            (self.delay >= 0, "delay must be >= 0"),
            (self.words >= 0, "words must be >= 0"),
            (self.think in (0, 1), "think must be 0 or 1"),
            (0.0 <= self.end <= 1.0, "end must lie in [0, 1]"),
        ]
        for ok, message in checks:
            if not ok:
                raise BackendError(f"sim parameters: {message}.")

    def prior(self, k: int) -> np.ndarray:
        rest = (1.0 - self.p0) / (k - 1)
        return self.s0 * np.array([self.p0] + [rest] * (k - 1))


# The candidates are the kinds' (mad_eval.grading.kinds); these names stay for the callers.
candidates = numbers_near
summaries = summary_extracts


def question_candidates(question: Question, k: int) -> tuple[str, ...]:
    """The answers an agent can give to `question`: its option letters (gold first) for a
    choice or preference, extractive summaries for a summary, else numbers near the gold."""
    return get_kind(question.kind).candidates(question, k)


def _candidate_index(answer: str | None, options: tuple[str, ...], kind: Kind) -> int | None:
    if answer is None:
        return None
    if answer in options:
        return options.index(answer)
    return next((i for i, option in enumerate(options) if kind.same(answer, option)), None)


class SimBackend(Backend):
    def __init__(self, params: SimParams, spec: str):
        self.params = params
        self.spec = spec

    async def generate(self, request: Request) -> Generation:
        p = self.params
        if p.delay:
            await asyncio.sleep(p.delay)
        rng = np.random.default_rng(request.sampling.seed)
        q = request.question
        options = question_candidates(q, p.k)
        k = len(options)
        alpha = np.array(request.state["alpha"]) if request.state else p.prior(k)

        peers = request.quoted
        if peers:
            counts = np.zeros(k)
            for text in peers:
                found = extract(text, q.kind, q.options, q.answer)
                index = _candidate_index(found, options, get_kind(q.kind))
                if index is not None:
                    counts[index] += 1
            critique_belief = rng.dirichlet(alpha)
            gold = np.eye(k)[0]
            beta = p.mbeta * ((1.0 - p.skill) * critique_belief + p.skill * gold)
            alpha = alpha + beta + p.w * counts

        theta = rng.dirichlet(alpha)
        chosen = int(rng.choice(k, p=theta))
        answer = options[chosen]
        text = _reply(answer, len(peers), q)
        if request.asks:
            text += "\n" + "\n".join(_stated(request.asks, theta, options, chosen, p.end))
        words = _working(p.words, rng) + text.split(" ")  # keeps "\nSummary:" one word
        if p.think and p.words:
            words[0] = "<think>" + words[0]
            words[p.words - 1] += "</think>"
        # A word is a token here: a reply longer than max_tokens is cut, as a server would.
        limit = request.sampling.max_tokens
        finish = "length" if len(words) > limit else "stop"
        generation = answered(
            " ".join(words[:limit]),
            finish_reason=finish,
            prompt_tokens=sum(len(m["content"].split()) for m in request.messages),
            completion_tokens=min(len(words), limit),
            state={"alpha": [round(float(a), 6) for a in alpha]},
        )
        if generation.reasoning:
            generation.reasoning_tokens = min(p.words, limit)
        return generation


def _stated(
    asks: tuple[str, ...], theta: np.ndarray, options: tuple[str, ...], chosen: int, end: float
) -> list[str]:
    """The lines stating what the prompt asks for, from the belief `theta` the answer was
    drawn from (no further draw, so a run's answers are those of a run that asks nothing):
    its confidence is theta of its answer; it approves of every answer it believes at least
    half as much; it ranks and spreads 10 points by belief; a judge ends the debate once its
    belief in its answer reaches `end`."""
    order = [int(i) for i in np.argsort(-theta, kind="stable")]
    values = {
        "confidence": float(theta[chosen]),
        "approval": [options[i] for i in order if theta[i] >= theta[chosen] / 2],
        "ranking": [options[i] for i in order],
        "points": _points(theta, options, order),
        "verdict": "end" if theta[chosen] >= end else "continue",
    }
    return [STATEMENTS.get(name).write(values[name]) for name in asks]


def _points(theta: np.ndarray, options: tuple[str, ...], order: list[int]) -> list[tuple[str, int]]:
    """10 points over the three most believed answers, in proportion, rounded down."""
    top = order[:3]
    mass = float(sum(theta[i] for i in top)) or 1.0
    found = [(options[i], int(POINTS * theta[i] / mass)) for i in top]
    given = [(answer, points) for answer, points in found if points > 0]
    return given or [(options[top[0]], POINTS)]


def _reply(answer: str, peers: int, question: Question) -> str:
    """The reply's last words, the answer written as the question's answer protocol reads it."""
    protocol = get_answer_protocol(check_answer_protocol(question.kind, question.answer))
    if not get_kind(question.kind).voted:
        lead = f"Having weighed the {peers} summaries," if peers else "Having read the article,"
        lead += " I write"
    elif peers:
        lead = f"Having weighed the {peers} answers, I settle on"
    else:
        lead = "Working through the problem, I get"
    joint = ":\n" if protocol.own_line else " "
    return f"{lead}{joint}{protocol.write(answer)}"


_VOCABULARY = [
    "so",
    "then",
    "let",
    "we",
    "check",
    "the",
    "step",
    "value",
    "term",
    "sum",
    "gives",
    "thus",
    "next",
    "case",
]


def _working(n: int, rng: np.random.Generator) -> list[str]:
    """n words of filler reasoning, drawn after the answer so they never change it."""
    return [_VOCABULARY[i] for i in rng.integers(len(_VOCABULARY), size=n)] if n else []


def _build(spec: str, params: str, where: Where) -> SimBackend:
    return SimBackend(SimParams.parse(params), spec)


TYPE = BackendType(
    name="sim",
    usage="sim[:p0=...,s0=...] for simulated agents",
    build=_build,
)
