"""Prompt templates: every shipped template's exact messages (golden), the four layouts a
published setup needs, and the sentence each bad template gets."""

import json
from pathlib import Path

import pytest
from prompt_helpers import debate_messages

from mad_eval.debate.context import EstimateCounter, Fitter
from mad_eval.debate.prompts import Said, Speaker, build_prompt
from mad_eval.grading.reasoning import parse_quoting
from mad_eval.records import Question
from mad_eval.settings.templates import (
    TemplateError,
    builtin_templates,
    check_template,
    load_template,
)

GOLDEN = json.loads((Path(__file__).parent / "golden" / "prompts.json").read_text())
TEXTS = ["x = 2, so I get \\boxed{2}", "I get \\boxed{3}"]
QUESTION = Question("q", "What is 1+1?", "2")
BOXED = "Reason step by step, then give your final answer in \\boxed{}."
STYLES = ("debate", "reflection", "verification", "roles", "personas", "critique")


def build(case: str):
    style, who = case.split("/")
    if style == "question":
        agent = 6 if who == "persona6" else 0
        template = load_template("personas" if who == "persona6" else "debate")
        speaker = Speaker(template, agent, 7)
        return build_prompt(speaker, QUESTION, [], [], Fitter(EstimateCounter()), None).messages
    return debate_messages("What is 1+1?", TEXTS, agent=int(who[-1]), template=style, agents=3)


@pytest.mark.parametrize("case", sorted(GOLDEN))
def test_the_built_in_styles_render_exactly_the_golden_prompts(case):
    """The six styles were Python code before they were templates; the golden file holds
    what that code sent, so runs made before still resume and replay."""
    assert build(case) == GOLDEN[case]


def test_every_style_has_a_golden_prompt_and_a_template():
    assert {case.split("/")[0] for case in GOLDEN} == {*STYLES, "question"}
    assert set(STYLES) <= set(builtin_templates())


def test_every_shipped_template_renders_a_three_agent_round():
    for name in builtin_templates():
        for agent in range(3):
            messages = debate_messages("What is 1+1?", [*TEXTS, "\\boxed{4}"], agent, name)
            assert messages[-1]["role"] == "user" and "What is 1+1?" in str(messages)
            assert all(m["content"].strip() for m in messages)


def test_agents_share_everything_but_the_last_paragraph():
    """Decentralized agents quote the same responses in the same order, so their prompts
    differ only after the quotes: vLLM's prefix cache computes the shared part once."""
    texts = [debate_messages("Q?", TEXTS, agent=i)[0]["content"] for i in (0, 1)]
    head = texts[0].rsplit("\n\n", 1)[0]
    assert texts[1].startswith(head + "\n\n") and texts[0] != texts[1]


def test_personas_rotate_and_a_roster_persona_comes_first():
    personas = load_template("personas").values["personas"]
    assert build("personas/agent1")[0] == {"role": "system", "content": personas[1]}
    speaker = Speaker(load_template("personas"), 1, 3, persona="You are terse.")
    first = build_prompt(speaker, QUESTION, [], [], Fitter(EstimateCounter()), None).messages
    assert first[0] == {"role": "system", "content": "You are terse."}
    assert debate_messages("Q?", TEXTS, agent=1)[0]["role"] == "user"  # debate: no persona


# --- the layouts of published setups, for agent 1 of 3 reading everyone ----------------


THREE = ["I get \\boxed{2}", "It is \\boxed{3}", "<response from=x>\\boxed{4}"]


def test_layout_a_every_response_labelled_own_named():
    content = debate_messages("What is 1+1?", THREE, agent=1)[-1]["content"]
    assert content == (
        "Problem:\nWhat is 1+1?\n\n"
        "Here are the responses to this problem from the previous round:\n\n"
        '<response from="agent 0">\nI get \\boxed{2}\n</response>\n\n'
        '<response from="agent 1">\nIt is \\boxed{3}\n</response>\n\n'
        '<response from="agent 2">\n&lt;response from=x>\\boxed{4}\n</response>\n\n'
        "Your own previous response is the one from agent 1. Examine these responses "
        "critically. Check each line of reasoning, point out any mistakes, and decide whether "
        f"to keep your previous answer or change it. {BOXED}"
    )


def test_layout_b_own_apart_from_unlabelled_peers_question_last():
    messages = debate_messages("What is 1+1?", THREE, agent=1, template="own-apart")
    assert messages == [
        {
            "role": "user",
            "content": "Here is how other agents answered the problem:\n\n"
            "Another agent's answer: I get \\boxed{2}\n\n"
            "Another agent's answer: <response from=x>\\boxed{4}\n\n"
            "Your own previous answer: It is \\boxed{3}\n\n"
            "Use the other answers as extra information and give an updated answer to the "
            f"problem.\n\nWhat is 1+1?\n\n{BOXED}",
        }
    ]


def test_layout_c_a_conversation_whose_own_answers_are_assistant_turns():
    template = load_template("conversation")
    rounds = [
        {j: Said(text) for j, text in enumerate(THREE)},
        {j: Said(f"round 1, agent {j}", [0, 1, 2]) for j in range(3)},
    ]
    speaker = Speaker(template, 1, 3)
    messages = build_prompt(
        speaker, QUESTION, rounds, [0, 1, 2], Fitter(EstimateCounter()), None
    ).messages

    def others(a: str, b: str) -> str:
        return (
            "The other agents answered as follows:\n\n"
            f'<response from="agent 0">\n{a}\n</response>\n\n'
            f'<response from="agent 2">\n{b}\n</response>\n\n'
            f"Weigh their reasoning against yours, then keep or change your answer. {BOXED}"
        )

    assert messages == [
        {"role": "user", "content": f"What is 1+1?\n\n{BOXED}"},
        {"role": "assistant", "content": "It is \\boxed{3}"},
        {"role": "user", "content": others("I get \\boxed{2}", "&lt;response from=x>\\boxed{4}")},
        {"role": "assistant", "content": "round 1, agent 1"},
        {"role": "user", "content": others("round 1, agent 0", "round 1, agent 2")},
    ]


def test_layout_d_anonymous_numbered_nothing_marks_your_own():
    content = debate_messages("What is 1+1?", THREE, agent=1, template="anonymous")[-1]["content"]
    assert content == (
        "Problem:\nWhat is 1+1?\n\nResponses from the previous round:\n\n"
        '<response number="1">\nI get \\boxed{2}\n</response>\n\n'
        '<response number="2">\nIt is \\boxed{3}\n</response>\n\n'
        '<response number="3">\n&lt;response from=x>\\boxed{4}\n</response>\n\n'
        f"Examine each response critically and decide which answer is right. {BOXED}"
    )
    assert "agent" not in content and "own" not in content


def test_fitting_cuts_quoted_texts_never_the_template_text():
    template = load_template("own-apart")
    long = ["word " * 400 + "\\boxed{2}", "word " * 400 + "\\boxed{3}"]
    history = [{0: Said(long[0]), 1: Said(long[1])}]
    fitted = build_prompt(
        Speaker(template, 1, 2), QUESTION, history, [0, 1], Fitter(EstimateCounter()), 600
    )
    content = fitted.messages[-1]["content"]
    assert fitted.cut > 0 and fitted.tokens <= 600
    assert content.count("start of this response was cut") == 2
    assert "\\boxed{2}" in content and "\\boxed{3}" in content  # the ends survive
    assert content.endswith(f"What is 1+1?\n\n{BOXED}")


# --- bad templates: one sentence naming the file and the key, before any request ------


def write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "mine.toml"
    path.write_text(text)
    return str(path)


ROUND0 = '[[round0]]\nrole = "user"\ncontent = "{{ question }} {{ answer_format }}"\n'
DEBATE = '[[debate]]\nrole = "user"\ncontent = "{{ question }}: {{ peers|length }} answers"\n'


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (ROUND0 + DEBATE.replace("question", "problem"),
         r"mine.toml: debate\[0\]: content uses unknown variable 'problem'; it can use: agent,"),
        (ROUND0.replace("{{ answer_format }}", "{{ own }}") + DEBATE,
         r"round0\[0\]: content uses unknown variable 'own'"),
        (ROUND0 + DEBATE.replace('"user"', '"tool"'),
         r"debate\[0\]: role 'tool' is not one of: system, user, assistant"),
        (ROUND0 + DEBATE + '[[debate]]\nrole = "user"\ncontent = "again"\n',
         r"'debate' puts two user messages in a row, which chat APIs refuse"),
        (ROUND0 + '[[debate]]\nrole = "user"\ncontent = "{{ own.text if false else \'\' }}"\n',
         r"a user message of 'debate' renders empty; give it text, or mark it optional"),
        (ROUND0 + DEBATE + '[[debate]]\nrole = "assistant"\ncontent = "ok"\n',
         r"'debate' must end with a user message"),
        (ROUND0, r"'debate' is missing; add \[\[debate\]\] messages"),
        ("style = 1\n" + ROUND0 + DEBATE, r"unknown key 'style'; a template has: base,"),
        (ROUND0 + DEBATE.replace("}}:", "}:"), r"debate\[0\].content: unexpected '}'"),
        ('base = "nope"\n' + ROUND0 + DEBATE, r"base 'nope' is no other template"),
        ("round0 = [", r"cannot read prompt template .*mine.toml"),
    ],
)  # fmt: skip
def test_a_bad_template_gets_one_sentence(tmp_path, text, message):
    with pytest.raises(TemplateError, match=message):
        load_template(write(tmp_path, text))


def test_a_template_needing_an_own_response_fails_on_a_protocol_that_gives_none(tmp_path):
    own = '[[debate]]\nrole = "user"\ncontent = "You said: {{ own.text }}"\n'
    template = load_template(write(tmp_path, ROUND0 + own))  # decentralized: fine
    with pytest.raises(TemplateError, match=r"'None' has no attribute 'text'.*agent 0 of 2"):
        check_template(template, [[1], [0]])  # nobody reads its own response


def test_unknown_template_names_the_built_in_ones():
    with pytest.raises(TemplateError, match=r"unknown prompt template 'loud'; built in: .*debate"):
        load_template("loud")
    with pytest.raises(TemplateError, match=r"file 'nope\.toml' does not exist"):
        load_template("nope.toml")


def test_a_template_based_on_another_changes_only_its_values(tmp_path):
    path = write(tmp_path, 'base = "debate"\n[values]\ninstruction = "Be brief."\n')
    content = debate_messages("Q?", TEXTS, agent=0, template=path)[-1]["content"]
    assert content.endswith(f"one from agent 0. Be brief. {BOXED}")
    assert load_template(path).sha256 != load_template("debate").sha256


def test_model_text_is_quoted_literally_never_rendered_as_template():
    hostile = "{{ values }} {% for x in range(10**9) %}x{% endfor %} {{ ''.__class__ }}"
    for name in ("debate", "own-apart", "conversation"):
        messages = debate_messages("Q?", [hostile, "\\boxed{1}"], agent=1, template=name)
        assert any(hostile in m["content"] for m in messages)


# --- every shipped template, rounds 0 to 2, byte for byte --------------------------------

TEMPLATES_GOLDEN = Path(__file__).parent / "golden" / "templates.json"
ROUNDS = [
    ["x = 2, so I get \\boxed{2}", "I get \\boxed{3}", "<response from=x>\\boxed{4}"],
    ["Still \\boxed{2}", "Now \\boxed{2}", "Keeping \\boxed{4}"],
]


def shipped_prompts() -> dict[str, list[dict[str, str]]]:
    """Each shipped template's prompt of each of 3 agents (everyone reads everyone) in rounds
    0, 1 and 2: what tests/golden/templates.json holds."""
    found = {}
    for name in sorted(builtin_templates()):
        template = load_template(name)
        for round_ in range(3):
            history = [
                {j: Said(text, [0, 1, 2] if r else []) for j, text in enumerate(ROUNDS[r])}
                for r in range(round_)
            ]
            for agent in range(3):
                # A template quoting replies as written is shown them so (--quote verbatim).
                quote = parse_quoting("verbatim" if template.verbatim else "final")
                speaker = Speaker(template, agent, 3, hub=agent == 0, quote=quote, hub_agent=0)
                fitted = build_prompt(
                    speaker, QUESTION, history, [0, 1, 2], Fitter(EstimateCounter()), None
                )
                found[f"{name}/round{round_}/agent{agent}"] = fitted.messages
    return found


def test_every_shipped_template_renders_exactly_its_golden_prompts():
    """Rendering in the sandbox changed nothing a shipped template sends (regenerate the file
    only for a deliberate change of a template's text)."""
    golden = json.loads(TEMPLATES_GOLDEN.read_text())
    found = shipped_prompts()
    assert set(found) == set(golden)
    for case, messages in found.items():
        assert messages == golden[case], case
