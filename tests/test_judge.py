"""The judge's rubric prompt and how its JSON answers are read: exact, strict, bounded."""

from __future__ import annotations

import json
import time

import pytest
from prompt_helpers import debate_messages

from mad_eval.debate.prompts import JUDGE_CRITERIA, judge_correction, judge_prompt
from mad_eval.judging.critique import JudgeFormatError, parse_scores

GOOD = {
    "conflict_identification": 2,
    "critique_correctness": 3,
    "critique_specificity": 1,
    "engagement_revision": 0,
}


def test_rubric_has_the_papers_four_criteria_and_ranges():
    assert {k: top for k, (top, _) in JUDGE_CRITERIA.items()} == {
        "conflict_identification": 2,
        "critique_correctness": 3,
        "critique_specificity": 2,
        "engagement_revision": 2,
    }


def test_judge_prompt_quotes_the_context_verbatim_and_the_reference_only_when_asked():
    context = debate_messages("What is 1+1?", ["\\boxed{2}", "\\boxed{3}"], agent=2)
    messages = judge_prompt(context, "Agent 1 added wrong. \\boxed{2}")
    assert messages[0]["role"] == "system"
    text = messages[1]["content"]
    assert context[-1]["content"] in text
    assert "<reply>\nAgent 1 added wrong. \\boxed{2}\n</reply>" in text
    assert "correct final answer" not in text
    for name, (top, _) in JUDGE_CRITERIA.items():
        assert f"- {name} (0 to {top}):" in text and f'"{name}": <integer>' in text
    with_gold = judge_prompt(context, "x", reference="2")[1]["content"]
    assert "The correct final answer is: 2" in with_gold


@pytest.mark.parametrize(
    "answer",
    [
        json.dumps(GOOD),
        "Scores follow.\n```json\n" + json.dumps(GOOD, indent=2) + "\n```\n",
        'First I thought {"conflict_identification": 0}. Final: ' + json.dumps(GOOD),
        json.dumps({"scores": GOOD, "note": "nested {braces} in text"}),
    ],
)
def test_well_formed_answers_are_read(answer):
    scores = parse_scores(answer)
    assert scores.values == GOOD and scores.total == 6


@pytest.mark.parametrize(
    "answer, problem",
    [
        ("The reply is good, I'd give it 7/9.", "it holds no JSON object."),
        ("{not json at all}", "it holds no JSON object."),
        (json.dumps({**GOOD, "critique_correctness": 4}), '"critique_correctness" must be an '),
        (json.dumps({**GOOD, "conflict_identification": -1}), "from 0 to 2, not -1."),
        (json.dumps({**GOOD, "critique_specificity": 1.5}), "not 1.5."),
        (json.dumps({**GOOD, "critique_specificity": "2"}), 'not "2".'),
        (json.dumps({**GOOD, "engagement_revision": True}), "not true."),
        (
            json.dumps({k: v for k, v in GOOD.items() if k != "engagement_revision"}),
            'no "engagement_revision".',
        ),
    ],
)
def test_malformed_answers_name_their_problem(answer, problem):
    with pytest.raises(JudgeFormatError) as caught:
        parse_scores(answer)
    assert problem in str(caught.value)
    assert str(caught.value) in judge_correction(str(caught.value))


@pytest.mark.parametrize(
    "hostile",
    ["{" * 1_000_000, '{"a":' * 100_000 + "1" + "}" * 100_000, "[" * 500_000 + "{" * 500_000],
)
def test_hostile_answers_fail_in_bounded_time(hostile):
    start = time.perf_counter()
    with pytest.raises(JudgeFormatError):
        parse_scores(hostile)
    # Generous: quadratic work on this text would take hours, load slows linear work only
    # by a factor.
    assert time.perf_counter() - start < 60
