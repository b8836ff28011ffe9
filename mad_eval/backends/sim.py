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
"""

from __future__ import annotations

import asyncio
import hashlib
import random
import re
from dataclasses import dataclass, fields
from functools import lru_cache

import numpy as np

from mad_eval.backends.base import Backend, BackendError, Generation, Request
from mad_eval.grading import LETTERS, equivalent, extract, same_answer
from mad_eval.records import Question


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
        ]
        for ok, message in checks:
            if not ok:
                raise BackendError(f"sim parameters: {message}.")

    def prior(self, k: int) -> np.ndarray:
        rest = (1.0 - self.p0) / (k - 1)
        return self.s0 * np.array([self.p0] + [rest] * (k - 1))


def _stable_int(text: str) -> int:
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")


@lru_cache(maxsize=65536)
def candidates(question_id: str, gold: str, k: int) -> tuple[str, ...]:
    """The gold answer, then k-1 distinct wrong answers derived deterministically from the id."""
    rng = random.Random(_stable_int(question_id))
    gold = gold.strip()
    try:
        base = int(gold)
    except ValueError:
        base = rng.randrange(10, 1000)
    wrong: list[str] = []
    spread = 9
    while len(wrong) < k - 1:
        guess = str(base + rng.choice((-1, 1)) * rng.randint(1, spread))
        spread += 3  # widen slowly so small golds still find enough distinct neighbours
        if guess not in wrong and not equivalent(guess, gold):
            wrong.append(guess)
    return (gold, *wrong)


def question_candidates(question: Question, k: int) -> tuple[str, ...]:
    """The answers an agent can give to `question`: its option letters (gold first) for a
    choice or preference, extractive summaries for a summary, else numbers near the gold."""
    if question.kind in ("choice", "preference"):
        letters = LETTERS[: len(question.options)]
        return (question.gold, *(letter for letter in letters if letter != question.gold))
    if question.kind == "summary":
        return summaries(question.id, question.text, k)
    return candidates(question.id, question.gold, k)


@lru_cache(maxsize=4096)
def summaries(question_id: str, text: str, k: int) -> tuple[str, ...]:
    """The article's first three sentences (the classic lead baseline), then k-1 other
    three-sentence extracts drawn from the id. The article is the text's longest paragraph,
    so an instruction put before it is never quoted."""
    article = max(text.split("\n\n"), key=len)
    sentences = [s for s in re.split(r"(?<=[.!?])\s+", article.strip()) if s]
    rng = random.Random(_stable_int(question_id))
    found = [" ".join(sentences[:3])]
    for _ in range(20 * k):  # short articles may not have k distinct extracts
        if len(found) == k:
            break
        picked = sorted(rng.sample(range(len(sentences)), min(3, len(sentences))))
        chosen = " ".join(sentences[i] for i in picked)
        if chosen not in found:
            found.append(chosen)
    while len(found) < k:
        found.append(found[-1])
    return tuple(found)


def _candidate_index(answer: str | None, options: tuple[str, ...], kind: str) -> int | None:
    if answer is None:
        return None
    if answer in options:
        return options.index(answer)
    same = same_answer(kind)
    return next((i for i, option in enumerate(options) if same(answer, option)), None)


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
                index = _candidate_index(extract(text, q.kind, q.options), options, q.kind)
                if index is not None:
                    counts[index] += 1
            critique_belief = rng.dirichlet(alpha)
            gold = np.eye(k)[0]
            beta = p.mbeta * ((1.0 - p.skill) * critique_belief + p.skill * gold)
            alpha = alpha + beta + p.w * counts

        theta = rng.dirichlet(alpha)
        answer = options[int(rng.choice(k, p=theta))]
        text = _reply(answer, len(peers), q.kind)
        words = _working(p.words, rng) + text.split(" ")  # keeps "\nSummary:" one word
        if p.think and p.words:
            words[0] = "<think>" + words[0]
            words[p.words - 1] += "</think>"
        # A word is a token here: a reply longer than max_tokens is cut, as a server would.
        limit = request.sampling.max_tokens
        finish = "length" if len(words) > limit else "stop"
        return Generation(
            text=" ".join(words[:limit]),
            finish_reason=finish,
            prompt_tokens=sum(len(m["content"].split()) for m in request.messages),
            completion_tokens=min(len(words), limit),
            state={"alpha": [round(float(a), 6) for a in alpha]},
        )


def _reply(answer: str, peers: int, kind: str) -> str:
    """The reply's last words, in the form the kind's grader reads."""
    if kind == "summary":
        lead = f"Having weighed the {peers} summaries," if peers else "Having read the article,"
        return f"{lead} I write:\nSummary: {answer}"
    if peers:
        return f"Having weighed the {peers} answers, I settle on \\boxed{{{answer}}}"
    return f"Working through the problem, I get \\boxed{{{answer}}}"


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
