"""A run folder from someone else is data: a record of the wrong type, or of no turn of the
run, is named by its file and line in one sentence and never counted, by every command that
reads it; a folder whose manifest.json is gone is not adopted; a benchmark question that
holds a lone surrogate runs."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

import mad_eval
from mad_eval.errors import UserError
from mad_eval.records import Question

RUN = dict(benchmark="arith", limit=4, agents=3, rounds=2, runs=1)  # 36 turns
Lines = list[str]


@pytest.fixture(scope="module")
def judged(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished simulated run with its critiques judged: the folder every case edits."""
    root = tmp_path_factory.mktemp("hostile") / "base"
    mad_eval.run(out=root, **RUN)
    mad_eval.judge(root, "sim-judge", rounds="1")
    return root


@pytest.fixture()
def folder(judged: Path, tmp_path: Path) -> Path:
    root = tmp_path / "run"
    shutil.copytree(judged, root)
    return root


def edit_turn(number: int, **fields: object) -> Callable[[Lines], Lines]:
    """Line `number` (from 1) of turns.jsonl with `fields` set."""

    def edit(lines: Lines) -> Lines:
        turn = json.loads(lines[number - 1])
        turn.update(fields)
        lines[number - 1] = json.dumps(turn)
        return lines

    return edit


def add_turns(count: int, **fields: object) -> Callable[[Lines], Lines]:
    """`count` copies of the first turn with `fields` set (and agents 0, 1, ...) added."""

    def edit(lines: Lines) -> Lines:
        for agent in range(count):
            turn = {**json.loads(lines[0]), "agent": agent % RUN["agents"], **fields}
            turn["round"] = agent // RUN["agents"]
            lines.append(json.dumps(turn))
        return lines

    return edit


def add_line(text: str) -> Callable[[Lines], Lines]:
    return lambda lines: [*lines, text]


# (edit of turns.jsonl, the line named, what the sentence says of it)
CASES = {
    "round 'zero'": (edit_turn(13, round="zero"), 13, "\"round\" is 'zero', not an integer"),
    "a JSON array": (add_line("[1, 2]"), 37, "a JSON list, not an object"),
    "a number": (add_line("7"), 37, "a JSON int, not an object"),
    "run true": (edit_turn(5, run=True), 5, '"run" is True, not an integer'),
    "run 5 of 1": (add_turns(1, run=5), 37, "run 5 is not one of its runs (only 0)"),
    # (the index of keys says it is no run of it; reading the whole line, no count)
    "run -1": (add_turns(1, run=-1), 37, '-1 is not one of its runs|"run" is -1, not a count'),
    "question not in questions.jsonl": (
        add_turns(9, question="elsewhere-7"),
        37,
        "question 'elsewhere-7' is not one of its questions",
    ),
    "agent 3 of 3": (edit_turn(2, agent=3), 2, "agent 3 is not one of its agents (0..2)"),
    "round 3 of 0..2": (edit_turn(30, round=3), 30, "round 3 is not one of its rounds (0..2)"),
    "negative tokens": (
        edit_turn(8, completion_tokens=-5),
        8,
        '"completion_tokens" is -5, not a count',
    ),
    "tokens as text": (
        edit_turn(9, prompt_tokens="lots"),
        9,
        "\"prompt_tokens\" is 'lots', not an integer or null",
    ),
    "text a number": (edit_turn(4, text=12345), 4, '"text" is 12345, not text or null'),
    "reads agent 9": (edit_turn(20, sees=[0, 9]), 20, "it reads agents [0, 9]"),
    "unknown field": (edit_turn(6, verdict="yes"), 6, "unexpected keyword argument 'verdict'"),
}


def corrupt(root: Path, edit: Callable[[Lines], Lines]) -> None:
    path = root / "turns.jsonl"
    path.write_text("".join(line + "\n" for line in edit(path.read_text().splitlines())))


def refusal(call: Callable[[], object]) -> str:
    """The one sentence a call refuses with."""
    with pytest.raises(UserError) as info:
        call()
    message = str(info.value)
    assert "\n" not in message and message.endswith(".")
    return message


def every_reader(root: Path, tmp_path: Path) -> dict[str, Callable[[], object]]:
    return {
        "report": lambda: mad_eval.report(root),
        "load_run": lambda: mad_eval.load_run(root),
        "view": lambda: mad_eval.view([root], tmp_path / "site"),
        "resume": lambda: mad_eval.run(out=root, **RUN),
        "judge": lambda: mad_eval.judge(root, "sim-judge", rounds="1"),
    }


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES)
def test_a_record_that_does_not_belong_is_named_by_every_command_and_never_counted(
    folder, tmp_path, case
):
    edit, line, problem = CASES[case]
    corrupt(folder, edit)
    metrics = (folder / "metrics.json").read_bytes()
    turns = (folder / "turns.jsonl").read_bytes()
    for name, call in every_reader(folder, tmp_path).items():
        message = refusal(call)
        assert message.startswith(f"{folder / 'turns.jsonl'} line {line} "), (name, message)
        assert any(part in message for part in problem.split("|")), (name, message)
    # Nothing was counted, written or asked: the run's figures and records are as they were.
    assert (folder / "metrics.json").read_bytes() == metrics
    assert (folder / "turns.jsonl").read_bytes() == turns
    assert not (tmp_path / "site").exists()


def test_turns_jsonl_that_is_a_folder_is_one_sentence(folder, tmp_path):
    (folder / "turns.jsonl").unlink()
    (folder / "turns.jsonl").mkdir()
    for call in every_reader(folder, tmp_path).values():
        assert refusal(call) == (
            f"cannot read {folder / 'turns.jsonl'} (Is a directory); restore it from a copy."
        )


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"round": 7}, "round 7 is not one of its rounds (0..2)"),
        ({"question": "elsewhere-7"}, "question 'elsewhere-7' is not one of its questions"),
        ({"total": "high"}, "\"total\" is 'high', not an integer or null"),
        ({"scores": {"clarity": "good"}}, "\"scores\" holds 'good', not an integer"),
    ],
)
def test_a_foreign_or_broken_verdict_is_named_and_never_averaged(folder, tmp_path, fields, problem):
    path = folder / "judge.jsonl"
    verdict = {**json.loads(path.read_text().splitlines()[0]), **fields}
    with path.open("a") as f:
        f.write(json.dumps(verdict) + "\n")
    line = len(path.read_text().splitlines())
    for name in ("report", "load_run", "view", "judge"):
        message = refusal(every_reader(folder, tmp_path)[name])
        assert message.startswith(f"{path} line {line} "), (name, message)
        assert problem in message, (name, message)


def test_a_torn_last_line_is_still_a_crash_resumed_not_a_refusal(folder, tmp_path):
    before = mad_eval.load_run(folder).metrics
    with (folder / "turns.jsonl").open("a") as f:
        f.write('{"run": 0, "question": "arith-1", "round": "ze')  # killed mid-write
    assert mad_eval.load_run(folder).metrics == before
    after = mad_eval.run(out=folder, **RUN)
    assert after.metrics == before
    assert (folder / "turns.jsonl").read_text().endswith("}\n")  # cut, nothing asked again
    assert len((folder / "turns.jsonl").read_text().splitlines()) == 36


def test_a_folder_whose_manifest_was_deleted_is_not_adopted(tmp_path):
    root = tmp_path / "r"
    mad_eval.run(out=root, model="sim:p0=0.9", benchmark="arith", limit=5, agents=3, rounds=1)
    (root / "manifest.json").unlink()
    turns = (root / "turns.jsonl").read_bytes()
    other = dict(model="sim:p0=0.2", benchmark="arith", limit=5, agents=3, rounds=1)
    assert refusal(lambda: mad_eval.run(out=root, **other)) == (
        f"{root} has turns.jsonl but no manifest.json: restore manifest.json or use another out."
    )
    assert (root / "turns.jsonl").read_bytes() == turns and not (root / "manifest.json").exists()
    assert "no manifest.json" in refusal(lambda: mad_eval.report(root))
    (root / "turns.jsonl").unlink()  # a judged folder without its turns is no fresh start either
    (root / "judge.jsonl").write_text("")
    assert "has judge.jsonl but no manifest.json" in refusal(
        lambda: mad_eval.run(out=root, **other)
    )


SURROGATE = '{"id": "odd", "question": "What is 1 + 1? \\ud800 \\udfff", "answer": "2"}\n'


def test_a_lone_surrogate_in_a_question_runs_and_resumes(tmp_path):
    bench = tmp_path / "odd.jsonl"
    bench.write_text(SURROGATE + '{"id": "even", "question": "What is 2 + 2?", "answer": "4"}\n')
    first = mad_eval.run(out=tmp_path / "r", benchmark=str(bench), agents=2, rounds=1)
    recorded = [json.loads(line) for line in (tmp_path / "r" / "questions.jsonl").open()]
    assert recorded[0]["text"] == "What is 1 + 1? \ufffd \ufffd"
    turns = (tmp_path / "r" / "turns.jsonl").read_text()
    assert len(turns.splitlines()) == 8
    # Read again, the file gives the same question (and hash): the run resumes, asks nothing.
    again = mad_eval.run(out=tmp_path / "r", benchmark=str(bench), agents=2, rounds=1)
    assert again.metrics == first.metrics
    assert (tmp_path / "r" / "turns.jsonl").read_text() == turns


def test_a_questions_file_recorded_with_a_lone_surrogate_still_resumes(tmp_path):
    """A run begun before the load made it U+FFFD recorded the surrogate (then failed)."""
    bench = tmp_path / "odd.jsonl"
    bench.write_text(SURROGATE)
    root = tmp_path / "r"
    mad_eval.run(out=root, benchmark=str(bench), agents=2, rounds=1)
    (root / "turns.jsonl").write_text("")
    old = Question("odd", "What is 1 + 1? \ud800 \udfff", "2", {}, "math", "boxed")
    line = json.dumps(old.to_dict())  # as the earlier version wrote it (escaped)
    (root / "questions.jsonl").write_text(line + "\n")
    assert mad_eval.run(out=root, benchmark=str(bench), agents=2, rounds=1).maj is not None
    assert len((root / "turns.jsonl").read_text().splitlines()) == 4


@pytest.mark.slow
def test_the_command_line_refuses_a_corrupt_folder_in_one_line(folder):
    corrupt(folder, edit_turn(13, round="zero"))
    out = subprocess.run(
        [sys.executable, "-m", "mad_eval", "report", str(folder)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 2
    assert "Traceback" not in out.stderr
    assert out.stderr.strip().splitlines() == [
        f"error: {folder / 'turns.jsonl'} line 13 is not a turn record (\"round\" is 'zero', "
        "not an integer); fix or remove that line."
    ]
