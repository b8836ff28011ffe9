"""mad-eval against verl's DAPO reward, on the stored facts of conformance/dapo (replies and
golds, and what verl's math_dapo.compute_score made of each; no verl installed here):
`dapo` agrees on every case, `answer-line` everywhere but the declared differences, and no
declared difference has gone stale."""

from __future__ import annotations

import json
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mad_eval.grading.grader import grade
from mad_eval.grading.reasoning import drop_reasoning

FOLDER = Path(__file__).resolve().parent.parent / "conformance" / "dapo"
Case = dict[str, Any]


def _cases() -> list[Case]:
    with open(FOLDER / "cases.jsonl", encoding="utf-8") as lines:
        return [json.loads(line) for line in lines if line.strip()]


CASES = _cases()
DIFFERENCES = tomllib.loads((FOLDER / "differences.toml").read_text(encoding="utf-8"))

# The classes differences.toml may name: (the case, answer-line's verdict) -> whether in it.
PREDICATES: dict[str, Callable[[Case, bool], bool]] = {
    "answer_line_right_dapo_wrong": lambda case, ours: ours and not case["verl"]["acc"],
    "reasoning_in_reply": lambda case, ours: drop_reasoning(case["reply"]) != case["reply"],
}


def test_the_suite_is_large_and_pinned() -> None:
    meta = json.loads((FOLDER / "meta.json").read_text())
    assert len(CASES) == meta["cases"] >= 2000
    assert len({c["id"] for c in CASES}) == len(CASES)
    assert len(meta["commit"]) == 40 and meta["file"].endswith("math_dapo.py")
    # Both outcomes, every source and a fair share of adversarial replies are represented.
    assert 0.2 < sum(c["verl"]["acc"] for c in CASES) / len(CASES) < 0.8
    sources = {c["source"] for c in CASES}
    assert {"amc23", "aime24", "aime25", "math500", "adversarial", "window"} <= sources


def test_dapo_agrees_with_verl_on_every_case() -> None:
    differ = []
    for case in CASES:
        verl = case["verl"]
        graded = grade(case["reply"], case["gold"], "math", answer="dapo")
        # verl's "[INVALID]" is its no-answer; a reply may also write that text itself.
        wanted = {None, "[INVALID]"} if verl["pred"] == "[INVALID]" else {verl["pred"]}
        if graded.correct != verl["acc"] or graded.answer not in wanted:
            differ.append((case["id"], graded.answer, graded.correct, verl))
    assert not differ, f"{len(differ)} cases differ, e.g. {differ[:3]}"


def test_dapo_reads_what_verl_reads_in_a_run_too() -> None:
    """A turn is graded on its final content (split=False): the same, for a reply with no
    reasoning, as the whole reply verl reads."""
    plain = [c for c in CASES if drop_reasoning(c["reply"]) == c["reply"]][:500]
    for case in plain:
        whole = grade(case["reply"], case["gold"], "math", answer="dapo")
        final = grade(case["reply"], case["gold"], "math", answer="dapo", split=False)
        assert whole == final


@pytest.mark.slow
def test_answer_line_differs_from_verl_only_as_declared() -> None:
    declared = DIFFERENCES["answer-line"]
    by_id = {entry["id"]: entry["reason"] for entry in declared["case"]}
    classes = {entry["name"]: PREDICATES[entry["predicate"]] for entry in declared["class"]}
    assert all(entry["reason"].endswith(".") for entry in declared["class"] + declared["case"])
    undeclared, seen_ids, seen_classes = [], set(), set()
    for case in CASES:
        ours = bool(grade(case["reply"], case["gold"], "math", answer="answer-line").correct)
        if ours == case["verl"]["acc"]:
            continue
        if case["id"] in by_id:
            seen_ids.add(case["id"])
            continue
        hit = next((name for name, applies in classes.items() if applies(case, ours)), None)
        if hit is not None:
            seen_classes.add(hit)
        else:
            undeclared.append((case["id"], case["reply"][-80:], case["gold"], ours))
    assert not undeclared, f"{len(undeclared)} undeclared differences, e.g. {undeclared[:3]}"
    assert set(by_id) == seen_ids, f"declared but agreeing now: {set(by_id) - seen_ids}"
    assert set(classes) == seen_classes, f"classes with no case: {set(classes) - seen_classes}"


@pytest.mark.parametrize(
    ("reply", "gold"),
    [
        ("so\nAnswer:\n204", "204"),  # a newline right after the colon
        ("Answer: \\$204", "204"),  # an escaped dollar sign
        ("Answer: 12 \\mbox{ cm}^2", "12"),  # a unit with its power
        ("Answer: 1 000", "1000"),  # a space between thousands
        ("Answer: $\\pi$. I hope it is correct.", "\\pi"),
        ("Final Answer: The final answer is $8$. I hope it is correct.", "8"),
        ("Answer: \\text{36^\\circ}", "36"),
        (
            "Answer: \\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}",
            "\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}",
        ),
        ("Answer: 5x - 7y + 11z + 4 = 0.", "5x - 7y + 11z + 4 = 0"),  # an equation, whole
        ("Answer: 11,\\! 111,\\! 100", "11111100"),  # LaTeX's thousands separator
    ],
)
def test_answer_line_reads_what_it_misread_before(reply: str, gold: str) -> None:
    """The extraction bugs of issue 32 and those its cases found, each read right now."""
    assert grade(reply, gold, "math", answer="answer-line").correct


def test_answer_line_reads_every_real_gold_written_as_an_answer(shared_data: Path) -> None:
    golds = []
    for name in ("math500", "amc23", "aime24", "aime25"):
        with open(shared_data / f"{name}.jsonl", encoding="utf-8") as rows:
            golds += [json.loads(row)["answer"] for row in rows if row.strip()]
    misread = [
        (reply, gold)
        for gold in golds
        for reply in (f"So:\nAnswer: {gold}", f"So:\n**Answer:** ${gold}$.")
        if not grade(reply, gold, "math", answer="answer-line").correct
    ]
    assert not misread, misread[:3]


@pytest.mark.slow
def test_a_dapo_run_votes_on_verls_predictions(tmp_path: Path, shared_data: Path) -> None:
    """In a run, dapo's answers are verl's predictions: 1/2 and 0.5 are two answers (two
    classes), as verl's maj@K counts them, where math-verify would make them one."""
    from stub_server import StubServer

    import mad_eval

    def reply(body: dict) -> str:
        return f"So:\nAnswer: {'1/2' if body['seed'] % 2 else '0.5'}"

    with StubServer(reply=reply) as server:
        mad_eval.run(
            model="openai:stub-model", base_url=[server.base_url], benchmark="aime24_dapo",
            data_dir=shared_data, limit=1, agents=4, rounds=0, out=tmp_path / "r",
        )  # fmt: skip
    turns = [json.loads(line) for line in (tmp_path / "r" / "turns.jsonl").read_text().splitlines()]
    assert {t["answer"] for t in turns} == {"1/2", "0.5"}  # both drawn, both wrong
    classes = {t["answer"]: t["answer_class"] for t in turns}
    assert classes["1/2"] != classes["0.5"]
    # and every later reading of the run (reports, pairing, the viewer) compares the same way
    scoring = mad_eval.load_run(tmp_path / "r").scoring
    assert scoring.answer == "dapo" and not scoring.same("1/2", "0.5")
