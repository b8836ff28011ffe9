"""A run folder's files are data, read within bounds: one parser decides what a line holds (a
key field given twice is refused), a recorded verdict is held to its answer and its gold, a
manifest's counts to a run's limits, NaN and Infinity are refused as read and never written,
and only regular files are read, each bounded in size, nesting and digits: a FIFO, a device,
a link, a huge line, deep nesting or a long number is one sentence, never a hang, a memory
blow-up or a traceback."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import shutil
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import orjson
import pytest
from test_hostile_records import RUN, every_reader, judged, refusal  # noqa: F401

import mad_eval
from mad_eval import foreign
from mad_eval.errors import SuspiciousResult
from mad_eval.foreign import Unreadable, loads, open_regular, read_whole
from mad_eval.grading.grader import decider
from mad_eval.measure.alerts import UNCHECKED
from mad_eval.measure.formula import json_number
from mad_eval.measure.prices import load_prices
from mad_eval.records import Turn
from mad_eval.settings.config import ConfigError
from mad_eval.settings.roster import RosterError, load_roster_file
from mad_eval.store.files import StoreError, write_json
from mad_eval.store.grades import Grades

Lines = list[dict]


@pytest.fixture()
def folder(judged: Path, tmp_path: Path) -> Path:  # noqa: F811
    root = tmp_path / "run"
    shutil.copytree(judged, root)
    return root


class Blocked(BaseException):
    """The body of hang_guard blocked; no reader's `except OSError` or `Exception` takes it."""


@contextmanager
def hang_guard(seconds: int = 60) -> Iterator[None]:
    """Fail (never hang the suite) if the body blocks: a FIFO opened for reading waits for
    a writer forever. Not a speed figure: only a guard far above any real time."""

    def expire(signum: int, frame: object) -> None:
        raise Blocked(f"still blocked after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def turns_of(root: Path) -> Lines:
    return [json.loads(line) for line in (root / "turns.jsonl").read_text().splitlines()]


def write_turns(root: Path, turns: list[dict | str]) -> None:
    text = "".join((t if isinstance(t, str) else json.dumps(t)) + "\n" for t in turns)
    (root / "turns.jsonl").write_text(text)


def golds(root: Path) -> dict[str, str]:
    rows = [json.loads(line) for line in (root / "questions.jsonl").read_text().splitlines()]
    return {row["id"]: row["gold"] for row in rows}


def unchanged(root: Path, call: Callable[[], object]) -> str:
    """The one sentence `call` refuses with; nothing was written or counted meanwhile."""
    before = {name: (root / name).read_bytes() for name in ("metrics.json", "turns.jsonl")}
    message = refusal(call)
    assert {name: (root / name).read_bytes() for name in before} == before
    return message


def refused_by_every_reader(root: Path, tmp_path: Path, line: int, problem: str) -> None:
    for name, call in every_reader(root, tmp_path).items():
        message = unchanged(root, call)
        assert message.startswith(f"{root / 'turns.jsonl'} line {line} "), (name, message)
        assert problem in message, (name, message)
    assert not (tmp_path / "site").exists()


# --- one parser decides: a key field given twice ---------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize(
    ("field", "value", "problem"),
    [
        # The last line of arith-0's debate also says arith-1: that debate dropped out whole
        # (Maj of 3 questions over "4 questions").
        ("question", "arith-1", "gives \"question\" twice ('arith-0', then 'arith-1')"),
        # A turn of the same debate said twice: one of its turns was lost.
        ("agent", 1, 'gives "agent" twice (0, then 1)'),
        ("round", 2, 'gives "round" twice (0, then 2)'),
    ],
)
def test_a_key_field_given_twice_is_refused_by_every_reader(
    folder, tmp_path, field, value, problem
):
    turns = turns_of(folder)
    if field == "question":
        number = max(i for i, t in enumerate(turns) if t["question"] == "arith-0")
    else:
        number = next(i for i, t in enumerate(turns) if (t["round"], t["agent"]) == (0, 0))
    # A wrong answer of its own: graded alike whichever question the line is taken for.
    turns[number].update(answer="-99999", correct=False, answer_class=9)
    lines = [json.dumps(t) for t in turns]
    lines[number] = lines[number][:-1] + f", {json.dumps(field)}: {json.dumps(value)}}}"
    write_turns(folder, lines)
    refused_by_every_reader(folder, tmp_path, number + 1, problem)


# --- verdicts held to the answer and the gold ---------------------------------------------------


def forge(root: Path, pick: Callable[[dict], bool], **fields: object) -> int:
    """Every turn `pick` chooses given `fields`; the first one's line number (from 1)."""
    turns = turns_of(root)
    chosen = [i for i, t in enumerate(turns) if pick(t)]
    assert chosen, "no turn to forge"
    for i in chosen:
        turns[i].update(fields)
    write_turns(root, turns)
    return chosen[0] + 1


def wrong(turn: dict) -> bool:
    return turn["answer"] is not None and not turn["correct"]


def right(turn: dict) -> bool:
    return bool(turn["correct"])


@pytest.mark.parametrize(
    ("pick", "fields", "problem"),
    [
        # Every wrong answer claimed right, classes and all: Maj and Debate would read 100.
        (wrong, {"correct": True, "answer_class": 0}, "right against the gold"),
        (right, {"correct": False, "answer_class": 7}, "wrong against the gold"),
        (wrong, {"answer_class": 0}, "its answer class 0 says the opposite of its verdict"),
        (wrong, {"answer": None, "correct": True, "answer_class": None}, "no answer as right"),
    ],
)
def test_a_forged_verdict_is_refused_by_every_reader(folder, tmp_path, pick, fields, problem):
    line = forge(folder, pick, **fields)
    refused_by_every_reader(folder, tmp_path, line, problem)
    message = refusal(lambda: mad_eval.train_pairs(folder, tmp_path / "pairs.jsonl"))
    assert message.startswith(f"{folder / 'turns.jsonl'} line {line} is not graded as its")


def test_the_refusal_names_the_answer_and_the_gold(folder):
    turns = turns_of(folder)
    line = forge(folder, wrong, correct=True, answer_class=0)
    turn = turns[line - 1]
    gold = golds(folder)[turn["question"]]
    assert refusal(lambda: mad_eval.report(folder)) == (
        f"{folder / 'turns.jsonl'} line {line} is not graded as its answer and gold say: it "
        f"counts the answer {turn['answer']!r} right against the gold {gold!r}; remove that "
        "line (a resumed run asks it again), or open the folder it came from."
    )


def test_verdicts_without_golds_to_hold_them_to_are_said_to_be_unchecked(folder):
    honest = mad_eval.load_run(folder).metrics
    assert UNCHECKED not in honest["alerts"]
    (folder / "questions.jsonl").unlink()  # a folder from before the file (or one emptied)
    forge(folder, wrong, correct=True, answer_class=0)
    with pytest.warns(SuspiciousResult) as said:
        forged = mad_eval.report(folder)
    assert forged.maj == 100.0  # counted as recorded: there is no gold here to say otherwise
    assert UNCHECKED in forged.alerts
    assert UNCHECKED in json.loads((folder / "metrics.json").read_text())["alerts"]
    assert any(UNCHECKED in str(w.message) for w in said)


def test_a_questions_file_that_lacks_a_question_of_the_manifest_is_refused(folder):
    path = folder / "questions.jsonl"
    path.write_text("".join(path.read_text().splitlines(keepends=True)[1:]))
    assert refusal(lambda: mad_eval.report(folder)) == (
        f"{path} lacks 1 of the run's questions (e.g. 'arith-0'); restore it from a copy."
    )


def graded_turn(answer: str | None, correct: bool | None, **fields: object) -> Turn:
    return Turn(0, "q", 0, 0, "m", 0, 1.0, 1.0, 8, "h", [], "text", answer, correct, "stop",
                1, 1, 0.0, **fields)  # fmt: skip


@pytest.mark.parametrize(
    ("kind", "protocol", "gold", "answer", "verdict"),
    [
        ("math", None, "12", "12", True),
        ("math", None, "12", "+012", True),  # two integers: equal without math-verify
        ("math", None, "12", "13", False),
        ("math", None, "\\frac{1}{2}", "\\frac{1}{2}", True),
        ("math", None, "\\frac{1}{2}", "0.5", None),  # only math-verify says: it is not asked
        ("number", None, "3/4", "3/4", True),
        ("number", None, "3/4", "1", False),
        ("choice", None, "B", "A", False),
        ("math", "dapo", "12", "12", True),  # dapo's judge compares normalised strings
        ("math", "dapo", "12", "13", False),
        ("math", "math-verify", "12", "13", None),  # its verdict reads the whole reply
    ],
)
def test_a_verdict_is_decided_again_where_grading_is_pure_and_cheap(
    kind, protocol, gold, answer, verdict
):
    decide = decider(kind, protocol)
    assert (None if decide is None else decide(answer, gold)) is verdict
    grades = Grades({"q": gold}, kind, protocol)
    for claimed in (True, False):
        admitted = grades.admits(graded_turn(answer, claimed))
        assert admitted == (verdict is None or verdict is claimed)


def test_a_summary_and_a_failed_turn_are_not_held_to_a_verdict():
    assert Grades({"q": "a text"}, "summary", None).admits(graded_turn("other", None))
    failed = graded_turn(None, True, error="HTTP 500")
    assert Grades({"q": "12"}, "math", None).admits(failed)


def test_the_math_verify_protocols_verdicts_are_held_only_to_their_classes():
    """Its verdict read the whole reply (an answer it could not print may still be right):
    only the answer classes, made from the verdicts, must agree with them."""
    grades = Grades({"q": "12"}, "math", "math-verify")
    assert grades.admits(graded_turn(None, True))
    assert grades.admits(graded_turn("13", True, answer_class=0))
    assert not grades.admits(graded_turn("13", True, answer_class=2))
    assert not grades.admits(graded_turn(None, False, answer_class=1))


# --- a manifest's counts held to a run's limits ------------------------------------------------


def edit_manifest(root: Path, edit: Callable[[dict], None]) -> Path:
    path = root / "manifest.json"
    manifest = json.loads(path.read_text())
    edit(manifest)
    path.write_text(json.dumps(manifest))
    return path


def config(**values: object) -> Callable[[dict], None]:
    return lambda manifest: manifest["config"].update(values)


def protocol(**values: object) -> Callable[[dict], None]:
    return lambda manifest: manifest["protocol"].update(values)


@pytest.mark.parametrize(
    ("edit", "problem"),
    [
        (config(agents=100000), '"agents" is 100000: agents must be at most 1024'),
        (config(rounds=1001), '"rounds" is 1001: rounds must be at most 1000'),
        (config(runs=10**6), '"runs" is 1000000: runs must be at most 1000'),
        (config(runs=0), '"runs" is 0: runs must be at least 1'),
        (protocol(voters=[0, 1, 2, 10**7]), '"voters" are not distinct agents of the run'),
        (protocol(voters=[0, 0, 1]), '"voters" are not distinct agents of the run'),
        (protocol(hub=3), '"hub" is not an agent of the run'),
    ],
)
def test_a_manifest_past_a_runs_limits_is_refused_by_every_reader(folder, tmp_path, edit, problem):
    path = edit_manifest(folder, edit)
    for name, call in every_reader(folder, tmp_path).items():
        message = unchanged(folder, call)
        assert message.startswith(f"{path} is not a mad-eval run manifest ("), (name, message)
        assert problem in message, (name, message)


def test_a_new_run_keeps_the_same_limit_on_runs(tmp_path):
    with pytest.raises(ConfigError, match="runs must be at most 1000, got 1001"):
        mad_eval.run(out=tmp_path / "r", **{**RUN, "runs": 1001})


# --- NaN and Infinity: refused as read, never written --------------------------------------------


@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity"])
def test_a_number_json_has_not_is_refused_in_records_and_never_reaches_the_viewer(
    folder, tmp_path, number
):
    lines = (folder / "turns.jsonl").read_text().splitlines()
    lines[4] = re.sub(r'"latency": [^,]+', f'"latency": {number}', lines[4])
    (folder / "turns.jsonl").write_text("\n".join(lines) + "\n")
    refused_by_every_reader(folder, tmp_path, 5, "NaN or Infinity, which JSON has no number for")


def test_a_number_json_has_not_in_a_manifest_or_a_verdict_is_refused(folder, tmp_path):
    verdicts = folder / "judge.jsonl"
    lines = verdicts.read_text().splitlines()
    lines[1] = re.sub(r'"latency": [^,]+', '"latency": Infinity', lines[1])
    verdicts.write_text("\n".join(lines) + "\n")
    for reader in ("report", "load_run", "view", "judge"):
        message = unchanged(folder, every_reader(folder, tmp_path)[reader])
        assert message.startswith(f"{verdicts} line 2 is not a judge verdict (NaN or Infinity")
    path = folder / "manifest.json"
    path.write_text(path.read_text().replace('"temperature": 1.0', '"temperature": NaN', 1))
    message = refusal(lambda: mad_eval.report(folder))
    assert message.startswith(f"{path} is damaged (NaN or Infinity, which JSON has no number")


def test_huge_records_make_no_infinity_in_metrics_json(folder):
    """Each latency is finite, their sum is not: metrics.json says none, never Infinity."""
    forge(folder, lambda t: True, latency=1.7e308)
    mad_eval.report(folder)
    metrics = orjson.loads((folder / "metrics.json").read_bytes())  # strict JSON: no Infinity
    assert metrics["questions"] == 4
    assert json_number(math.inf) is None and json_number(math.nan) is None


def test_no_writer_writes_nan(tmp_path):
    with pytest.raises(StoreError, match="is NaN or Infinity, which JSON has no number for"):
        write_json(tmp_path / "m.json", {"x": [1.0, math.nan]}, "free space.")
    assert not (tmp_path / "m.json").exists()
    with pytest.raises(ValueError, match="holds NaN or Infinity"):
        dataclasses.replace(graded_turn("1", False), latency=math.inf).to_json()


# --- only regular files, each bounded ------------------------------------------------------------


@pytest.mark.parametrize("name", ["turns.jsonl", "manifest.json", "questions.jsonl", "judge.jsonl"])
def test_a_fifo_in_place_of_a_record_file_is_one_sentence_never_a_hang(folder, tmp_path, name):
    path = folder / name
    path.unlink()
    os.mkfifo(path)
    with hang_guard():
        for reader, call in every_reader(folder, tmp_path).items():
            message = refusal(call)
            assert f"cannot read {path} (a FIFO, not a regular file)" in message, (reader, message)


def test_a_fifo_in_place_of_metrics_json_is_written_over_never_read(folder, tmp_path):
    metrics = folder / "metrics.json"
    metrics.unlink()
    os.mkfifo(metrics)
    with hang_guard():
        mad_eval.view([folder], tmp_path / "site")  # its alerts: as recomputed
        run = mad_eval.report(folder)  # the single run it was paired with: none
    assert metrics.is_file() and json.loads(metrics.read_text())["maj"] == run.maj


@pytest.mark.parametrize("target", ["/dev/zero", "elsewhere.jsonl"])
def test_a_record_file_that_is_a_link_is_not_followed(folder, tmp_path, target):
    if target != "/dev/zero":  # a regular file elsewhere: refused all the same
        target = str(tmp_path / target)
        shutil.copy(folder / "turns.jsonl", target)
    (folder / "turns.jsonl").unlink()
    (folder / "turns.jsonl").symlink_to(target)
    with hang_guard():
        for reader, call in every_reader(folder, tmp_path).items():
            message = refusal(call)
            if reader == "resume":  # the run refuses to write through it before any read
                assert message.startswith(f"{folder / 'turns.jsonl'} is a symbolic link to")
            else:
                assert message == (
                    f"cannot read {folder / 'turns.jsonl'} (a symbolic link, which mad-eval "
                    "does not follow); restore it from a copy."
                ), reader


def test_a_device_is_never_read(folder):
    with pytest.raises(Unreadable, match="a character device, not a regular file"):
        open_regular(Path("/dev/zero"))
    assert refusal(lambda: load_prices(Path("/dev/zero"))) == (
        "prices file /dev/zero cannot be read: it is a FIFO or device, not a file."
    )
    assert refusal(lambda: mad_eval.report(folder, prices="/dev/zero")).startswith(
        "prices file /dev/zero cannot be read"
    )
    with pytest.raises(RosterError, match="it is a FIFO or device, not a file"):
        load_roster_file(Path("/dev/zero"))


def test_a_line_past_the_bound_is_named_before_more_of_it_is_read(folder, tmp_path, monkeypatch):
    monkeypatch.setattr(foreign, "MAX_LINE", 1 << 20)  # 1 MiB here, 128 MiB in use
    turns = turns_of(folder)
    turns[6]["text"] = "x" * (2 << 20)
    write_turns(folder, turns)
    for reader, call in every_reader(folder, tmp_path).items():
        assert refusal(call) == (
            f"{folder / 'turns.jsonl'} line 7 is longer than 1 MiB, more than any record "
            "mad-eval writes; remove that line."
        ), reader


def test_a_whole_file_past_its_bound_is_refused_unread(folder, monkeypatch):
    monkeypatch.setattr(foreign, "MAX_DOCUMENT", 1 << 20)  # 1 MiB here, 128 MiB in use
    path = edit_manifest(folder, lambda m: m["operational"].update(padding="x" * (2 << 20)))
    assert refusal(lambda: mad_eval.report(folder)) == (
        f"cannot read {path} (larger than 1 MiB, the most mad-eval reads of it)."
    )
    with pytest.raises(Unreadable):
        read_whole(path, 10)
    assert read_whole(path, 10**9) == path.read_bytes()


DEEP = "[" * 100_000 + "]" * 100_000


@pytest.mark.slow
@pytest.mark.parametrize(
    ("field", "value", "problem"),
    [
        ("state", f'{{"x": {DEEP}}}', "nested more than 1024 deep"),
        ("prompt_tokens", "9" * 400, "a number too large for a 64-bit float"),
        ("completion_tokens", "9" * 5000, "a number too large for a 64-bit float"),
    ],
)
def test_deep_nesting_and_long_numbers_are_one_sentence(folder, tmp_path, field, value, problem):
    lines = (folder / "turns.jsonl").read_text().splitlines()
    turn = json.loads(lines[2])
    lines[2] = json.dumps({**turn, field: "@"}).replace('"@"', value)
    (folder / "turns.jsonl").write_text("\n".join(lines) + "\n")
    refused_by_every_reader(folder, tmp_path, 3, problem)


def test_a_deep_or_long_manifest_is_one_sentence(folder):
    path = folder / "manifest.json"
    text = path.read_text()
    for edit, problem in [
        (text.replace('"extra_body": {}', f'"extra_body": {{"x": {DEEP}}}', 1), "nested more"),
        (text.replace('"seed": 0', '"seed": ' + "9" * 5000, 1), "a number too large"),
    ]:
        path.write_text(edit)
        message = refusal(lambda: mad_eval.report(folder))
        assert message.startswith(f"{path} is damaged ({problem}"), message


def test_a_lone_surrogate_escaped_in_a_record_still_reads(folder):
    turns = turns_of(folder)
    lines = [json.dumps(t) for t in turns]
    lines[3] = lines[3].replace('"text": "', '"text": "\\ud800 ', 1)
    (folder / "turns.jsonl").write_text("\n".join(lines) + "\n")
    assert mad_eval.report(folder).metrics["questions"] == 4
    mad_eval.view([folder], out=folder.parent / "site")  # its prompts rebuilt, the surrogate kept
    assert loads(b'["\\ud800", 1]') == ["\ud800", 1]
    for data in (b'["\\ud800", NaN]', b'["\\ud800", ' + DEEP.encode() + b"]"):
        with pytest.raises(ValueError, match=r"NaN or Infinity|nested more than 1024 deep"):
            loads(data)


@pytest.mark.slow
def test_a_lone_surrogate_in_a_manifest_still_tables_and_draws(folder):
    path = folder / "manifest.json"
    path.write_text(path.read_text().replace('"model": "sim"', '"model": "\\ud800"', 1))
    text = mad_eval.table([folder], replicates=100)
    assert "\ufffd" in text  # the label, as the model's name is shown
    assert mad_eval.plot([folder], out=folder.parent / "plots", replicates=100)
    turns = turns_of(folder)
    turns[0]["text"] = "\ud800 " + turns[0]["text"]
    (folder / "turns.jsonl").write_text("\n".join(json.dumps(t) for t in turns) + "\n")
    assert mad_eval.load_run(folder).turns()["text"].str.startswith("\ufffd").any()


def test_a_roster_that_is_no_utf8_is_one_sentence(tmp_path):
    path = tmp_path / "team.toml"
    path.write_bytes(b'[[agent]]\nmodel = "sim\xff"\n')
    with pytest.raises(RosterError, match="cannot be read: it is not UTF-8 text"):
        load_roster_file(path)
    path.write_text("x = " + "[" * 100_000 + "]" * 100_000)
    with pytest.raises(RosterError, match="nests arrays or tables too deeply"):
        load_roster_file(path)
