"""Mutated run folders for tests/test_fuzz_folders.py: a seeded mutator of a finished run's
files (turns, manifest, metrics, questions, verdicts) and the worker that throws each
mutated folder at view, table and report, in a process of bounded memory."""

from __future__ import annotations

import json
import os
import random
import resource
import shutil
import signal
import traceback
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

MEMORY_LIMIT = 3 << 30  # address space of a fuzzing process: a leak of gigabytes fails fast
CALL_LIMIT_S = 60  # a call past this is a hang (a CPU-starved CI machine is far below it)
LONGEST_SENTENCE = 2000

FILES = {  # file -> weight: the records most readers parse come up most
    "turns.jsonl": 10,
    "manifest.json": 6,
    "metrics.json": 3,
    "questions.jsonl": 2,
    "judge.jsonl": 2,
}


def _deep(rng: random.Random) -> str:
    depth = rng.choice([100, 1000, 100_000])
    opener, closer = rng.choice([("[", "]"), ('{"a": ', "}")])
    return opener * depth + "1" + closer * depth


def _value(rng: random.Random) -> Any:
    """A hostile JSON value, as text (so numbers JSON cannot hold and deep nests fit)."""
    choices: list[Callable[[], str]] = [
        lambda: "NaN",
        lambda: "Infinity",
        lambda: "-Infinity",
        lambda: "1e400",
        lambda: "-1",
        lambda: "0",
        lambda: "-0.0",
        lambda: str(rng.choice([2**31, 2**63, 10**12, 100_000, 100_000_000])),
        lambda: "9" * rng.choice([20, 4301, 5000]),
        lambda: "true",
        lambda: "false",
        lambda: "null",
        lambda: '""',
        lambda: "[]",
        lambda: "{}",
        lambda: '"x"',
        lambda: '"3"',
        lambda: json.dumps(rng.choice(['=HYPERLINK("http://x")', "</script><b>", "\u202e"])),
        lambda: json.dumps("\\boxed{" * rng.choice([10, 10_000])),
        lambda: '"\\ud800"',
        lambda: json.dumps("y" * rng.choice([1000, 100_000])),
        lambda: json.dumps({"answer": "5", "correct": True}),
        lambda: json.dumps([0, 1, 2, -1, 99]),
        lambda: json.dumps("../../etc/passwd"),
        lambda: _deep(rng),
    ]
    return rng.choice(choices)()


def _json_line_edit(rng: random.Random, line: str) -> str:
    """One edit of a JSON object's text: a field set, a duplicate key, a key dropped, or a
    cut."""
    try:
        record = json.loads(line)
    except (ValueError, RecursionError):
        record = None
    how = rng.randrange(6)
    if isinstance(record, dict) and record and how <= 2:
        key = rng.choice([*record, "extra"])
        fields = [f"{json.dumps(k)}: {json.dumps(v)}" for k, v in record.items() if k != key]
        value = _value(rng)
        if how == 0:  # the field replaced
            fields.insert(rng.randrange(len(fields) + 1), f"{json.dumps(key)}: {value}")
        elif how == 1:  # the field twice: as it was, and the hostile value
            if key in record:
                fields.append(f"{json.dumps(key)}: {json.dumps(record[key])}")
            fields.insert(rng.choice([0, len(fields)]), f"{json.dumps(key)}: {value}")
        return "{" + ", ".join(fields) + "}"
    if how == 3 and line:
        return line[: rng.randrange(len(line))]
    if how == 4:
        return _value(rng)
    data = bytearray(line.encode("utf-8", errors="surrogateescape"))
    for _ in range(rng.randint(1, 3)):
        if data:
            data[rng.randrange(len(data))] = rng.randrange(256)
    return data.decode("utf-8", errors="surrogateescape")


def _edit_lines(rng: random.Random, text: str) -> str:
    lines = text.split("\n")
    body = [line for line in lines if line] or [""]
    how = rng.randrange(7)
    at = rng.randrange(len(body))
    if how == 0:
        del body[at]
    elif how == 1:
        body.insert(rng.randrange(len(body) + 1), body[at])
    elif how == 2:
        other = rng.randrange(len(body))
        body[at], body[other] = body[other], body[at]
    elif how == 3:
        body.append(body[at][: rng.randrange(len(body[at]) + 1)])  # a partial last line
        return "\n".join(body)
    else:
        body[at] = _json_line_edit(rng, body[at])
    return "\n".join(body) + "\n"


def _edit_document(rng: random.Random, text: str) -> str:
    """manifest.json or metrics.json: one value somewhere in the document replaced, or a
    duplicate key, or a cut, or raw bytes changed."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return _json_line_edit(rng, text)
    holders: list[tuple[Any, Any]] = []

    def walk(node: Any) -> None:
        items = node.items() if isinstance(node, dict) else enumerate(node)
        for key, value in items:
            holders.append((node, key))
            if isinstance(value, dict | list) and len(holders) < 5000:
                walk(value)

    if isinstance(data, dict | list):
        walk(data)
    if not holders or rng.random() < 0.25:
        return _json_line_edit(rng, text)
    node, key = rng.choice(holders)
    marker = "\u0000FUZZ\u0000"
    if rng.random() < 0.15 and isinstance(node, dict):
        del node[key]
        return json.dumps(data, indent=2)
    node[key] = marker
    written = json.dumps(data, indent=2)
    return written.replace(json.dumps(marker), _value(rng), 1)


def _replace_file(rng: random.Random, path: Path) -> None:
    """The file swapped for something that is not it: gone, a folder, a link, a FIFO,
    bytes that are not UTF-8."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)
    how = rng.randrange(6)
    if how == 1:
        path.mkdir()
    elif how == 2:
        path.symlink_to("/dev/zero")
    elif how == 3:
        path.symlink_to(path.parent / "nowhere")
    elif how == 4:
        os.mkfifo(path)
    elif how == 5:
        path.write_bytes(b"\xff\xfe\x00" * rng.choice([1, 1000]))


def mutate(rng: random.Random, folder: Path) -> list[str]:
    """Apply one to three mutations to the run folder; return what was done, to reproduce."""
    done = []
    names, weights = zip(*FILES.items(), strict=True)
    for _ in range(rng.randint(1, 3)):
        name = rng.choices(names, weights)[0]
        path = folder / name
        if rng.random() < 0.05:
            _replace_file(rng, path)
            done.append(f"{name} replaced")
            continue
        if not path.is_file() or path.is_symlink():
            continue
        text = path.read_bytes().decode("utf-8", errors="surrogateescape")
        edit = _edit_lines if name.endswith(".jsonl") else _edit_document
        text = edit(rng, text)
        path.write_bytes(text.encode("utf-8", errors="surrogateescape"))
        done.append(f"{name} edited")
    return done


class Hang(Exception):
    pass


def _alarm(signum: int, frame: Any) -> None:
    raise Hang


def bound_process() -> None:
    """The fuzzing process: bounded address space, and quiet."""
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    signal.signal(signal.SIGALRM, _alarm)
    warnings.simplefilter("ignore")
    import mad_eval.measure.bootstrap as bootstrap

    # Intervals' precision is not under test: a tenth of the resamples, the same code.
    bootstrap.REPLICATES = 100
    bootstrap.replicate_values.__defaults__ = (100, 0)


def _outcome(call: Callable[[], Any]) -> str | None:
    """None for a result or one sentence; otherwise what went wrong."""
    from mad_eval.errors import UserError

    signal.alarm(CALL_LIMIT_S)
    try:
        call()
    except UserError as exc:
        text = str(exc)
        if not text or "\n" in text.strip() or len(text) > LONGEST_SENTENCE:
            return f"not one sentence ({len(text)} characters): {text[:300]!r}"
        return None
    except Hang:
        return f"no end within {CALL_LIMIT_S} s"
    except BaseException:
        return traceback.format_exc(limit=-4)
    finally:
        signal.alarm(0)
    return None


def fuzz(base: str, seeds: list[int], work: str) -> list[str]:
    """Each seed's mutated copy of `base` thrown at view, table and report (in that order:
    report rewrites metrics.json); the failures, each naming its seed and mutations."""
    import mad_eval

    failures = []
    root = Path(work)
    folder = root / "run"
    calls = {
        "view": lambda: mad_eval.view([folder], out=root / "site"),
        "table": lambda: mad_eval.table([folder], replicates=100),
        "report": lambda: mad_eval.report(folder),
    }
    for seed in seeds:
        rng = random.Random(seed)
        if folder.exists():
            shutil.rmtree(folder)
        shutil.copytree(base, folder)
        done = mutate(rng, folder)
        for name, call in calls.items():
            problem = _outcome(call)
            if problem is not None:
                failures.append(f"seed {seed} ({', '.join(done)}), {name}: {problem}")
    return failures
