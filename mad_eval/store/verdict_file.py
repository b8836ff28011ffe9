"""The verdict cache's file: one SQLite table beside a run's request cache (`--cache
requests.sqlite` keeps its verdicts in `requests.sqlite.verdicts`), so every run, seed, cell
and re-run that shares the request cache shares what math-verify decided
(mad_eval.grading.verdicts).

Verdicts only save time, so this file never stops a run: a file that cannot be opened, read
or written (another program's database, a link, a full disk, a lock held too long) is given up
with one warning, and grading goes on with what it holds in memory.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from pathlib import Path

from mad_eval.grading.verdicts import VERDICTS
from mad_eval.store.files import StoreError, refuse_links

log = logging.getLogger(__name__)

# Marks a SQLite file as a mad-eval verdict cache ("MADv"): another program's database is
# never written into.
APPLICATION_ID = 0x4D414476
_COMPANIONS = ("-journal", "-wal", "-shm")
# The longest verdict kept and read back, in characters (a reading's answer is its longest
# part): a read of the file, anyone's to edit, stays bounded; a longer verdict is asked again.
_LONGEST = 4096
_WAIT_S = 5.0  # the most a verdict waits on another process's write before being given up


def beside(cache: Path | str) -> Path:
    """The verdict file kept beside the request cache `cache`."""
    path = Path(cache)
    return path.with_name(path.name + ".verdicts")


class VerdictFile:
    """Verdicts by key, in one table; safe to share between threads and processes."""

    def __init__(self, path: Path):
        self.path = path
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        try:
            if path.exists() and not path.is_symlink() and not path.is_file():
                raise StoreError("something other than a file is there")
            for suffix in ("", *_COMPANIONS):  # SQLite writes each in place
                refuse_links(Path(f"{path}{suffix}"))
            db = sqlite3.connect(
                path, isolation_level=None, timeout=_WAIT_S, check_same_thread=False
            )
            self._db = db
            (app,) = db.execute("PRAGMA application_id").fetchone()
            tables = db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
            if app != APPLICATION_ID and tables:
                raise sqlite3.DatabaseError("it is a database of another program")
            db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            db.execute("PRAGMA journal_mode=WAL")  # other processes read and write meanwhile
            db.execute("PRAGMA synchronous=NORMAL")
            db.execute(
                "CREATE TABLE IF NOT EXISTS verdicts (key TEXT PRIMARY KEY, value TEXT NOT NULL,"
                " created REAL NOT NULL) WITHOUT ROWID"
            )
        except (OSError, sqlite3.Error, StoreError) as exc:
            self._give_up("opened", exc)

    def get(self, key: str) -> str | None:
        with self._lock:
            if self._db is None:
                return None
            try:
                row = self._db.execute(
                    "SELECT value FROM verdicts WHERE key = ? AND length(value) <= ?",
                    (key, _LONGEST),
                ).fetchone()
            except sqlite3.Error as exc:
                self._give_up("read", exc)
                return None
        return row[0] if row else None

    def put(self, key: str, value: str) -> None:
        with self._lock:
            if self._db is None or len(value) > _LONGEST:
                return
            try:
                self._db.execute(
                    "INSERT OR IGNORE INTO verdicts VALUES (?, ?, ?)", (key, value, time.time())
                )
            except sqlite3.Error as exc:
                self._give_up("written", exc)

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None

    def _give_up(self, how: str, exc: Exception) -> None:
        """One warning; from now on verdicts are kept in memory only."""
        log.warning(
            "the verdict cache %s cannot be %s: %s; grading goes on without it, keeping "
            "verdicts in memory only",
            self.path,
            how,
            str(exc).rstrip("."),
        )
        if self._db is not None:
            self._db.close()
            self._db = None


def keep_verdicts_beside(cache: Path | str) -> None:
    """Keep this process's verdicts in the file beside the request cache `cache` from now on
    (the file in use before is closed)."""
    path = beside(cache)
    if getattr(VERDICTS.shelf, "path", None) != path:
        VERDICTS.shelve(VerdictFile(path))
