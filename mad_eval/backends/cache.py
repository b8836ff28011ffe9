"""A persistent request cache (one SQLite file): the same request to the same model never
costs twice, across re-runs, crashes and analyses.

The key is the backend's identity (model spec, endpoints, API, prompt template), the exact
messages, the sampling parameters with the seed, the request's extra body fields, and the
agent state a simulated agent carries. Timeouts, retries and concurrency are not in it:
they never change an answer. Only answers are stored; a failed request is asked again next time.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import sqlite3
import time
from pathlib import Path
from typing import Any

from mad_eval.backends.base import Backend, BackendError, Generation, Request
from mad_eval.store.files import refuse_links, refuse_records

_STORED = (
    "text",
    "finish_reason",
    "prompt_tokens",
    "completion_tokens",
    "state",
    "endpoint",
    "served_model",
    "reasoning",
    "reasoning_tokens",
    "truncated",
    "refusal",
    "usage_invalid",
    "reply",
)
# Marks a SQLite file as a mad-eval request cache ("MADc"), so another program's database
# given as --cache is refused instead of written into.
APPLICATION_ID = 0x4D414463
_COLUMNS = ["key", "value", "created"]
_COMPANIONS = ("-journal", "-wal", "-shm")  # the files SQLite keeps beside a database


class CacheError(BackendError):
    """The request cache cannot be read or written: the run stops, nothing half-recorded."""


class RequestCache:
    def __init__(self, path: Path | str):
        self.path = Path(path)
        refuse_records(self.path, "--cache")
        for suffix in ("", *_COMPANIONS):  # SQLite writes each in place
            refuse_links(Path(f"{self.path}{suffix}"))
        self.hits = 0
        self.stored = 0
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # Autocommit: every answer is on disk when put() returns.
            self._db = sqlite3.connect(self.path, isolation_level=None, timeout=30)
            self._claim()
            self._db.execute("PRAGMA journal_mode=WAL")  # other processes may read meanwhile
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS answers (key TEXT PRIMARY KEY, value TEXT NOT NULL,"
                " created REAL NOT NULL)"
            )
        except (OSError, sqlite3.Error) as exc:
            raise CacheError(f"cannot use {self.path} as a request cache: {exc}.") from None

    def _claim(self) -> None:
        """Mark a new file as ours; refuse one that holds another program's tables. A cache
        written before the mark existed has exactly our one table, and is marked now."""
        (app,) = self._db.execute("PRAGMA application_id").fetchone()
        if app == APPLICATION_ID:
            return
        tables = [row[0] for row in self._db.execute("SELECT name FROM sqlite_master")]
        columns = [row[1] for row in self._db.execute("PRAGMA table_info(answers)")]
        if tables and (tables != ["answers", "sqlite_autoindex_answers_1"] or columns != _COLUMNS):
            raise CacheError(
                f"{self.path} is a database of another program (it holds "
                f"{', '.join(t for t in tables if not t.startswith('sqlite_'))}), not a mad-eval "
                "request cache; pass a new file to --cache."
            )
        self._db.execute(f"PRAGMA application_id = {APPLICATION_ID}")

    def get(self, key: str) -> dict[str, Any] | None:
        try:
            row = self._db.execute("SELECT value FROM answers WHERE key = ?", (key,)).fetchone()
            if row is None:
                return None
            value = json.loads(row[0])
        except (sqlite3.Error, ValueError) as exc:
            raise self._broken("read", exc) from None
        self.hits += 1
        return value

    def put(self, key: str, value: dict[str, Any]) -> None:
        try:
            self._db.execute(
                "INSERT OR REPLACE INTO answers VALUES (?, ?, ?)",
                (key, json.dumps(value, ensure_ascii=False), time.time()),
            )
        except sqlite3.Error as exc:
            raise self._broken("written", exc) from None
        self.stored += 1

    def _broken(self, how: str, exc: Exception) -> CacheError:
        return CacheError(
            f"the request cache {self.path} cannot be {how} ({exc}); free space or mend the "
            "file (or pass another --cache), then run the same command again to resume."
        )

    def close(self) -> None:
        self._db.close()


def request_key(identity: dict[str, Any], request: Request) -> str:
    payload: dict[str, Any] = {
        "backend": identity,
        "messages": request.messages,
        "sampling": _fields(request.sampling),
        "state": request.state,
    }
    if request.extra_body:  # only when given, so caches from before it keep answering
        payload["extra_body"] = request.extra_body
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def _fields(record: Any) -> dict[str, Any]:
    """A flat dataclass as a dict: dataclasses.asdict's result without its deep copy, which
    cost more than the rest of the key."""
    return {f.name: getattr(record, f.name) for f in dataclasses.fields(record)}


class Cached(Backend):
    """Answers from the cache when it can, from `inner` (and into the cache) when it cannot."""

    def __init__(self, inner: Backend, cache: RequestCache, identity: dict[str, Any]):
        self.inner = inner
        self.cache = cache
        self.identity = identity
        self.spec = inner.spec

    async def generate(self, request: Request) -> Generation:
        key = request_key(self.identity, request)
        hit = self.cache.get(key)
        if hit is not None:  # one stored before `reply` was kept is quoted rebuilt (verbatim)
            return Generation(**hit, attempts=0, cached=True)
        generation = await self.inner.generate(request)
        if generation.error is None:
            self.cache.put(key, {name: getattr(generation, name) for name in _STORED})
        return generation

    async def probe(self, request: Request) -> None:
        await self.inner.probe(request)

    async def check(self) -> None:
        await self.inner.check()
        self.max_model_len = self.inner.max_model_len

    async def aclose(self) -> None:
        await self.inner.aclose()
