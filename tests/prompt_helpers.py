"""Debate prompts built the way the engine builds them, and read back, for tests."""

from __future__ import annotations

import re

from mad_eval.debate.context import EstimateCounter, Fitter
from mad_eval.debate.prompts import Said, Speaker, build_prompt
from mad_eval.records import Messages, Question
from mad_eval.settings.templates import load_template

_RESPONSE_BLOCK = re.compile(r'<response from="[^"\n]*">\n(.*?)\n</response>', re.DOTALL)


def debate_messages(
    question: str,
    texts: list[str],
    agent: int,
    template: str = "debate",
    kind: str = "math",
    agents: int | None = None,
) -> Messages:
    """Round 1 of agent `agent`, reading agents 0..len(texts)-1's round-0 `texts`."""
    history = [{j: Said(text) for j, text in enumerate(texts)}]
    speaker = Speaker(load_template(template), agent, agents or max(len(texts), agent + 1))
    sees = list(range(len(texts)))
    q = Question("q", question, "0", kind=kind)
    return build_prompt(speaker, q, history, sees, Fitter(EstimateCounter()), None).messages


def quoted_responses(prompt: str) -> list[str]:
    """The responses a default-layout debate prompt quotes, in order."""
    return _RESPONSE_BLOCK.findall(prompt)
