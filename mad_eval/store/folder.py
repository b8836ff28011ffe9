"""One run directory: manifest.json (manifest.py), questions.jsonl (questions.py), append-only
turns.jsonl (the source of truth), metrics.json, and judge.jsonl when its debate turns have
been judged; superseded/ holds the records that --retry-failed replaced, and .lock marks the
one process writing to the folder."""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import os
import re
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn, TypeVar

from mad_eval.foreign import LineTooLong, check_line, lines, open_regular
from mad_eval.grading.rubric import scores_problem
from mad_eval.records import JsonLine, Question, Setting, Turn, TurnKey, Verdict, shown
from mad_eval.sanitize import redact
from mad_eval.setup.config import RunConfig
from mad_eval.setup.hints import fits
from mad_eval.setup.templates import TemplateError, check_recorded
from mad_eval.store.files import (
    APPEND,
    StoreError,
    WriteError,
    make_folder,
    open_record,
    refuse_link,
    write_atomically,
    write_json,
)
from mad_eval.store.grades import Grades
from mad_eval.store.manifest import MANIFEST_FILE, RunManifest, redacted_config
from mad_eval.store.questions import (
    check_questions,
    read_golds,
    read_questions,
    write_questions,
)

T = TypeVar("T")
JUDGE_FILE = "judge.jsonl"
LOCK_FILE = ".lock"
SUPERSEDED = "superseded"


RESUME = "every finished record is kept: free space and run the same command again to resume."


class Sink:
    """An append-only JSON Lines file, each record written whole by one write: a crash
    loses at most the record being written (read_records drops its partial line), and a
    failed write is cut back off the file before the error is raised."""

    def __init__(self, path: Path):
        self.path = path
        self._fd = open_record(path, APPEND, RESUME)
        self._size = os.fstat(self._fd).st_size

    def write(self, record: JsonLine) -> None:
        # backslashreplace: a lone surrogate in a text becomes its JSON escape, not a crash.
        data = (record.to_json() + "\n").encode("utf-8", errors="backslashreplace")
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(self._fd, view) :]
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, self._size)
            raise WriteError(self.path, exc, RESUME) from None
        self._size += len(data)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


class FolderLock:
    """One writer per run folder: an exclusive flock on its .lock file. The system releases
    it when the process ends, however it ends (kill -9 included)."""

    def __init__(self, root: Path):
        self.path = Path(root) / LOCK_FILE
        self._fd = -1

    def acquire(self) -> None:
        if self._fd >= 0:
            return
        fd = open_record(self.path, os.O_RDWR | os.O_CREAT, "check the folder's permissions.")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 500).decode("utf-8", errors="replace").strip()
            os.close(fd)
            raise StoreError(
                f"{self.path.parent} is in use by another mad-eval process "
                f"({holder or 'starting'}); wait for it to finish, or use another folder."
            ) from None
        with contextlib.suppress(OSError):  # who holds it is a courtesy, even on a full disk
            os.ftruncate(fd, 0)
            command = " ".join(redact(["mad-eval", *sys.argv[1:]]))
            os.write(fd, f"PID {os.getpid()}: {command}"[:500].encode())
        self._fd = fd

    def release(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)  # closing the descriptor releases the flock
            self._fd = -1


class RunStore:
    """A run folder's records. `named`: mad-eval chose the folder's name (run's default
    results/<name>, an experiment's cell), so a link there was planted and is refused at
    once; a folder the caller names may be a link (a run kept on another disk)."""

    def __init__(self, root: Path, named: bool = False):
        self.root = Path(root)
        if named:
            refuse_link(self.root)
        self.manifest_path = self.root / "manifest.json"
        self.turns_path = self.root / "turns.jsonl"
        self.metrics_path = self.root / "metrics.json"
        self.lock = FolderLock(self.root)
        self._sink: Sink | None = None

    def open(
        self, config: RunConfig, extra: dict[str, Any], *, questions: Sequence[Question]
    ) -> Recorded:
        """Lock the folder, create the run (its manifest from `config` and the sections in
        `extra`, its questions.jsonl from `questions`) or check it matches them; return the
        turns already recorded (each read when asked for)."""
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise WriteError(self.root, exc, "pass another --out.") from None
        self.lock.acquire()
        try:
            refuse_link(self.turns_path)  # said before it is read, not only as it is opened
            if self.manifest_path.exists():
                self._check_same(config, extra)
                recorded = read_questions(self.root)
                if recorded is None:  # recorded before questions.jsonl: recorded now
                    write_questions(self.root, questions)
                else:
                    check_questions(self.root, recorded, questions)
            else:
                self._check_orphans()
                write_questions(self.root, questions)  # first: a manifest implies its questions
                manifest = RunManifest.new(config, extra).to_dict()
                write_json(self.manifest_path, manifest, "free space and run again.")
            ids = frozenset(q.id for q in questions)
            grades = _grades({q.id: q.gold for q in questions}, *_graded_as(questions))
            shape = RunShape(config.runs, config.rounds, config.agents, ids, grades)
            done = Recorded.index(self.turns_path, shape=shape)
            self._sink = Sink(self.turns_path)
        except BaseException:
            self.lock.release()
            raise
        return done

    def check(self, config: RunConfig, extra: dict[str, Any] | None = None) -> None:
        """Refuse, before anything is asked, a folder that holds a run of another
        configuration (open() checks again, under the lock)."""
        if self.manifest_path.exists():
            self._check_same(config, extra or {})
        else:
            self._check_orphans()

    def append(self, turn: Turn) -> None:
        assert self._sink is not None, "open() the store first"
        self._sink.write(turn)

    def supersede(self, keys: set[TurnKey]) -> int:
        """Take the turns of `keys` (and their judge verdicts) out of the run's records into
        superseded/, to be asked again; the run must be open. Returns the turns moved."""
        assert self._sink is not None, "open() the store first"
        if not keys:
            return 0
        self._sink.close()
        moved = move_records(self.turns_path, keys, Turn.from_json, "a turn record")
        move_records(self.root / JUDGE_FILE, keys, read_verdict, "a judge verdict")
        self._sink = Sink(self.turns_path)
        return moved

    def close(self) -> None:
        if self._sink:
            self._sink.close()
            self._sink = None
        self.lock.release()

    def manifest(self) -> RunManifest:
        return RunManifest.read(self.root)

    def shape(self, manifest: RunManifest | None = None) -> RunShape:
        """What this run's records may hold, from its manifest (read when not given) and its
        questions.jsonl, whose golds its verdicts are held to (a folder from before the file
        has its verdicts unchecked: RunShape.grades None)."""
        manifest = manifest or self.manifest()
        golds = read_golds(self.root)
        ids = manifest.benchmark.questions
        if not ids:  # a run from before the manifest listed them
            ids = tuple(golds) if golds is not None else ()
        grades = None
        if golds is not None:
            missing = [qid for qid in ids if qid not in golds]
            if missing:
                raise StoreError(
                    f"{self.root / 'questions.jsonl'} lacks {len(missing)} of the run's "
                    f"questions (e.g. {shown(missing[0])}); restore it from a copy."
                )
            benchmark = manifest.benchmark
            grades = _grades(golds, benchmark.kind, benchmark.answer, self.manifest_path)
        return RunShape.of(manifest, self.manifest_path, frozenset(ids) or None, grades)

    def read_turns(self, repair: bool = False) -> list[Turn]:
        """All recorded turns; `repair` cuts a partial last line left by a crash. A turn
        that does not belong to the run is a StoreError naming its line."""
        found = read_records(self.turns_path, Turn.from_json, "a turn record", repair, self.shape())
        return list({turn.key: turn for turn in found}.values())  # a repeated key keeps the last

    def write_metrics(self, metrics: dict[str, Any]) -> None:
        then = f"free space and run mad-eval report {self.root} to write it."
        write_json(self.metrics_path, redact(metrics), then)  # a judge's extra body, say

    def _check_orphans(self) -> None:
        """A folder whose manifest.json is gone but whose records are there is refused: a
        new run would adopt them under its own configuration. (questions.jsonl alone is
        what a run that never began leaves, as it is written before the manifest.)"""
        for name in ("turns.jsonl", JUDGE_FILE, "metrics.json", SUPERSEDED):
            if (self.root / name).exists():
                raise StoreError(
                    f"{self.root} has {name} but no {MANIFEST_FILE}: restore {MANIFEST_FILE} "
                    "or use another --out."
                )

    def _check_same(self, config: RunConfig, extra: dict[str, Any]) -> None:
        manifest = self.manifest()
        # Settings added since the run read as defaults; secrets compared as recorded.
        recorded = redacted_config(manifest.config.to_dict())
        wanted = redacted_config(config.identity())
        protocol = manifest.protocol
        was = {"class": protocol.cls, "params": protocol.params, "score": protocol.score}
        for key in ("class", "params", "score"):  # a preset file edited since the run began
            if "protocol" in extra and (key != "score" or protocol.score is not None):
                recorded[f"protocol {key}"] = was[key]
                wanted[f"protocol {key}"] = extra["protocol"][key]
        graded = manifest.benchmark.answer
        if graded is not None and "benchmark" in extra:
            # The protocol the answers are graded with, however it was named: a spec that
            # changed its protocol since (aime24_dapo: answer-line, now dapo) is refused,
            # and resumes with --answer-protocol naming the recorded one.
            recorded["answer_protocol"] = graded
            wanted["answer_protocol"] = extra["benchmark"]["answer"]
            was = manifest.benchmark.answer_revision
            now = extra["benchmark"].get("answer_revision", 1)
            if graded == wanted["answer_protocol"] and was != now:
                raise StoreError(
                    f"{self.root} was graded by the {graded} answer protocol as revision {was} "
                    f"read answers, and this mad-eval reads them as revision {now}: finish the "
                    "run with the mad-eval that began it, or pass another --out."
                )
        templates = manifest.prompt.prompt_templates
        for ref, record in (templates or {}).items():  # edited since: refused, not rendered
            try:
                check_recorded(ref, record.sha256, record.text)
            except TemplateError as exc:
                problem = str(exc).rstrip(".")
                raise StoreError(f"{self.root}: {problem}, or pass another --out.") from None
        if templates is not None and "prompt" in extra:  # recorded since templates are data
            for ref, template in extra["prompt"]["prompt_templates"].items():
                recorded[f"prompt template {ref}"] = (
                    templates[ref].sha256 if ref in templates else None
                )
                wanted[f"prompt template {ref}"] = template["sha256"]
        served = extra.get("serving")
        if manifest.serving is not None and served is not None:  # what changes the answers
            for key in served.keys() - {"operational"}:
                recorded[f"serving {key}"] = manifest.serving.get(key)
                wanted[f"serving {key}"] = redact(served[key])
        changed = [k for k in wanted if recorded.get(k) != wanted[k]]
        if changed:
            diffs = ", ".join(
                f"{k} is {shown(recorded.get(k), 80)} there, {shown(wanted[k], 80)} here"
                for k in changed
            )
            raise StoreError(
                f"{self.root} holds a run with a different configuration ({diffs}); "
                "rerun with the same options to resume it, or pass another --out."
            )


class JudgeLog:
    """judge.jsonl beside a run: verdicts appended and flushed as they finish."""

    def __init__(self, root: Path):
        self.path = Path(root) / JUDGE_FILE
        self.lock = FolderLock(Path(root))
        self._sink: Sink | None = None

    def read(self, repair: bool = False, shape: RunShape | None = None) -> list[Verdict]:
        """The latest verdict of each turn; one of no turn of the run (`shape`, by default
        from the folder's manifest) is a StoreError naming its line."""
        if not self.path.exists():
            return []
        shape = shape or RunStore(self.path.parent).shape()
        found = read_records(self.path, read_verdict, "a judge verdict", repair, shape)
        return list({v.key: v for v in found}.values())

    def open(self, setting: Setting) -> dict[TurnKey, Verdict]:
        """Start appending; return the verdicts already there. Verdicts of another setting
        are refused: one file, one judge, or the averages would mix judges."""
        self.lock.acquire()
        try:
            refuse_link(self.path)  # said before it is read, not only as it is opened
            done = {v.key: v for v in self.read(repair=True)}
            wanted = redact(dataclasses.asdict(setting))  # as verdicts record it
            # Settings added since a verdict was written are read as their defaults.
            other = next(
                (
                    v
                    for v in done.values()
                    if redact(dataclasses.asdict(Setting(**v.setting))) != wanted
                ),
                None,
            )
            if other is not None:
                raise StoreError(
                    f"{self.path} holds verdicts of {Setting(**other.setting).describe()}; judge "
                    "again with that setting to resume, or move the file away to judge anew."
                )
            self._sink = Sink(self.path)
        except BaseException:
            self.lock.release()
            raise
        return done

    def append(self, verdict: Verdict) -> None:
        assert self._sink is not None, "open() the log first"
        self._sink.write(verdict)

    def close(self) -> None:
        if self._sink:
            self._sink.close()
            self._sink = None
        self.lock.release()


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
    return [record for _, record in _records(path, parse, what, repair, shape)]


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


def _grades(
    golds: Mapping[str, str], kind: str, protocol: str | None, path: Path | None = None
) -> Grades:
    """What a run's verdicts are held to; a kind or answer protocol that grades nothing
    (an edited manifest's) is a StoreError naming the manifest."""
    try:
        return Grades(golds, kind, protocol)
    except ValueError as exc:
        problem = str(exc).rstrip(".")
        raise StoreError(f"{path} is not a mad-eval run manifest ({problem}).") from None


def _graded_as(questions: Sequence[Question]) -> tuple[str, str | None]:
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
        if grades is not None and type(record) is Turn and not grades.admits(record):
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


def _records(
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
    of every line); a repeated key keeps the last turn, as in RunStore.read_turns. With
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
            if last.get(debate) == at:
                if sum(map(hash, turns)) + again.pop(debate, 0) != marks[debate]:
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


def move_records(path: Path, keys: set[TurnKey], parse: Callable[[bytes], Any], what: str) -> int:
    """Move the records of `keys` from a JSON Lines file to the file of the same name in
    superseded/ beside it: appended there first, then the file is replaced whole by its
    other lines, so a crash in between leaves a copy in both places, never in neither."""
    kept: list[bytes] = []
    moved: list[bytes] = []
    for line, record in _records(path, parse, what):
        (moved if record.key in keys else kept).append(line + b"\n")
    if not moved:
        return 0
    then = "free space and run the same command again."
    archive = path.parent / SUPERSEDED / path.name
    make_folder(archive.parent, then)
    fd = open_record(archive, APPEND, then)
    try:
        with os.fdopen(fd, "ab") as f:
            f.writelines(moved)
            f.flush()
            os.fsync(f.fileno())
    except OSError as exc:
        raise WriteError(archive, exc, then) from None
    write_atomically(path, b"".join(kept), then)
    return len(moved)
