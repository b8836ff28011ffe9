"""A run folder's JSON Lines records read back (turns.jsonl, judge.jsonl): a line at a time,
within bounds, each record held to the run's shape (RunShape) as it is read; by key for a
resume (Recorded), a debate at a time for a report (read_debates). A writer killed mid-line
leaves a partial last line: it is never read, and a repair cuts it off."""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import NoReturn, Protocol, TypeVar

from mad_eval.foreign import LineTooLong, check_line, lines, open_regular
from mad_eval.grading.rubric import scores_problem
from mad_eval.records import Question, Setting, Turn, TurnKey, Verdict, shown
from mad_eval.settings.hints import fits
from mad_eval.store.files import StoreError, open_record
from mad_eval.store.grades import Grades
from mad_eval.store.manifest import RunManifest


class Keyed(Protocol):
    """A record of a turn: a Turn, or the judge's Verdict on one."""

    @property
    def key(self) -> TurnKey: ...


T = TypeVar("T", bound=Keyed)
RESUME = "every finished record is kept: free space and run the same command again to resume."


def read_verdict(line: bytes) -> Verdict:
    """A judge.jsonl line, its scores held to the rubric (a ValueError saying how they are
    not): a forged score would be averaged as the judge's."""
    verdict = Verdict.from_json(line)
    if not fits(verdict.setting, Setting):
        raise ValueError('"setting" is not the fields of a judge setting, each of its type')
    problem = scores_problem(verdict.scores, verdict.total)
    if problem is not None:
        raise ValueError(problem)
    return verdict


def read_records(
    path: Path,
    parse: Callable[[bytes], T],
    what: str,
    repair: bool = False,
    shape: RunShape | None = None,
) -> list[T]:
    """Every record of an append-only JSON Lines file, in order. A writer killed mid-line
    leaves a partial last line: it is dropped, and with `repair` cut from the file. With
    `shape`, a record of no turn of the run is a StoreError naming its line."""
    return [record for _, record in records_of(path, parse, what, repair, shape)]


@dataclasses.dataclass(frozen=True)
class RunShape:
    """What a run's records may hold: runs, rounds and agents numbered from 0 up to the
    manifest's counts, and the run's own questions (None: a run that never listed them)."""

    runs: int
    rounds: int
    agents: int
    questions: frozenset[str] | None
    # What each turn's verdict is held to; None: unchecked (a folder without its questions).
    grades: Grades | None = dataclasses.field(default=None, compare=False)
    # The numbers each index may take, for admits(): a range's `in` costs no Python.
    spans: tuple[range, range, range] = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        spans = (range(self.runs), range(self.rounds + 1), range(self.agents))
        object.__setattr__(self, "spans", spans)

    @classmethod
    def of(
        cls,
        manifest: RunManifest,
        path: Path,
        questions: frozenset[str] | None,
        grades: Grades | None = None,
    ) -> RunShape:
        config = manifest.config  # its types and counts checked as it was read
        return cls(config.runs, config.rounds, config.agents, questions, grades)

    def admits(self, key: TurnKey, sees: Sequence[int] | None = None) -> bool:
        """Whether a record of `key` (its fields' types checked) reading agents `sees` is of
        a turn of the run: problem()'s test, at a fraction of its cost, as every record of
        a report or a resume passes it."""
        run, question, round_, agent = key
        runs, rounds, agents = self.spans
        return (
            run in runs
            and round_ in rounds
            and agent in agents
            and (self.questions is None or question in self.questions)
            and (not sees or (min(sees) >= 0 and max(sees) < self.agents))
        )

    def problem(self, key: TurnKey, sees: Sequence[int] = ()) -> str | None:
        """Why a record of `key` (reading agents `sees`) is of no turn of the run, or None."""
        run, question, round_, agent = key
        if not 0 <= run < self.runs:
            return f"run {run} is not one of its runs ({_span(self.runs)})"
        if self.questions is not None and question not in self.questions:
            return f"question {shown(question, 80)} is not one of its questions"
        if not 0 <= round_ <= self.rounds:
            return f"round {round_} is not one of its rounds ({_span(self.rounds + 1)})"
        if not 0 <= agent < self.agents:
            return f"agent {agent} is not one of its agents ({_span(self.agents)})"
        if sees and (min(sees) < 0 or max(sees) >= self.agents):
            return f"it reads agents {list(sees)}, not all of its agents ({_span(self.agents)})"
        return None


def grades_of(
    golds: Mapping[str, str], kind: str, protocol: str | None, path: Path | None = None
) -> Grades:
    """What a run's verdicts are held to; a kind or answer protocol that grades nothing
    (an edited manifest's) is a StoreError naming the manifest."""
    try:
        return Grades(golds, kind, protocol)
    except ValueError as exc:
        problem = str(exc).rstrip(".")
        raise StoreError(f"{path} is not a mad-eval run manifest ({problem}).") from None


def graded_as(questions: Sequence[Question]) -> tuple[str, str | None]:
    """The kind and answer protocol the run's questions are graded by."""
    return (questions[0].kind, questions[0].answer) if questions else ("math", None)


def _span(count: int) -> str:
    """Numbers 0 to count - 1, as a message shows them."""
    return "only 0" if count == 1 else f"0..{count - 1}"


def _lines(path: Path, limit: int | None = None) -> Iterator[tuple[int, int, bytes]]:
    """(line number, offset just past the line, the line without its newline) for every whole
    line of a file, up to byte `limit`: a partial last line (a writer killed mid-line, or one
    still writing) is never read."""
    end = 0
    try:
        with open_regular(path) as f:
            for number, raw in enumerate(lines(f), start=1):
                if not raw.endswith(b"\n"):
                    check_line(raw)  # a line past the bound, else a partial last line
                    break
                if limit is not None and end >= limit:
                    break
                end += len(raw)
                yield number, end, raw[:-1]
    except OSError as exc:  # a folder in its place, a FIFO, a link, no read permission
        raise StoreError(
            f"cannot read {path} ({exc.strerror or exc}); restore it from a copy."
        ) from None
    except LineTooLong as exc:
        raise StoreError(f"{path} line {number} is {exc}; remove that line.") from None


def _parsed(
    path: Path,
    parse: Callable[[bytes], T],
    what: str,
    limit: int | None = None,
    shape: RunShape | None = None,
) -> Iterator[tuple[int, int, bytes, T]]:
    """(line number, offset past the line, line as written, record) for every whole,
    non-blank line."""
    for number, end, line in _lines(path, limit):
        if line.strip():
            yield number, end, line, _parse(path, number, line, parse, what, shape)


def _parse(
    path: Path,
    number: int,
    line: bytes,
    parse: Callable[[bytes], T],
    what: str,
    shape: RunShape | None = None,
) -> T:
    """One line's record; a line that is none, or (with `shape`) a record of no turn of the
    run, is named in one sentence."""
    try:
        record = parse(line)  # bytes: orjson reads them as they are, Python decodes them
    except UnicodeDecodeError:
        raise StoreError(
            f"{path} line {number} is not UTF-8 text; fix or remove that line."
        ) from None
    except (ValueError, TypeError) as exc:
        raise StoreError(
            f"{path} line {number} is not {what} ({exc}); fix or remove that line."
        ) from None
    if shape is not None:
        key, sees = record.key, getattr(record, "sees", None)
        if not shape.admits(key, sees):
            _belongs(path, number, shape, key, sees or ())
        grades = shape.grades
        if grades is not None and isinstance(record, Turn) and not grades.admits(record):
            raise StoreError(
                f"{path} line {number} is not graded as its answer and gold say: "
                f"{grades.problem(record)}; remove that line (a resumed run asks it again), "
                "or open the folder it came from."
            )
    return record


def _belongs(
    path: Path, number: int, shape: RunShape, key: TurnKey, sees: Sequence[int] = ()
) -> None:
    problem = shape.problem(key, sees)
    if problem is not None:
        raise StoreError(
            f"{path} line {number} is not of this run: {problem}; remove that line, or open "
            "the folder it came from."
        )


def records_of(
    path: Path,
    parse: Callable[[bytes], T],
    what: str,
    repair: bool = False,
    shape: RunShape | None = None,
) -> Iterator[tuple[bytes, T]]:
    """(line as written, record) for every whole line of a JSON Lines file, read a line at a
    time (a run's records need not fit in memory twice). A line whose start names another
    turn than its whole does (a key field given twice) is a StoreError naming it."""
    if not path.exists():
        return
    whole = 0  # bytes up to the last record read (blank lines after it may go too)
    for number, end, line, record in _parsed(path, parse, what, shape=shape):
        start = _start_key(line)
        if start is not None and start != record.key:
            _repeated(path, number, start, record.key)
        whole = end
        yield line, record
    if repair and whole < path.stat().st_size:
        _cut(path, whole)


def _cut(path: Path, size: int) -> None:
    """Cut a record file back to `size` bytes (a crash's partial last line), never through
    a link."""
    fd = open_record(path, os.O_WRONLY, RESUME)
    try:
        os.ftruncate(fd, size)
    finally:
        os.close(fd)


# How every turn record begins (records.JsonLine.to_json): enough to know its key without
# parsing the whole line.
_KEY = re.compile(
    rb'\{"run": (-?\d+), "question": "((?:[^"\\]|\\.)*)", "round": (\d+), "agent": (\d+)'
)


def _start_key(line: bytes) -> TurnKey | None:
    """The key a turn record's line begins with, when it begins as the store writes it."""
    found = _KEY.match(line)
    if found is None or b"\\" in found[2] or not found[2].isascii():
        return None
    return int(found[1]), found[2].decode("ascii"), int(found[3]), int(found[4])


def _key_of(path: Path, number: int, line: bytes, shape: RunShape | None = None) -> TurnKey:
    """A turn record's key, read from the start of its line (else from the whole line); with
    `shape`, one of no turn of the run is a StoreError naming the line."""
    key = _start_key(line)
    if key is None:
        return _parse(path, number, line, Turn.from_json, "a turn record", shape).key
    if shape is not None and not shape.admits(key):
        _belongs(path, number, shape, key)
    return key


def _repeated(path: Path, number: int, first: TurnKey, last: TurnKey) -> NoReturn:
    """A line whose key fields name one turn where it starts and another in whole: a key
    given twice, which one reader would take one way and another the other."""
    names = ("run", "question", "round", "agent")
    name, one, other = next((n, a, b) for n, a, b in zip(names, first, last, strict=True) if a != b)
    raise StoreError(
        f'{path} line {number} gives "{name}" twice ({shown(one, 80)}, then '
        f"{shown(other, 80)}); fix or remove that line."
    )


def _disagreeing(path: Path, limit: int) -> NoReturn:
    """The first line (up to byte `limit`) whose start and whole name different turns."""
    for number, _, line in _lines(path, limit):
        key = _start_key(line)
        whole = _parse(path, number, line, Turn.from_json, "a turn record").key
        if key is not None and whole != key:
            _repeated(path, number, key, whole)
    raise StoreError(f"{path} changed while it was read; run the command again.")


class Recorded(Mapping[TurnKey, Turn]):
    """The turns a run folder holds, by key, as a resumed run needs them: every key is known
    from one pass that reads only the start of each line, and a turn is parsed when asked
    for, so resuming a run that is 99% done parses only its unfinished debates' turns. A
    repeated key is its last record. Valid while the file is only appended to."""

    def __init__(
        self,
        path: Path,
        lines: dict[TurnKey, tuple[int, int, int]],
        shape: RunShape | None = None,
    ):
        self.path = path
        self.lines = lines  # key -> (line number, offset of the line, its length)
        self.shape = shape

    @classmethod
    def index(cls, path: Path, repair: bool = True, shape: RunShape | None = None) -> Recorded:
        """Index turns.jsonl; `repair` cuts a partial last line left by a crash. With
        `shape`, a line of no turn of the run is a StoreError naming it."""
        lines: dict[TurnKey, tuple[int, int, int]] = {}
        whole = 0
        if path.exists():
            for number, end, line in _lines(path):
                if line.strip():
                    key = _key_of(path, number, line, shape)
                    lines[key] = (number, whole, end - whole - 1)
                whole = end
            if repair and whole < path.stat().st_size:
                _cut(path, whole)
        return cls(path, lines, shape)

    def __getitem__(self, key: TurnKey) -> Turn:
        number, offset, length = self.lines[key]
        try:
            with open_regular(self.path) as f:
                f.seek(offset)
                line = f.read(length)
        except OSError as exc:
            raise StoreError(f"cannot read {self.path} ({exc.strerror or exc}).") from None
        turn = _parse(self.path, number, line, Turn.from_json, "a turn record", self.shape)
        if turn.key != key:  # the line's start and its whole say different turns
            _repeated(self.path, number, key, turn.key)
        return turn

    def __contains__(self, key: object) -> bool:
        return key in self.lines

    def __iter__(self) -> Iterator[TurnKey]:
        return iter(self.lines)

    def __len__(self) -> int:
        return len(self.lines)


def read_debates(path: Path, shape: RunShape | None = None) -> Debates:
    """The turns of turns.jsonl a debate (one run's turns of one question) at a time, each
    debate as soon as its last line is read, so a report holds only the debates whose lines
    interleave. A first pass finds where each debate's last line is (reading only the start
    of every line); a repeated key keeps the last turn, as in RunStore.turns. With
    `shape`, a line of no turn of the run is a StoreError naming it, raised as it is read
    (a report counts what it has read only once it has read every debate). A line whose
    start names another turn than its whole does (a key field given twice) is a StoreError
    too: the two passes sum the hashes of each debate's keys, and must agree."""
    last: dict[tuple[int, str], int] = {}
    marks: dict[tuple[int, str], int] = {}  # each debate's keys' hashes, summed, as lines start
    end = 0
    if path.exists():
        for number, end, line in _lines(path):
            if line.strip():
                key = _key_of(path, number, line)  # checked when read below
                debate = key[:2]
                last[debate] = end
                marks[debate] = marks.get(debate, 0) + hash(key)

    def debates() -> Iterator[list[Turn]]:
        reading: dict[tuple[int, str], dict[TurnKey, Turn]] = {}
        again: dict[tuple[int, str], int] = {}  # the hashes of keys a debate repeats
        for _, at, _, turn in _parsed(path, Turn.from_json, "a turn record", end, shape):
            key = turn.key
            debate = key[:2]
            turns = reading.get(debate)
            if turns is None:
                turns = reading[debate] = {}
            elif key in turns:
                again[debate] = again.get(debate, 0) + hash(key)
            turns[key] = turn
            if last.get(debate) == at:  # its index entries are let go with it
                del last[debate]
                if sum(map(hash, turns)) + again.pop(debate, 0) != marks.pop(debate):
                    _disagreeing(path, end)
                yield list(reading.pop(debate).values())
        if reading:  # a debate that never ended where the lines' starts said
            _disagreeing(path, end)

    runs = sorted({run for run, _ in last})
    questions = sorted({question for _, question in last})
    return Debates(runs, questions, len(last), debates())


@dataclasses.dataclass
class Debates:
    """A run folder's turns as read_debates hands them out: the runs and questions they
    hold (sorted), how many debates, and the debates themselves, to be read once."""

    runs: list[int]
    questions: list[str]
    count: int
    each: Iterator[list[Turn]]
