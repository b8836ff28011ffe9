"""A TOML file from anyone (an experiment file, a benchmark spec or a protocol preset in a
cloned repository), read within bounds: only a regular file, at most MAX_BYTES, and nested
no deeper than the parser can go, so a FIFO, a device, a huge file or 100,000 nested `[`
is one sentence, never a hang or a traceback."""

from __future__ import annotations

import os
import stat
import tomllib
from pathlib import Path
from typing import Any

from mad_eval.errors import UserError

MAX_BYTES = 1 << 20  # no spec, preset or experiment file comes near 1 MiB


class TomlFileError(UserError, ValueError):
    """Why a TOML file cannot be read, as a clause ("it is a FIFO, not a file"); the caller
    names the file and what it was for."""


def read_toml(path: Path, limit: int = MAX_BYTES) -> dict[str, Any]:
    """The table a TOML file holds. FileNotFoundError when there is none; TomlFileError for
    anything else that keeps it from being read."""
    text = read_text(path, limit)
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise TomlFileError(f"it is not valid TOML ({exc})") from None
    except RecursionError:
        raise TomlFileError("it nests arrays or tables too deeply to read") from None


def read_text(path: Path, limit: int = MAX_BYTES) -> str:
    """The UTF-8 text of a regular file of at most `limit` bytes (a prompt template's
    source, which is recorded as read). FileNotFoundError when there is none; TomlFileError
    for anything else that keeps it from being read."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO's open must not wait
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise TomlFileError(f"it cannot be read ({exc.strerror or exc})") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = "a folder" if stat.S_ISDIR(mode) else "a FIFO or device"
            raise TomlFileError(f"it is {kind}, not a file")
        with os.fdopen(os.dup(fd), "rb") as file:
            data = file.read(limit + 1)
    except OSError as exc:
        raise TomlFileError(f"it cannot be read ({exc.strerror or exc})") from None
    finally:
        os.close(fd)
    if len(data) > limit:
        raise TomlFileError(f"it holds over {limit:,} bytes, more than any such file needs")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise TomlFileError("it is not UTF-8 text") from None
