"""The errors of a run folder's files, and the few ways mad-eval writes a file: the atomic
write every file rewritten whole goes through (manifest.json, metrics.json, tables, figures,
the viewer's site), the opening of a file appended to or cut in place (turns.jsonl, .lock),
and the making of a folder whose name mad-eval chose. None of them writes through a link:
a folder shared or cloned from someone else can hold one where mad-eval writes."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import secrets
import stat
from pathlib import Path
from typing import Any

from mad_eval.errors import UserError
from mad_eval.store.names import RECORDS, RUN_RECORDS, SUPERSEDED


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


class LinkError(StoreError):
    """A name mad-eval writes is a link: written through, it would change a file elsewhere."""


def refuse_link(path: Path) -> None:
    """Refuse `path` if it is a symbolic link: it is a name mad-eval writes (a record, an
    output, a folder it named), so the link was put there by someone else."""
    if os.path.islink(path):
        try:
            target = f" to {os.readlink(path)}"
        except OSError:
            target = ""
        raise LinkError(
            f"{path} is a symbolic link{target}, which mad-eval would write through; remove "
            "the link and run the command again."
        )


def _refuse_hard_link(path: Path, names: int) -> None:
    if names > 1:
        raise LinkError(
            f"{path} is a hard link (the file has {names} names), so writing it would change "
            "the file under its other names too; make it a file of its own (copy it, then move "
            "the copy over it) and run the command again."
        )


def refuse_links(path: Path) -> None:
    """Refuse `path` if it is a symbolic link or a file of more names than one (a hard link):
    for a file another program writes in place (the request cache's SQLite files)."""
    refuse_link(path)
    with contextlib.suppress(OSError):  # a missing file is made by its writer
        _refuse_hard_link(path, os.lstat(path).st_nlink)


# Every open for writing: never through a link at the file's name, never inherited by a
# child process.
_NO_LINK = os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
APPEND = os.O_WRONLY | os.O_APPEND | os.O_CREAT  # open_record's flags for a file appended to


def open_record(path: Path, flags: int, then: str) -> int:
    """A descriptor of `path` opened with `flags` (O_CREAT, O_APPEND, ...), for a file written
    in place (turns.jsonl, judge.jsonl, .lock, superseded/ files, a server's log): refused if
    it is a symbolic link, something other than a file, or a file of other names (a hard
    link), as writing it would change what those names hold. Checked here once, so each
    write after costs nothing more."""
    try:
        # Non-blocking, so a FIFO in its place is refused below, not waited on; 0o666 less
        # the umask, as write_atomically's files.
        fd = os.open(path, flags | _NO_LINK | os.O_NONBLOCK, 0o666)
    except OSError as exc:
        refuse_link(path)  # O_NOFOLLOW's ELOOP, in words
        if exc.errno == errno.ENXIO:  # a FIFO that no process reads
            raise _not_a_file(path) from None
        raise WriteError(path, exc, then) from None
    try:
        found = os.fstat(fd)
        if not stat.S_ISREG(found.st_mode):
            raise _not_a_file(path)
        _refuse_hard_link(path, found.st_nlink)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _not_a_file(path: Path) -> StoreError:
    return StoreError(
        f"{path} is not a file (a FIFO or a device), where mad-eval keeps a file of its own; "
        "remove it and run the command again."
    )


def make_folder(folder: Path, then: str, below: Path | None = None) -> None:
    """Make `folder` (and its parents), a folder whose name mad-eval chose, refusing it if it
    is a symbolic link, and each folder between `below` and it: those names are mad-eval's,
    while `below` and what is above it are the caller's (an --out may be a link)."""
    folder = Path(folder)
    named = [folder]
    if below is not None and folder != below:
        parts = folder.relative_to(below).parts
        named = [below.joinpath(*parts[:i]) for i in range(1, len(parts) + 1)]
    for path in named:
        refuse_link(path)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise WriteError(folder, exc, then) from None


def write_json(path: Path, data: dict[str, Any], then: str) -> None:
    """`data` as a JSON file, atomically; NaN and Infinity, which JSON has no number for,
    are refused before anything is written."""
    try:
        text = json.dumps(data, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    except ValueError:
        raise StoreError(
            f"{path} was not written: a number in it is NaN or Infinity, which JSON has no "
            "number for."
        ) from None
    write_atomically(path, text.encode("utf-8", errors="backslashreplace"), then)


def write_atomically(path: Path, data: bytes, then: str, durable: bool = True) -> None:
    """Write a temporary file beside `path` and rename it over `path`: a reader sees the old
    file or the new one, never half of one, and no temporary file outlives a failure; a
    link at `path` is refused, never written through. `durable`: on disk before the rename
    (not for a site, whose every file is made again each time). The file's mode is 0o666
    less the umask, as for every file of a run folder (turns.jsonl too): records hold no
    secret (sanitize.redact), and run folders are made to be shared."""
    refuse_link(path)
    try:
        fd, tmp = _temporary(path)
    except OSError as exc:
        raise WriteError(path, exc, then) from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            if durable:
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
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NO_LINK
    while True:
        tmp = path.parent / f".{path.name}.{secrets.token_hex(6)}.tmp"
        try:
            return os.open(tmp, flags, 0o666), tmp
        except FileExistsError:  # another writer's name, drawn by a one in 2**48 chance
            continue


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
        if folder.name == SUPERSEDED and _run_folder(folder.parent):
            raise StoreError(
                f"{option} {given} is inside {folder}, the replaced records of a run; "
                "give a path outside it."
            )
