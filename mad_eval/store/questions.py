"""A run folder's questions.jsonl: every question exactly as the run asked it (text, gold,
kind, answer protocol, options and the row's other fields) with its hash, written when the
run opens. Later commands (judge, train pairs) read the questions here, never from the
benchmark; a resumed run whose benchmark was edited since is refused."""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from mad_eval.foreign import LineTooLong, check_line, lines, loads, open_regular
from mad_eval.grading.grader import check_answer_protocol
from mad_eval.records import Question, shown
from mad_eval.sanitize import valid_data, valid_text
from mad_eval.store.files import StoreError, write_atomically
from mad_eval.store.names import QUESTIONS_FILE


def write_questions(root: Path, questions: Sequence[Question]) -> None:
    """questions.jsonl, written whole and atomically: a line per question, in run order."""
    written = []
    for q in questions:
        try:
            line = json.dumps(q.to_dict(), ensure_ascii=False, default=_json_value, allow_nan=False)
        except ValueError:
            raise StoreError(
                f"question {shown(q.id, 80)} holds NaN or Infinity, which JSON has no number for; "
                "mend "
                "its row in the benchmark's file."
            ) from None
        written.append(line + "\n")
    # backslashreplace: a lone surrogate in a text becomes its JSON escape, as in turns.jsonl.
    data = "".join(written).encode("utf-8", errors="backslashreplace")
    write_atomically(
        Path(root) / QUESTIONS_FILE, data, "free space and run the same command again."
    )


def read_questions(root: Path) -> dict[str, Question] | None:
    """The run's questions by id, as it asked them; None for a folder recorded before
    questions.jsonl existed. A damaged line, or one whose question differs from the hash
    recorded with it, is a StoreError naming the line."""
    path = Path(root) / QUESTIONS_FILE
    found: dict[str, Question] = {}
    try:
        for number, line, record in _rows(path):
            question = _question(path, number, line, record)
            found[question.id] = question
    except FileNotFoundError:
        return None
    return found


def read_golds(root: Path) -> dict[str, str] | None:
    """Each question's gold by id, as questions.jsonl records it (None for a folder recorded
    before the file): what every reader holds the turns' verdicts to, read at a report's
    pace, without rebuilding each question and its hash (read_questions does, for the
    commands that ask or show them)."""
    path = Path(root) / QUESTIONS_FILE
    found: dict[str, str] = {}
    try:
        for number, _, record in _rows(path):
            qid, gold = record.get("id"), record.get("gold")
            if type(qid) is not str or type(gold) is not str:
                problem = '"id" or "gold" is missing or not a str'
                raise StoreError(f"{path} line {number} is not a question ({problem}); {FIX}.")
            found[valid_text(qid)] = valid_text(gold)  # as read_questions reads them
    except FileNotFoundError:
        return None
    return found


FIX = "restore it from a copy, or delete it to read the questions from the benchmark again"


def _rows(path: Path) -> Iterator[tuple[int, bytes, dict[str, Any]]]:
    """(line number, line, its JSON object) for each non-blank line of questions.jsonl, read
    within bounds; FileNotFoundError when there is none, else a StoreError naming the line."""
    number = 0
    try:
        with open_regular(path) as file:
            for number, line in enumerate(lines(file), start=1):
                check_line(line)
                if line.strip():
                    yield number, line, _loaded(path, number, line)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise StoreError(f"cannot read {path} ({exc.strerror or exc}).") from None
    except LineTooLong as exc:
        raise StoreError(f"{path} line {number} is {exc}; {FIX}.") from None


def _loaded(path: Path, number: int, line: bytes) -> dict[str, Any]:
    try:
        record = loads(line)
    except UnicodeDecodeError:
        raise StoreError(f"{path} line {number} is not UTF-8 text; {FIX}.") from None
    except ValueError as exc:
        raise StoreError(f"{path} line {number} is not a question ({exc}); {FIX}.") from None
    if type(record) is not dict:
        raise StoreError(f"{path} line {number} is not a question (not a JSON object); {FIX}.")
    return record


def _question(path: Path, number: int, line: bytes, record: dict[str, Any]) -> Question:
    """The question line `number` records, checked against the hash recorded with it."""
    try:
        question = Question.from_dict(record)
        _readable(question.kind, question.answer)
    except (ValueError, TypeError) as exc:
        raise StoreError(f"{path} line {number} is not a question ({exc}); {FIX}.") from None
    if record.get("sha256") != question.sha256:
        raise StoreError(
            f"{path} line {number} (question {shown(question.id, 80)}) was edited after the run "
            f"recorded it (its sha256 no longer matches); {FIX}."
        )
    # A lone surrogate the benchmark's file held (before it was made U+FFFD on load): as
    # the benchmark now gives it, so a resumed run finds the same question.
    valid = valid_data(record, line)
    return question if valid is record else Question.from_dict(valid)


@functools.cache
def _readable(kind: str, answer: str | None) -> None:
    """A ValueError unless `kind` is a kind this mad-eval knows and `answer` a protocol it
    reads with: every later command reads the question by them."""
    check_answer_protocol(kind, answer)


def check_questions(
    root: Path, recorded: Mapping[str, Question], questions: Sequence[Question]
) -> None:
    """Refuse to resume a run on questions other than those it recorded: one edited in the
    benchmark since, one gone from it, or one new in it."""
    asked = {q.id: q for q in questions}
    differ = [
        (qid, "was edited since the run read it")
        for qid, q in asked.items()
        if qid in recorded and recorded[qid].sha256 != q.sha256
    ]
    differ += [(qid, "is no longer in it") for qid in recorded if qid not in asked]
    differ += [(qid, "is new in it") for qid in asked if qid not in recorded]
    if differ:
        qid, how = differ[0]
        more = f" ({len(differ)} questions differ in all)" if len(differ) > 1 else ""
        raise StoreError(
            f"{root} holds a run on other questions than the benchmark gives now: question "
            f"{shown(qid, 80)} {how}{more}; restore the benchmark's file as the run read it to "
            "resume, or pass another --out."
        )


def _json_value(value: Any) -> Any:
    """A field of a benchmark row that JSON has no type for (a parquet row's array or
    number): as a list or number where it has one, else as text."""
    if hasattr(value, "tolist"):
        return value.tolist()
    return str(value)
