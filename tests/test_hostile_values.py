"""What the run-folder fuzz (tests/test_fuzz_folders.py) found past the record checks: values
of the wrong type or kind in a manifest's sections, a question's kind or answer protocol, a
judge's scores and setting, and values too long or too deep to quote. Each is one short
sentence from every reader, never a traceback deep in whatever read it."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from test_hostile_records import every_reader, judged, refusal  # noqa: F401

from mad_eval.grading.rubric import JUDGE_CRITERIA
from mad_eval.records import loads, shown

DEEP = "[" * 1000 + "]" * 1000  # as deep as a record may nest (foreign.MAX_DEPTH)
LONG = "y" * 100_000
ZEROS = dict.fromkeys(JUDGE_CRITERIA, 0)


@pytest.fixture()
def folder(judged: Path, tmp_path: Path) -> Path:  # noqa: F811
    root = tmp_path / "run"
    shutil.copytree(judged, root)
    return root


def refused_everywhere(root: Path, tmp_path: Path, file: str, problem: str) -> None:
    metrics = (root / "metrics.json").read_bytes()
    for name, call in every_reader(root, tmp_path).items():
        message = refusal(call)
        assert len(message) < 400, (name, len(message))
        if name == "resume" and "holds a run with a different configuration" in message:
            continue  # compared before it was read: refused as another run's, as briefly
        assert message.startswith(f"{root / file}"), (name, message)
        assert problem in message, (name, message)
    assert (root / "metrics.json").read_bytes() == metrics
    assert not (tmp_path / "site").exists()


def manifest_text(edit: Callable[[dict], None]) -> Callable[[Path], None]:
    def change(root: Path) -> None:
        manifest = json.loads((root / "manifest.json").read_text())
        edit(manifest)
        text = json.dumps(manifest).replace('"<DEEP>"', DEEP)
        (root / "manifest.json").write_text(text)

    return change


def section(name: str, key: str, value: object) -> Callable[[Path], None]:
    return manifest_text(lambda manifest: manifest[name].update({key: value}))


MANIFESTS = {
    # Each crashed a reader far from the manifest (AttributeError, TypeError: unhashable).
    "templates a text": (
        section("prompt", "prompt_templates", "debate"),
        '"prompt" "prompt_templates" is not an object',
    ),
    "a template a number": (
        section("prompt", "prompt_templates", {"debate": 7}),
        "holds a template that is no object",
    ),
    "a question id a list": (
        section("benchmark", "questions", ["arith-0", ["arith-1"]]),
        "\"benchmark\" \"questions\" is ('arith-0', ['arith-1']), not a list of str",
    ),
    "answer protocol a number": (section("benchmark", "answer", 1.5), '"answer" is 1.5'),
    "whom an agent reads a text": (section("protocol", "sees", "all"), "\"sees\" is 'all'"),
    "a seat's quote": (
        manifest_text(lambda m: m["team"][0].update(quote="3")),
        "quote must be final, full, tail:N or verbatim",
    ),
    "the run's quote": (
        section("config", "quote", "tail:0"),
        "quote must be final, full, tail:N or verbatim",
    ),
    "a command of numbers": (
        manifest_text(lambda m: m.update(command=[1, 2])),
        '"command" is (1, 2)',
    ),
    # Python's repr of a value nested 1,000 deep fails: the sentence elides it.
    "a deep value": (section("benchmark", "name", "<DEEP>"), '"name" is [[[...]]]'),
    # A 100,000-character value: quoted in a few dozen characters.
    "a long protocol": (
        section("benchmark", "answer", LONG),
        f"unknown answer protocol {shown(LONG, 80)}; known: boxed,",
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", MANIFESTS)
def test_a_manifest_value_of_the_wrong_kind_is_one_short_sentence(folder, tmp_path, case):
    change, problem = MANIFESTS[case]
    change(folder)
    refused_everywhere(folder, tmp_path, "manifest.json", problem)


def edit_line(path: Path, number: int, **fields: object) -> None:
    lines = path.read_text().splitlines()
    record = json.loads(lines[number - 1])
    record.update(fields)
    lines[number - 1] = json.dumps(record)
    path.write_text("\n".join(lines) + "\n")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"kind": "\u202e"}, "unknown benchmark kind '\\u202e'"),
        ({"answer": "boxed:x=1"}, "the boxed answer protocol takes no settings"),
        ({"kind": LONG}, f"unknown benchmark kind {shown(LONG, 80)}; known: math,"),
    ],
)
def test_a_question_of_no_kind_or_protocol_this_mad_eval_reads_is_refused(
    folder, tmp_path, fields, problem
):
    edit_line(folder / "questions.jsonl", 2, **fields)
    path = folder / "questions.jsonl"
    readers = every_reader(folder, tmp_path)
    for name in ("resume", "judge"):  # (report reads the golds alone; view notes it)
        message = refusal(readers[name])
        assert message.startswith(f"{path} line 2 is not a question ("), (name, message)
        assert problem in message, (name, message)
    readers["view"]()  # its pages say the prompts cannot be rebuilt, as for any such folder


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        # A forged score would be averaged as the judge's; one of no criterion raised KeyError.
        ({"scores": {"made_up": 2}}, "scores of other criteria than the rubric's"),
        (
            {"scores": {**ZEROS, "conflict_identification": 9}, "total": 9},
            "a conflict_identification score of 9, not 0 to 2",
        ),
        (
            {"scores": dict.fromkeys(ZEROS, 1), "total": 40},
            "a total that is not the sum of its scores",
        ),
        ({"scores": None, "total": 3}, "a total without scores"),
        ({"setting": {"judge": 1}}, '"setting" is not the fields of a judge setting'),
    ],
)
def test_a_verdict_is_held_to_the_rubric(folder, tmp_path, fields, problem):
    edit_line(folder / "judge.jsonl", 2, **fields)
    readers = every_reader(folder, tmp_path)
    for name in ("report", "load_run", "view"):
        message = refusal(readers[name])
        assert message.startswith(f"{folder / 'judge.jsonl'} line 2 "), (name, message)
        assert problem in message, (name, message)


def test_a_quoted_value_is_bounded_in_length_and_depth():
    assert shown("x" * 10) == "'xxxxxxxxxx'"
    assert len(shown(LONG)) == 40 and len(shown(LONG, 80)) == 80
    assert shown(f"/{LONG}/no-such-tokenizer", 80).endswith("y/no-such-tokenizer'")  # its end
    assert shown(loads(DEEP)) == "[[[...]]]"
    assert shown({"b": 1, "a": [1, 2, 3, 4, 5]}) == "{'b': 1, 'a': [1, 2, 3, 4, ...]}"
    assert shown(10**5000) == "a number too long to show"
