"""Files from others, read as data within bounds: only a regular file is read (a FIFO never
blocks, a device is never read, a link is never followed), a whole file and a JSON Lines
record are bounded in size, and JSON is decoded strictly (nesting depth, numbers that fit a
64-bit float, no NaN or Infinity). Every reader of a run folder (records, manifest, metrics,
questions, verdicts) opens its file here; a TOML file (settings/tomlfile.py) is read within
bounds of its own."""

from __future__ import annotations

import errno
import functools
import json
import math
import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from mad_eval.sanitize import SURROGATE_ESCAPE

MiB = 1 << 20
# A record of a JSON Lines file (a turn, a verdict, a question), its newline aside: a turn
# holds a reply of at most 16 MiB (the HTTP client's bound) as text, reasoning and, quoted
# verbatim, once more, each JSON-escaped no longer than the body that brought it.
MAX_LINE = 128 * MiB
# A JSON file read whole (manifest.json, metrics.json): sized as a record is.
MAX_DOCUMENT = 128 * MiB
# JSON nested deeper than this is refused (orjson's own bound, kept by the fallback too).
MAX_DEPTH = 1024

_KINDS = {
    stat.S_IFIFO: "a FIFO",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
}


class Unreadable(OSError):
    """A file mad-eval does not read: no regular file, a link, or larger than its bound.
    Its `strerror` says which, so a caller's "cannot read PATH (why)" reads as for any
    other file that cannot be read."""


def open_regular(path: Path) -> BinaryIO:
    """`path` opened for reading, if it is a regular file: a link is not followed and a
    FIFO, device or socket is refused without blocking (Unreadable); a missing file is a
    FileNotFoundError, a folder an IsADirectoryError."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise Unreadable(exc.errno, "a symbolic link, which mad-eval does not follow") from None
        raise
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
        if not stat.S_ISREG(mode):
            kind = _KINDS.get(stat.S_IFMT(mode), "no regular file")
            raise Unreadable(errno.EINVAL, f"{kind}, not a regular file")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_whole(path: Path, limit: int | None = None) -> bytes:
    """A regular file's bytes, at most `limit` (MAX_DOCUMENT) of them: a larger file is
    Unreadable."""
    limit = MAX_DOCUMENT if limit is None else limit
    with open_regular(path) as file:
        data = file.read(limit + 1)
    if len(data) > limit:
        raise Unreadable(errno.EFBIG, f"larger than {size(limit)}, the most mad-eval reads of it")
    return data


class LineTooLong(ValueError):
    """A JSON Lines record longer than MAX_LINE: no record mad-eval writes is."""


def lines(file: BinaryIO) -> Iterator[bytes]:
    """Each line of `file` with its newline, none read past MAX_LINE + 1 bytes: a longer
    line comes cut there, without its newline, as otherwise only a last line does; such a
    line (one without a newline) is to be passed to check_line. A C-level iterator: a run's
    records are read at the cost of reading them."""
    return iter(functools.partial(file.readline, MAX_LINE + 1), b"")


def check_line(line: bytes) -> None:
    """A LineTooLong for a line `lines` cut at the bound."""
    if len(line) > MAX_LINE:
        raise LineTooLong(f"longer than {size(MAX_LINE)}, more than any record mad-eval writes")


def size(limit: int) -> str:
    return f"{limit // MiB} MiB"


def loads(data: str | bytes) -> Any:
    """JSON decoded strictly, with orjson (several times faster than the standard library):
    nested at most MAX_DEPTH deep, numbers within a 64-bit float (an integer past 64 bits
    is read as a float), no NaN or Infinity, which are not JSON. Only an escaped lone
    surrogate, which orjson refuses, is read by Python's parser, held to the same bounds.
    Anything else is a ValueError in words. A repeated key keeps its last value."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        text = data.decode("utf-8") if isinstance(data, bytes) else data  # else a decode error
        if SURROGATE_ESCAPE.search(text) is None:
            raise ValueError(_reason(str(exc), text)) from None
    try:
        return json.loads(data, parse_constant=_constant, parse_int=_integer, parse_float=_float)
    except RecursionError:
        raise ValueError(f"nested more than {MAX_DEPTH} deep") from None


def _reason(message: str, text: str) -> str:
    """orjson's reason in words where its own are obscure (`text`: what it read)."""
    if message.startswith("depth limit exceeded"):
        return f"nested more than {MAX_DEPTH} deep"
    if message.startswith("number is infinity"):
        return "a number too large for a 64-bit float"
    at = _AT.search(message)
    if at and text[int(at[1]) :].startswith(("NaN", "Infinity")):
        return _NOT_A_NUMBER
    return message


_NOT_A_NUMBER = "NaN or Infinity, which JSON has no number for"
_AT = re.compile(r"\(char (\d+)\)$")  # where orjson stopped, as a character's index


def _constant(name: str) -> float:
    raise ValueError(_NOT_A_NUMBER)


def _integer(text: str) -> int | float:
    return int(text) if len(text.lstrip("-")) <= 19 else _float(text)


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError("a number too large for a 64-bit float")
    return value


def read_json(path: Path, limit: int | None = None) -> Any:
    """A JSON file read whole and decoded strictly: OSError (Unreadable too) when it cannot be
    read, ValueError (UnicodeDecodeError among them) when it is no JSON."""
    return loads(read_whole(path, limit))
