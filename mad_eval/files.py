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
