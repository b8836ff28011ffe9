"""Every prompt the harness sends, so evaluation and training build identical contexts."""

from __future__ import annotations

import re

Messages = list[dict[str, str]]

ANSWER_FORMAT = "Reason step by step, then give your final answer in \\boxed{}."

# Each peer response is quoted inside these tags, so a reader (the simulated agents,
# the LLM judge) can take the prompt apart again without guessing.
RESPONSE_OPEN = '<response from="{who}">'
RESPONSE_CLOSE = "</response>"
_RESPONSE_BLOCK = re.compile(r'<response from="[^"\n]*">\n(.*?)\n</response>', re.DOTALL)


def question_prompt(question: str) -> Messages:
    """Round 0: the agent answers the question on its own."""
    return [{"role": "user", "content": f"{question}\n\n{ANSWER_FORMAT}"}]


def debate_prompt(question: str, responses: list[tuple[str, str]]) -> Messages:
    """Round t >= 1: the question, the quoted previous-round responses, and the request to
    weigh them. `responses` holds (who, text) pairs in the order the protocol chose."""
    quoted = "\n\n".join(
        f"{RESPONSE_OPEN.format(who=who)}\n{text}\n{RESPONSE_CLOSE}" for who, text in responses
    )
    content = (
        f"Problem:\n{question}\n\n"
        f"Here are the answers given to this problem in the previous round:\n\n{quoted}\n\n"
        "Examine these answers critically. Check each line of reasoning, point out any "
        "mistakes, and decide whether to keep your previous answer or change it. "
        f"{ANSWER_FORMAT}"
    )
    return [{"role": "user", "content": content}]


def quoted_responses(prompt: str) -> list[str]:
    """The peer responses quoted in a debate prompt, in order (inverse of debate_prompt)."""
    return _RESPONSE_BLOCK.findall(prompt)
