"""LLM-judge critique scores: reading and checking the judge's JSON answer.

A judge's answer is model output, so it is read defensively: only the last JSON object in
the text counts (fenced or not), every criterion must be present as an integer in its
range, and nothing is guessed. A bad answer raises JudgeFormatError with one sentence the
judge is shown once as a correction; a second bad answer is a judge failure, never a zero.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from mad_eval.prompts import JUDGE_CRITERIA

MAX_SCANNED = 20_000  # characters read from the end of an answer: the JSON comes last
MAX_OBJECTS = 200  # opening braces tried, so hostile text costs bounded time


class JudgeFormatError(ValueError):
    """The judge's answer holds no usable scores; the message says what is wrong."""


@dataclass(frozen=True)
class Scores:
    values: dict[str, int]  # criterion -> score, in JUDGE_CRITERIA order

    @property
    def total(self) -> int:
        return sum(self.values.values())


def parse_scores(text: str) -> Scores:
    """The scores in a judge's answer, or JudgeFormatError naming the first problem."""
    found = _last_object(text[-MAX_SCANNED:])
    if found is None:
        raise JudgeFormatError("it holds no JSON object.")
    values = {}
    for name, (top, _) in JUDGE_CRITERIA.items():
        if name not in found:
            raise JudgeFormatError(f'the JSON object has no "{name}".')
        value = found[name]
        if type(value) is not int or not 0 <= value <= top:
            raise JudgeFormatError(
                f'"{name}" must be an integer from 0 to {top}, not {json.dumps(value)}.'
            )
        values[name] = value
    return Scores(values)


def _last_object(text: str) -> dict | None:
    """The last JSON object in the text that names a criterion; code fences are skipped
    over naturally, since only the object itself is decoded."""
    decoder = json.JSONDecoder()
    starts = [i for i, c in enumerate(text) if c == "{"][-MAX_OBJECTS:]
    for start in reversed(starts):
        try:
            value, _ = decoder.raw_decode(text, start)
        except (ValueError, RecursionError):
            continue
        if isinstance(value, dict) and any(name in value for name in JUDGE_CRITERIA):
            return value
    return None
