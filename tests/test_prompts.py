"""The exact prompt text of every style (golden file), and the prefix-cache layout."""

import json
from pathlib import Path

import pytest

from mad_eval.prompts import (
    PERSONAS,
    STYLES,
    debate_prompt,
    persona_for,
    question_prompt,
    quoted_responses,
    role_of,
)

GOLDEN = json.loads((Path(__file__).parent / "golden" / "prompts.json").read_text())
RESPONSES = [("agent 0", "x = 2, so I get \\boxed{2}"), ("agent 1", "I get \\boxed{3}")]


def build(case: str):
    kind, who = case.split("/")
    if kind == "question":
        persona = persona_for("personas", 6) if who == "persona6" else None
        return question_prompt("What is 1+1?", persona)
    agent = int(who.removeprefix("agent"))
    return debate_prompt(
        "What is 1+1?",
        RESPONSES,
        own=f"agent {agent}" if agent < 2 else None,
        style=kind,
        agent=agent,
        system=persona_for(kind, agent),
    )


@pytest.mark.parametrize("case", sorted(GOLDEN))
def test_prompt_text_is_exactly_the_golden_one(case):
    assert build(case) == GOLDEN[case]


def test_every_style_has_a_golden_prompt():
    assert {case.split("/")[0] for case in GOLDEN} == {*STYLES, "question"}


def test_styles_differ_only_in_the_instruction_after_the_quotes():
    prompts = {style: build(f"{style}/agent1")[-1]["content"] for style in STYLES}
    assert len(set(prompts.values())) == len(STYLES) - 1  # personas: same text, own system
    head = prompts["debate"].split("Your own previous response")[0]
    assert all(text.startswith(head) for text in prompts.values())


def test_agents_share_everything_but_the_last_paragraph():
    """Decentralized agents quote the same responses in the same order, so their prompts
    differ only after the quotes: vLLM's prefix cache computes the shared part once."""
    texts = [
        debate_prompt("Q?", RESPONSES, own=f"agent {i}", agent=i)[0]["content"] for i in (0, 1)
    ]
    head = texts[0].rsplit("\n\n", 1)[0]
    assert texts[1].startswith(head + "\n\n") and texts[0] != texts[1]


def test_quoted_responses_inverts_the_builder():
    content = debate_prompt("Q?", RESPONSES)[-1]["content"]
    assert quoted_responses(content) == [text for _, text in RESPONSES]


def test_roles_and_personas():
    assert [role_of(i) for i in range(4)] == ["advocate", "critic", "judge", "judge"]
    assert persona_for("debate", 3) is None
    assert persona_for("personas", 7) == PERSONAS[7 % len(PERSONAS)]
    assert persona_for("debate", 0, "You are terse.") == "You are terse."
    assert build("personas/agent1")[0] == {"role": "system", "content": PERSONAS[1]}
    with pytest.raises(ValueError, match="unknown prompt style 'loud'"):
        debate_prompt("Q?", RESPONSES, style="loud")
