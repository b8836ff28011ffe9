"""A persistent request cache (one SQLite file): the same request to the same model never
costs twice, across re-runs, crashes and analyses.

The key is the backend's identity (model spec, endpoints, API, prompt template), the exact
messages, the sampling parameters with the seed, and the agent state a simulated agent
carries. Timeouts, retries and concurrency are not in it: they never change an answer.
Only answers are stored; a failed request is asked again next time.
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

_STORED = ("text", "finish_reason", "prompt_tokens", "completion_tokens", "state", "endpoint")


class RequestCache:
    def __init__(self, path: Path | str):
        self.path = Path(path)
        self.hits = 0
        self.stored = 0
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # Autocommit: every answer is on disk when put() returns.
            self._db = sqlite3.connect(self.path, isolation_level=None, timeout=30)
            self._db.execute("PRAGMA journal_mode=WAL")  # other processes may read meanwhile
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS answers (key TEXT PRIMARY KEY, value TEXT NOT NULL,"
                " created REAL NOT NULL)"
            )
        except (OSError, sqlite3.Error) as exc:
            raise BackendError(f"cannot use {self.path} as a request cache: {exc}.") from None

    def get(self, key: str) -> dict[str, Any] | None:
        row = self._db.execute("SELECT value FROM answers WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        self.hits += 1
        return json.loads(row[0])

    def put(self, key: str, value: dict[str, Any]) -> None:
        self._db.execute(
            "INSERT OR REPLACE INTO answers VALUES (?, ?, ?)",
            (key, json.dumps(value, ensure_ascii=False), time.time()),
        )
        self.stored += 1

    def close(self) -> None:
        self._db.close()


def request_key(identity: dict[str, Any], request: Request) -> str:
    payload = {
        "backend": identity,
        "messages": request.messages,
        "sampling": dataclasses.asdict(request.sampling),
        "state": request.state,
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


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
        if hit is not None:
            return Generation(**hit, attempts=0, cached=True)
        generation = await self.inner.generate(request)
        if generation.error is None:
            self.cache.put(key, {name: getattr(generation, name) for name in _STORED})
        return generation

    async def check(self) -> None:
        await self.inner.check()
        self.max_model_len = self.inner.max_model_len

    async def aclose(self) -> None:
        await self.inner.aclose()
