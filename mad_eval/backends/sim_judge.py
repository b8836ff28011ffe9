"""A simulated LLM judge, so `mad-eval judge` runs offline like every other feature.

It does not read reasoning. It scores what it can check in the judge prompt: whether the
quoted responses disagree (conflict), whether the reply's answer is the gold (correctness,
engagement), plus seeded slips; with probability `bad` an answer is malformed (no JSON, a
score out of range, a criterion missing), which exercises the correction and the failures.
Use it to try the pipeline, never as a measurement.
"""

from __future__ import annotations

import asyncio
import json

import numpy as np

from mad_eval.backends.base import Backend, BackendError, BackendType, Generation, Request, Where
from mad_eval.grading.grader import extract, grade
from mad_eval.grading.rubric import JUDGE_CRITERIA
from mad_eval.records import Question

MALFORMED = (
    "The reply engages well with the other responses.",
    '{"conflict_identification": 7, "critique_correctness": 1, "critique_specificity": 1, '
    '"engagement_revision": 1}',
    '{"conflict_identification": 1, "critique_correctness": 1}',
)


class SimJudge(Backend):
    def __init__(self, bad: float, delay: float, spec: str):
        self.bad, self.delay, self.spec = bad, delay, spec

    @classmethod
    def parse(cls, spec: str) -> SimJudge:
        """'sim-judge[:bad=0.1,delay=0]'."""
        values = {"bad": 0.0, "delay": 0.0}
        for item in filter(None, (p.strip() for p in spec.partition(":")[2].split(","))):
            key, _, raw = item.partition("=")
            if key not in values:
                raise BackendError(f"unknown sim-judge parameter '{key}'; accepted: bad, delay.")
            try:
                values[key] = float(raw)
            except ValueError:
                raise BackendError(f"sim-judge {key} must be a number, got '{raw}'.") from None
        if not 0.0 <= values["bad"] <= 1.0 or values["delay"] < 0:
            raise BackendError("sim-judge: bad must lie in [0, 1] and delay be >= 0.")
        return cls(values["bad"], values["delay"], spec)

    async def generate(self, request: Request) -> Generation:
        if self.delay:
            await asyncio.sleep(self.delay)
        rng = np.random.default_rng(request.sampling.seed)
        if rng.random() < self.bad:
            text = MALFORMED[int(rng.integers(len(MALFORMED)))]
        else:
            text = "Scores:\n" + json.dumps(self._scores(request, rng))
        return Generation(text=text, finish_reason="stop", completion_tokens=len(text.split()))

    def _scores(self, request: Request, rng: np.random.Generator) -> dict[str, int]:
        *quoted, reply = request.quoted or ("",)
        q = request.question
        answers = {a for a in (extract(text, q.kind, q.options, q.answer) for text in quoted) if a}
        right = _right(reply, q)
        peer_right = any(_right(text, q) for text in quoted)
        scores = {
            "conflict_identification": 2 if len(answers) > 1 else 0,
            "critique_correctness": 3 if right else 1,
            "critique_specificity": 1 + int(rng.random() < 0.5),
            "engagement_revision": 2 if right else int(peer_right),
        }
        slips = rng.random(len(scores)) < 0.2
        return {
            name: max(0, min(JUDGE_CRITERIA[name][0], value - int(slip)))
            for (name, value), slip in zip(scores.items(), slips, strict=True)
        }


def _right(text: str, question: Question) -> bool:
    """A right answer; for a summary, one with ROUGE-L F1 of at least 0.3 to the reference."""
    graded = grade(text, question.gold, question.kind, question.options, question.answer)
    if graded.rouge is not None:
        return graded.rouge["rougeL"] >= 0.3
    return bool(graded.correct)


def _build(spec: str, params: str, where: Where) -> SimJudge:
    return SimJudge.parse(spec)


TYPE = BackendType(
    name="sim-judge",
    usage="or sim-judge[:bad=...] for a simulated judge",
    build=_build,
)
