"""A message repeated over a list (`repeat`), and `said`: every earlier reply an agent reads or
wrote, in the order said. ChatEval's layout needs both (templates/chateval.toml)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mad_eval.settings.templates import Quote, Step, TemplateError, load_template

LAYOUT = """
[[round0]]
role = "user"
content = "{{ question }}"

[[debate]]
role = "user"
content = "{{ question }}"

[[debate]]
role = "assistant"
repeat = "said"
content = "{{ item.label }}: {{ item.text }}"

[[debate]]
role = "user"
content = "Go on."
"""


def write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "t.toml"
    path.write_text(text, encoding="utf-8")
    return str(path)


def quote(agent: int, text: str) -> Quote:
    return Quote(agent, f"agent {agent}", text, agent == 0, final=text)


def test_a_repeated_message_is_sent_once_per_item_in_order(tmp_path: Path) -> None:
    template = load_template(write(tmp_path, LAYOUT))
    assert template.transcript
    said = (quote(1, "b"), quote(0, "a"), quote(1, "c"))
    common = {"question": "Q?", "answer_format": "", "agent": 0, "agents": 2, "persona": ""}
    messages = template.render({**common, "role": "", "hub": None}, [Step(1, (), None, said)])
    assert messages == [
        {"role": "user", "content": "Q?"},
        {"role": "assistant", "content": "agent 1: b"},
        {"role": "assistant", "content": "agent 0: a"},
        {"role": "assistant", "content": "agent 1: c"},
        {"role": "user", "content": "Go on."},
    ]


def test_templates_without_said_gather_no_transcript() -> None:
    assert not load_template("debate").transcript
    assert load_template("chateval").transcript


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ('repeat = "said"', "'repeat' must name one of"),  # in round 0
        ('repeat = "nothing"', "'repeat' must name one of"),
    ],
)
def test_a_bad_repeat_is_refused(tmp_path: Path, change: str, problem: str) -> None:
    text = LAYOUT.replace(
        'role = "user"\ncontent = "{{ question }}"', f'role = "user"\n{change}\ncontent = "x"', 1
    )
    with pytest.raises(TemplateError, match=problem):
        load_template(write(tmp_path, text))


def test_item_is_known_only_in_a_repeated_message(tmp_path: Path) -> None:
    with pytest.raises(TemplateError, match="unknown variable 'item'"):
        load_template(
            write(tmp_path, LAYOUT.replace('content = "Go on."', 'content = "{{ item }}"'))
        )


def test_two_messages_of_one_role_are_still_refused_unless_repeated(tmp_path: Path) -> None:
    text = LAYOUT.replace('repeat = "said"\n', "").replace("{{ item.label }}: {{ item.text }}", "x")
    text = text.replace('content = "Go on."', 'content = "x"')
    text = text.replace(
        '[[debate]]\nrole = "user"\ncontent = "x"', '[[debate]]\nrole = "assistant"\ncontent = "x"'
    )
    with pytest.raises(TemplateError, match="two assistant messages in a row"):
        load_template(write(tmp_path, text))
