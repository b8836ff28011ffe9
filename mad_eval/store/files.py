"""The errors of a run folder's files, and the atomic write every file that is rewritten
whole (manifest.json, questions.jsonl, metrics.json) goes through."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import secrets
from pathlib import Path
from typing import Any

from mad_eval.errors import UserError


class StoreError(UserError, ValueError):
    """The run directory cannot be used for this run."""


class WriteError(StoreError):
    """A record could not be written (a full disk, a read-only folder); nothing was left
    half-written, and the message says what to do next."""

    def __init__(self, path: Path, exc: OSError, then: str):
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            reason = "the disk is full"
        else:
            reason = exc.strerror or str(exc)
        super().__init__(f"cannot write {path} ({reason}); {then}")


def write_json(path: Path, data: dict[str, Any], then: str) -> None:
    text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    write_atomically(path, text.encode("utf-8", errors="backslashreplace"), then)


def write_atomically(path: Path, data: bytes, then: str) -> None:
    """Write a temporary file beside `path` and rename it over `path`: a reader sees the old
    file or the new one, never half of one, and no temporary file outlives a failure. The
    file's mode is 0o666 less the umask, as for every file of a run folder (turns.jsonl
    too): records hold no secret (sanitize.redact), and run folders are made to be shared."""
    try:
        fd, tmp = _temporary(path)
    except OSError as exc:
        raise WriteError(path, exc, then) from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            raise WriteError(path, exc, then) from None
        raise


def _temporary(path: Path) -> tuple[int, Path]:
    """A new file beside `path`, opened for writing, with the mode every file of a run gets
    (tempfile.mkstemp's would be 0o600)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    while True:
        tmp = path.parent / f".{path.name}.{secrets.token_hex(6)}.tmp"
        try:
            return os.open(tmp, flags, 0o666), tmp
        except FileExistsError:  # another writer's name, drawn by a one in 2**48 chance
            continue


# What a run folder (and an experiment folder) holds that no output may replace; any of the
# first five in a folder makes it a run folder. store.py, questions.py and the experiment
# runner write these names.
RUN_RECORDS = ("manifest.json", "turns.jsonl", "questions.jsonl", "judge.jsonl", "metrics.json")
RECORDS = (*RUN_RECORDS, ".lock", "experiment.json")
SUPERSEDED_DIR = "superseded"


def _run_folder(folder: Path) -> bool:
    return any((folder / name).is_file() for name in RUN_RECORDS)


def refuse_records(path: Path | str, option: str = "--out", run_folder: bool = False) -> None:
    """Refuse an output path that would write over a run's records: one of a run folder's
    record files, anything in its superseded/ folder, or a run folder itself (unless
    `run_folder`: the output is a run folder, as for run's --out); a new file or folder of
    another name inside a run folder is allowed (it replaces nothing)."""
    given = Path(path)
    full = given.resolve()  # symlinks and `..` followed to what would really be written
    if not run_folder and full.is_dir() and _run_folder(full):
        raise StoreError(
            f"{option} {given} is a run folder, whose records would be written over; "
            "give a new folder outside it."
        )
    if full.name in RECORDS and (full.exists() or _run_folder(full.parent)):
        raise StoreError(
            f"{option} {given} is {full.name}, a record of the run folder {full.parent}; "
            "give another file name."
        )
    for folder in (full, *full.parents):
        if folder.name == SUPERSEDED_DIR and _run_folder(folder.parent):
            raise StoreError(
                f"{option} {given} is inside {folder}, the replaced records of a run; "
                "give a path outside it."
            )
