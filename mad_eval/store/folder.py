"""One run folder (store.names spells its files): manifest.json (manifest.py), questions.jsonl
(questions.py), append-only turns.jsonl (the source of truth, read by lines.py), stops.jsonl
where a protocol ended debates early, metrics.json, and judge.jsonl when its debate turns
have been judged; superseded/ holds the records that --retry-failed replaced, and .lock
marks the one process writing to the folder. Every reader outside the store asks a
RunStore's methods, never a path."""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from mad_eval.foreign import read_json
from mad_eval.records import JsonLine, Question, Setting, Stop, Turn, TurnKey, Verdict, shown
from mad_eval.sanitize import redact
from mad_eval.settings.config import RunConfig
from mad_eval.settings.templates import TemplateError, check_recorded
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
from mad_eval.store.lines import (
    RESUME,
    Debates,
    Recorded,
    RunShape,
    graded_as,
    grades_of,
    read_debates,
    read_records,
    read_verdict,
    records_of,
)
from mad_eval.store.manifest import RunManifest, redacted_config
from mad_eval.store.names import (
    JUDGE_FILE,
    LOCK_FILE,
    MANIFEST_FILE,
    METRICS_FILE,
    QUESTIONS_FILE,
    STOPS_FILE,
    SUPERSEDED,
    TURNS_FILE,
)
from mad_eval.store.questions import (
    check_questions,
    read_golds,
    read_questions,
    write_questions,
)
from mad_eval.store.upgrade import upgrade_metrics

__all__ = [  # the store's interface, and what its tests reach for
    "Debates",
    "JudgeLog",
    "Recorded",
    "RunShape",
    "RunStore",
    "StoreError",
    "read_debates",
    "read_records",
    "write_atomically",
    "write_json",
]


class RecordFile:
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
    """A run folder: its records read through its methods (manifest, questions, golds, shape,
    index, debates, turns, verdicts, metrics, alerts, size) and written by one process at a
    time (open, append, supersede, close; write_metrics). The `*_path` attributes name the
    files in messages. `named`: mad-eval chose the folder's name (run's default
    results/<name>, an experiment's cell), so a link there was planted and is refused at
    once; a folder the caller names may be a link (a run kept on another disk)."""

    def __init__(self, root: Path, named: bool = False):
        self.root = Path(root)
        if named:
            refuse_link(self.root)
        self.manifest_path = self.root / MANIFEST_FILE
        self.questions_path = self.root / QUESTIONS_FILE
        self.turns_path = self.root / TURNS_FILE
        self.stops_path = self.root / STOPS_FILE
        self.judge_path = self.root / JUDGE_FILE
        self.metrics_path = self.root / METRICS_FILE
        self.superseded_path = self.root / SUPERSEDED
        self.lock = FolderLock(self.root)
        self._file: RecordFile | None = None
        self._stops: RecordFile | None = None

    @staticmethod
    def holds_run(folder: Path | str) -> bool:
        """Whether `folder` is a run folder (it holds a manifest.json)."""
        return (Path(folder) / MANIFEST_FILE).is_file()

    def manifest(self) -> RunManifest:
        """What the run was, in the current shape whatever version wrote it."""
        return RunManifest.read(self.root)

    def questions(self) -> dict[str, Question] | None:
        """The run's questions by id, as it asked them; None for a folder recorded before it
        held them (questions.read_questions)."""
        return read_questions(self.root)

    def golds(self) -> dict[str, str] | None:
        """Each question's gold by id; None for a folder recorded before it held them."""
        return read_golds(self.root)

    def has_turns(self) -> bool:
        """Whether the run has recorded anything (its turns.jsonl exists)."""
        return self.turns_path.exists()

    def size(self) -> int:
        """The bytes of records it holds (0 before its first)."""
        try:
            return self.turns_path.stat().st_size
        except FileNotFoundError:
            return 0

    def index(self, repair: bool = False, shape: RunShape | None = None) -> Recorded:
        """Its turns by key, each read when asked for (lines.Recorded); `repair` cuts a
        partial last line left by a crash; with `shape`, a line of no turn of the run is a
        StoreError naming it."""
        return Recorded.index(self.turns_path, repair=repair, shape=shape)

    def debates(self, shape: RunShape | None = None) -> Debates:
        """Its turns a debate (one run's turns of one question) at a time (read_debates)."""
        return read_debates(self.turns_path, shape)

    def turns(self, repair: bool = False) -> list[Turn]:
        """All recorded turns; `repair` cuts a partial last line left by a crash. A turn
        that does not belong to the run is a StoreError naming its line."""
        found = read_records(self.turns_path, Turn.from_json, "a turn record", repair, self.shape())
        return list({turn.key: turn for turn in found}.values())  # a repeated key keeps the last

    def stops(self, shape: RunShape | None = None) -> dict[tuple[int, str], Stop]:
        """The debates its protocol ended early, by (run, question) (none for a run whose
        debates all went to the last round, or one recorded before stops were); with
        `shape`, a stop of no debate of the run is a StoreError naming its line."""
        if not self.stops_path.exists():
            return {}
        found = {}
        for number, stop in enumerate(
            read_records(self.stops_path, Stop.from_json, "a stop record"), 1
        ):
            if shape is not None:
                problem = shape.problem((stop.run, stop.question, stop.round, 0))
                if problem is not None or stop.round >= shape.rounds:
                    why = problem or f"round {stop.round} is the run's last or past it"
                    raise StoreError(f"{self.stops_path}, line {number}: {why}.")
            found[stop.debate] = stop  # a repeated debate keeps the last
        return found

    def verdicts(self, shape: RunShape | None = None) -> list[Verdict]:
        """The judge's latest verdict of each turn (none before it judged)."""
        return JudgeLog(self.root).read(shape=shape)

    def judge_log(self) -> JudgeLog:
        """Its judge.jsonl, to append verdicts to."""
        return JudgeLog(self.root)

    def metrics(self) -> dict[str, Any] | None:
        """Its last report's metrics.json in the current shape, or None where it has none, or
        none that reads as one (no regular file, larger than any report writes, no JSON
        object): every number is recomputed from the records. One of a newer layout than
        this mad-eval knows is a MetricsVersionError."""
        try:
            found = read_json(self.metrics_path)
        except (OSError, ValueError):
            return None
        return upgrade_metrics(found, self.metrics_path) if isinstance(found, dict) else None

    def alerts(self) -> list[str] | None:
        """Why its numbers may mislead, as its last report wrote them (metrics.json's
        `alerts`, one sentence each); None where no metrics.json says (none, one of a newer
        layout, or one written before alerts existed)."""
        try:
            found = self.metrics()
        except ValueError:  # a newer layout: not read
            return None
        alerts = found.get("alerts") if found is not None else None
        if not isinstance(alerts, list):
            return None
        return [a for a in alerts if isinstance(a, str) and a.strip()]

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
            grades = grades_of({q.id: q.gold for q in questions}, *graded_as(questions))
            shape = RunShape(config.runs, config.rounds, config.agents, ids, grades)
            done = self.index(repair=True, shape=shape)
            if self.stops_path.exists():  # a partial last line, cut before appending
                read_records(self.stops_path, Stop.from_json, "a stop record", repair=True)
            self._file = RecordFile(self.turns_path)
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
        assert self._file is not None, "open() the store first"
        self._file.write(turn)

    def append_stop(self, stop: Stop) -> None:
        """Record that a debate ended early (the turns it read are recorded already)."""
        assert self._file is not None, "open() the store first"
        if self._stops is None:
            self._stops = RecordFile(self.stops_path)
        self._stops.write(stop)

    def supersede(self, keys: set[TurnKey]) -> int:
        """Take the turns of `keys` (and their judge verdicts) out of the run's records into
        superseded/, to be asked again; the run must be open. Returns the turns moved."""
        assert self._file is not None, "open() the store first"
        if not keys:
            return 0
        self._file.close()
        moved = move_records(self.turns_path, keys, Turn.from_json, "a turn record")
        move_records(self.judge_path, keys, read_verdict, "a judge verdict")
        # A debate asked again may end elsewhere: its stop is decided again too.
        debates = {(run, question) for run, question, _, _ in keys}
        ended = {stop.key for stop in self.stops().values() if stop.debate in debates}
        if ended:
            move_records(self.stops_path, ended, Stop.from_json, "a stop record")
        self._file = RecordFile(self.turns_path)
        return moved

    def close(self) -> None:
        for file in (self._file, self._stops):
            if file:
                file.close()
        self._file = self._stops = None
        self.lock.release()

    def shape(self, manifest: RunManifest | None = None) -> RunShape:
        """What this run's records may hold, from its manifest (read when not given) and its
        questions.jsonl, whose golds its verdicts are held to (a folder from before the file
        has its verdicts unchecked: RunShape.grades None)."""
        manifest = manifest or self.manifest()
        golds = self.golds()
        ids = manifest.benchmark.questions
        if not ids:  # a run from before the manifest listed them
            ids = tuple(golds) if golds is not None else ()
        grades = None
        if golds is not None:
            missing = [qid for qid in ids if qid not in golds]
            if missing:
                raise StoreError(
                    f"{self.questions_path} lacks {len(missing)} of the run's "
                    f"questions (e.g. {shown(missing[0])}); restore it from a copy."
                )
            benchmark = manifest.benchmark
            grades = grades_of(golds, benchmark.kind, benchmark.answer, self.manifest_path)
        return RunShape.of(manifest, self.manifest_path, frozenset(ids) or None, grades)

    def write_metrics(self, metrics: dict[str, Any]) -> None:
        then = f"free space and run mad-eval report {self.root} to write it."
        write_json(self.metrics_path, redact(metrics), then)  # a judge's extra body, say

    def _check_orphans(self) -> None:
        """A folder whose manifest.json is gone but whose records are there is refused: a
        new run would adopt them under its own configuration. (questions.jsonl alone is
        what a run that never began leaves, as it is written before the manifest.)"""
        for name in (TURNS_FILE, JUDGE_FILE, METRICS_FILE, SUPERSEDED):
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
            began = manifest.benchmark.answer_revision
            revision = extra["benchmark"].get("answer_revision", 1)
            if graded == wanted["answer_protocol"] and began != revision:
                raise StoreError(
                    f"{self.root} was graded by the {graded} answer protocol as revision {began} "
                    f"read answers, and this mad-eval reads them as revision {revision}: finish "
                    "the run with the mad-eval that began it, or pass another --out."
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
        self._file: RecordFile | None = None

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
            self._file = RecordFile(self.path)
        except BaseException:
            self.lock.release()
            raise
        return done

    def append(self, verdict: Verdict) -> None:
        assert self._file is not None, "open() the log first"
        self._file.write(verdict)

    def close(self) -> None:
        if self._file:
            self._file.close()
            self._file = None
        self.lock.release()


def move_records(path: Path, keys: set[TurnKey], parse: Callable[[bytes], Any], what: str) -> int:
    """Move the records of `keys` from a JSON Lines file to the file of the same name in
    superseded/ beside it: appended there first, then the file is replaced whole by its
    other lines, so a crash in between leaves a copy in both places, never in neither."""
    kept: list[bytes] = []
    moved: list[bytes] = []
    for line, record in records_of(path, parse, what):
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
