"""Benchmark files in a folder, the way --data-dir and MAD_EVAL_DATA read them: written from
the hub's copy of each benchmark (`mad-eval data fetch`) and checked offline (`mad-eval data
check`), so a machine without the hub can be given the files by copying a folder."""

from __future__ import annotations

import json
import math
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mad_eval.data.benchmarks import (
    BenchmarkError,
    BenchmarkSpec,
    DataMissingError,
    Rows,
    hub_rows,
    list_specs,
    local_questions,
    named_spec,
    table_questions,
)
from mad_eval.grading.kinds import get_kind


@dataclass(frozen=True)
class FileState:
    """One benchmark's file in a folder: how many questions it holds, or the problem (one
    sentence); `note` says what was done (written, kept) or why there is no file."""

    benchmark: str  # as named: math500, mmlu:anatomy, a spec's path; "" for no spec's file
    file: str | None  # the [local] file name; None for a built-in benchmark
    rows: int | None = None
    problem: str | None = None
    note: str = ""

    @property
    def ok(self) -> bool:
        return self.problem is None


def check(benchmark: str, folder: Path) -> FileState:
    """Whether `folder` holds the benchmark's file with every field its spec names, each
    row read as a run reads it (nothing is downloaded)."""
    spec = named_spec(benchmark)
    if spec.builtin or not spec.local:
        return _no_file(benchmark, spec, "needs no file")
    file = spec.local["file"]
    try:
        questions = local_questions(spec, folder, benchmark)
    except DataMissingError:
        return FileState(benchmark, file, problem=f"{file} is not in {folder}.")
    except BenchmarkError as exc:
        return FileState(benchmark, file, problem=_sentence(str(exc)))
    return FileState(benchmark, file, len(questions))


def _no_file(benchmark: str, spec: BenchmarkSpec, built_in: str) -> FileState:
    """A benchmark without a [local] file: built in (`built_in` says what that means here),
    or a spec that names none."""
    if spec.builtin:
        return FileState(benchmark, None, note=f"built in: {built_in}")
    return FileState(benchmark, None, problem=f"{_no_local(spec)}.")


def check_folder(folder: Path) -> list[FileState]:
    """Every benchmark file `folder` holds, checked: a file is its own-named spec's
    (mmlu_professional_medicine.jsonl), else the first spec's by name that reads it, else
    (mmlu_anatomy.jsonl) a parameter's value of the first whose file name takes one. A .jsonl
    file no spec names is listed as such."""
    present = {path.name for path in folder.glob("*.jsonl") if path.is_file()}
    specs = [spec for spec in list_specs() if spec.local]
    files = {spec.name: (spec.local or {})["file"] for spec in specs}
    found: dict[str, str] = {}  # file name -> benchmark
    for name in sorted(files, key=lambda name: files[name] != f"{name}.jsonl"):
        found.setdefault(files[name], name)
    patterns = [
        (_file_pattern(spec, param), spec.name, param)
        for spec in specs
        for param in spec.params
        if len(spec.params) == 1
    ]
    for name in sorted(present - set(found)):
        for pattern, stem, param in patterns:
            match = pattern.fullmatch(name)
            if match:
                found[name] = f"{stem}:{match[param]}"
                break
    states = [check(found[name], folder) for name in sorted(present) if name in found]
    states += [
        FileState("", name, note="no benchmark spec names this file (a run reads it by its path)")
        for name in sorted(present - set(found))
    ]
    return states


def _file_pattern(spec: BenchmarkSpec, param: str) -> re.Pattern[str]:
    """The spec's [local] file name with its parameter's value left open."""
    value = spec.params[param]
    file = spec.local["file"] if spec.local else ""
    head, _, tail = file.partition(value)
    return re.compile(f"{re.escape(head)}(?P<{param}>[\\w.-]+){re.escape(tail)}")


def fetch(benchmark: str, folder: Path, force: bool = False) -> FileState:
    """Write the benchmark's [local] file into `folder` from its [hub] file, each row under
    the [local] table's field names, so a run with --data-dir reads the same questions the
    hub gives; an existing file is kept (and checked) unless `force`. A HubError when the
    hub file cannot be had."""
    spec = named_spec(benchmark)
    if spec.builtin or not spec.local:
        return _no_file(benchmark, spec, "nothing to fetch")
    file = spec.local["file"]
    if not spec.hub:
        problem = f"its spec names no [hub] dataset to fetch {file} from."
        return FileState(benchmark, file, problem=problem)
    target = folder / file
    if target.exists() and not force:
        kept = check(benchmark, folder)
        return FileState(
            benchmark,
            file,
            kept.rows,
            kept.problem,
            "kept: already there (--force writes it again)",
        )
    rows = hub_rows(spec)
    written = local_rows(spec, rows)
    same = _same_questions(spec, rows, written)
    if same is not None:
        return FileState(benchmark, file, problem=same)
    _write_jsonl(target, written)
    return FileState(benchmark, file, len(written), note="written")


def local_rows(spec: BenchmarkSpec, rows: Rows) -> list[dict[str, Any]]:
    """Hub rows as the [local] table names their fields: each field the kind reads moved to
    its local name, the question id written where the local table reads one (the id a run
    gives a hub row: the hub's, else NAME-INDEX), every other column kept as it is (one that
    collides with a written field as source_NAME), all as plain JSON values."""
    hub, local = spec.hub or {}, spec.local or {}
    kind = get_kind(spec.kind)
    mapped = [key for key in (*kind.fields, *kind.optional) if hub.get(key) and local.get(key)]
    written_rows = []
    for index, (_, row) in enumerate(rows):
        out: dict[str, Any] = {}
        if local.get("id"):
            qid = _get(row, hub["id"]) if hub.get("id") else f"{spec.ids or spec.name}-{index}"
            out[local["id"]] = _plain(qid)
        used = {hub["id"].split(".")[0]} if hub.get("id") and local.get("id") else set()
        for key in mapped:
            source, dest = hub[key], local[key]
            if source == dest:  # the whole column, e.g. choices with its labels
                top = source.split(".")[0]
                out[top] = _plain(row.get(top))
            else:
                _put(out, dest, _plain(_get(row, source)))
            used.add(source.split(".")[0])
        for column, value in row.items():
            if column in used:
                continue
            name = column if column not in out else f"source_{column}"
            if name not in out:
                out[name] = _plain(value)
        written_rows.append(out)
    return written_rows


def _same_questions(spec: BenchmarkSpec, rows: Rows, written: list[dict[str, Any]]) -> str | None:
    """None when the written rows read as the same questions as the hub rows (ids, texts,
    golds); else the problem, so no file is written that a run would read otherwise."""
    hub = table_questions(spec, rows, "hub")
    local = table_questions(spec, [(f"row {i}", row) for i, row in enumerate(written)], "local")
    file = (spec.local or {}).get("file")
    for a, b in zip(hub, local, strict=True):
        if (a.id, a.text, a.gold) != (b.id, b.text, b.gold):
            how = f"as {b.id}" if a.id != b.id else "with another text or gold"
            return (
                f"the hub's question {a.id} would be read back from {file} {how}; make the "
                "spec's [local] table read the fields (and id) its [hub] table reads."
            )
    return None


def _get(row: dict[str, Any], path: str) -> Any:
    value: Any = row
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def _put(row: dict[str, Any], path: str, value: Any) -> None:
    *parents, last = path.split(".")
    for part in parents:
        row = row.setdefault(part, {})
    row[last] = value


def _plain(value: Any) -> Any:
    """A parquet value (numpy arrays and scalars, NaN for none) as plain JSON."""
    if hasattr(value, "tolist"):  # numpy arrays and scalars alike
        value = value.tolist()
    if isinstance(value, dict):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    if isinstance(value, float) and math.isnan(value):
        return None
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)  # a timestamp, bytes: as text


def _write_jsonl(target: Path, rows: list[dict[str, Any]]) -> None:
    """UTF-8 JSON Lines, replaced whole: a stopped fetch leaves no half file."""
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, temp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8", newline="\n") as out:
            for row in rows:
                line = json.dumps(row, ensure_ascii=False)
                try:
                    line.encode("utf-8")
                except UnicodeEncodeError:  # a lone surrogate: escaped, as JSON may
                    line = json.dumps(row)
                out.write(line + "\n")
        os.replace(temp, target)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


def _no_local(spec: BenchmarkSpec) -> str:
    return f"its spec names no [local] file ({spec.name} is read from the hub only)"


def _sentence(text: str) -> str:
    return text if text.endswith(".") else f"{text}."
