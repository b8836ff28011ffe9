"""Benchmark specs (TOML data files) and their rows: local JSONL, the Hugging Face hub, built-in."""

from __future__ import annotations

import gzip
import json
import math
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, NoReturn, cast

from mad_eval.data import arith
from mad_eval.data import hub as online
from mad_eval.errors import UserError
from mad_eval.grading.answers import protocol_name
from mad_eval.grading.grader import check_answer_protocol
from mad_eval.grading.kinds import KINDS, get_kind
from mad_eval.records import Question
from mad_eval.sanitize import valid_data
from mad_eval.settings.config import spec_files, spec_folders
from mad_eval.settings.tomlfile import TomlFileError, read_toml
from mad_eval.words import did_you_mean

DATA_ENV = "MAD_EVAL_DATA"
DEFAULT_MAX_TOKENS = 4096
_SPEC_KEYS = (
    *("name", "description", "kind", "answer", "max_tokens", "instruction", "seed", "base"),
    *("params", "ids"),
    *("hub", "local", "builtin"),
)
_TABLES = {"hub": (".jsonl", ".jsonl.gz", ".parquet"), "local": (".jsonl",)}
# Fields a table may map for any kind; each kind names the row fields it reads (Kind.fields,
# all required) and may map (Kind.optional).
_OPTIONAL = ("id", "revision")
Rows = list[tuple[str, dict[str, Any]]]  # (where, row), where = "math500.jsonl line 7"


class BenchmarkError(UserError, ValueError):
    """A bad benchmark name, spec or row; the message is one sentence naming the bad value."""


# How a caller names the folder of benchmark files, as a DataMissingError advises it: the
# Python API's keyword (the default), a command's --data-dir, an experiment file's key, or
# only the environment variable (a command without --data-dir).
Via = Literal["keyword", "option", "experiment", "env"]
_VIA: dict[Via, str] = {
    "keyword": "pass data_dir= a folder holding {file} or set {env} to one",
    "option": "pass --data-dir with a folder holding {file} or set {env} to one",
    "experiment": "set data_dir in the experiment file's [settings] to a folder holding {file} "
    "(relative to the file) or set {env} to one",
    "env": "set {env} to a folder holding {file}",
}


class DataMissingError(BenchmarkError):
    """A benchmark's file is neither in the folder nor on the hub; the advice names how the
    caller gives a folder (`via`), which each front end sets with `advised`."""

    def __init__(self, problem: str, benchmark: str, file: str, via: Via = "keyword") -> None:
        self.problem, self.benchmark, self.file, self.via = problem, benchmark, file, via
        advice = _VIA[via].format(file=file, env=DATA_ENV)
        super().__init__(
            f"{problem}; {advice} (`mad-eval data fetch {benchmark} --to FOLDER` writes it from "
            "the hub, `mad-eval data check FOLDER` checks it)."
        )

    def advised(self, via: Via) -> DataMissingError:
        """The same error, its advice worded for another caller."""
        return DataMissingError(self.problem, self.benchmark, self.file, via)


class HubError(BenchmarkError):
    """A hub file that could not be had; `offline`: the hub cannot be reached (or the client
    is told not to: HF_HUB_OFFLINE) and the hub cache lacks the file, `why` says which."""

    def __init__(self, problem: str, why: str, offline: bool) -> None:
        self.problem, self.why, self.offline = problem, why, offline
        super().__init__(f"{problem}.")


@dataclass(frozen=True)
class BenchmarkSpec:
    """Where a benchmark's rows live, which grader reads them and its token budget."""

    name: str
    description: str
    kind: str
    max_tokens: int
    hub: dict[str, Any] | None = None
    local: dict[str, Any] | None = None
    path: Path | None = None
    builtin: dict[str, Any] | None = None
    instruction: str | None = None  # put before each question (what to do with the options)
    seed: int = 0  # a preference question's A/B order is drawn from (seed, question id)
    params: dict[str, str] = field(default_factory=dict)  # e.g. MMLU's subject
    # Where replies write their answers (answers.ANSWER_PROTOCOLS); the spec parser resolves
    # an unnamed one to the kind's default.
    answer: str = "boxed"
    # The name question ids are numbered under when rows have none (default: the spec's), so
    # a variant of a spec (aime24_dapo) asks and records the same ids as the spec itself.
    ids: str | None = None

    @property
    def source(self) -> str:
        """Where the rows come from, for `mad-eval benchmarks`."""
        if self.builtin:
            return f"built in ({self.builtin['generator']}, {self.builtin['size']} questions)"
        found = [f"hub {self.hub['repo']}"] if self.hub else []
        found += [f"local {self.local['file']}"] if self.local else []
        return "; ".join(found)

    @property
    def title(self) -> str:
        """The name tables print: the description's lead ("MATH500: ..."), else the name."""
        lead, colon, _ = self.description.partition(": ")
        return lead if colon and len(lead) <= 40 else self.name


def spec_dirs() -> list[Path]:
    """The project's specs first, then ./benchmarks: a user's spec adds a name, and one of
    a built-in name is read only when given as a path."""
    return spec_folders("benchmarks")


def list_specs() -> list[BenchmarkSpec]:
    """Every spec, the first of each name in spec_dirs() order, sorted by name."""
    found = spec_files("benchmarks")
    return [_parse_spec(found[name]) for name in sorted(found)]


def catalogue() -> list[tuple[str, Path, BenchmarkSpec | BenchmarkError]]:
    """Every spec as list_specs finds it, or why it cannot be used: `mad-eval benchmarks`
    lists a broken file (a cloned repository's ./benchmarks) as such, and the others."""
    found: list[tuple[str, Path, BenchmarkSpec | BenchmarkError]] = []
    for name, path in sorted(spec_files("benchmarks").items()):
        try:
            found.append((name, path, _parse_spec(path)))
        except BenchmarkError as exc:
            found.append((name, path, exc))
    return found


def load_spec(name: str) -> BenchmarkSpec:
    """Look a spec up by name, with parameters after a colon (`mmlu:anatomy`,
    `mmlu:subject=anatomy`); an unknown name lists the known ones so typos are easy to fix."""
    stem, colon, given = name.partition(":")
    path = _spec_path(stem)
    if path is None:
        names = sorted(spec_files("benchmarks"))  # names only: none is read
        raise BenchmarkError(
            f"unknown benchmark '{stem}'{did_you_mean(stem, names, 0.8)}; known: "
            f"{', '.join(names)}; or give a path to a .jsonl file"
        )
    return _parse_spec(path, given if colon else None)


def _spec_path(stem: str) -> Path | None:
    if re.fullmatch(r"[\w.-]+", stem):
        for folder in spec_dirs():
            if (folder / f"{stem}.toml").is_file():
                return folder / f"{stem}.toml"
    return None


def _overrides(
    given: str, names: list[str], path: Path, takes: Mapping[str, str]
) -> dict[str, str]:
    """`anatomy` (for a spec with one parameter) or `subject=anatomy,...` as a dict; `takes`:
    what a built-in generator's parameters accept, for the sentence refusing a value."""
    found: dict[str, str] = {}
    for item in given.split(","):
        key, equals, value = item.partition("=")
        if not equals and len(names) == 1:
            key, value = names[0], key
        if key in names and key in takes and not re.fullmatch(r"[\w.-]+", value):
            raise BenchmarkError(
                f"benchmark parameter '{item}' is not accepted by {path.stem}: {key} takes "
                f"{takes[key]}"
            )
        if key not in names or not re.fullmatch(r"[\w.-]+", value):
            accepted = ", ".join(f"{n}=VALUE" for n in names) or "none"
            raise BenchmarkError(
                f"benchmark parameter '{item}' is not accepted by {path.stem}; its parameters: "
                f"{accepted} (values: letters, digits, _ . -)"
            )
        if key in found:
            raise BenchmarkError(f"benchmark parameter '{key}' is given twice in '{given}'")
        found[key] = value
    return found


def named_spec(benchmark: str) -> BenchmarkSpec:
    """The spec of a name (with parameters) or of a .toml file's path."""
    path = Path(benchmark)
    if benchmark.endswith(".toml"):
        if not path.is_file():
            raise BenchmarkError(f"benchmark file '{benchmark}' does not exist")
        return _parse_spec(path)
    return load_spec(benchmark)


def spec_kind(benchmark: str | Path) -> tuple[str, str]:
    """(kind, default answer protocol) of a benchmark, found without reading its rows, so a
    setting the kind cannot take is refused before any data is fetched."""
    benchmark = str(benchmark)
    if benchmark.endswith(".jsonl"):
        return "math", "boxed"
    path = Path(benchmark)
    spec = _parse_spec(path) if benchmark.endswith(".toml") and path.is_file() else None
    spec = spec or load_spec(benchmark)
    return spec.kind, spec.answer


def load_questions(
    benchmark: str | Path, data_dir: Path | None = None, limit: int | None = None
) -> tuple[BenchmarkSpec, list[Question]]:
    """Resolve a spec name, a .toml spec or any .jsonl file; return the first `limit` questions."""
    benchmark = str(benchmark)
    if limit is not None and (type(limit) is not int or limit < 1):
        raise BenchmarkError(f"limit must be a positive integer, got {limit!r}")
    path = Path(benchmark)
    if benchmark.endswith((".jsonl", ".toml")) and not path.is_file():
        raise BenchmarkError(f"benchmark file '{benchmark}' does not exist")
    if benchmark.endswith(".jsonl"):  # any JSONL: 'question' or 'problem', 'answer', optional 'id'
        rows = read_jsonl(path, path.name)
        first = rows[0][1] if rows else {}
        question = "problem" if "question" not in first and "problem" in first else "question"
        fields = {"file": str(path), "question": question, "answer": "answer"}
        fields.update({"id": "id"} if "id" in first else {})
        spec = BenchmarkSpec(
            path.stem, f"questions from {path}", "math", DEFAULT_MAX_TOKENS, local=fields, path=path
        )
        return spec, _to_questions(rows, fields, spec)[:limit]
    spec = _parse_spec(path) if benchmark.endswith(".toml") else load_spec(benchmark)
    return spec, _spec_questions(spec, data_dir, benchmark)[:limit]


def _raw_spec(path: Path, depth: int = 0) -> dict[str, Any]:
    """A spec file's TOML; with `base = "other"`, the other spec's TOML under its own keys
    (parameters merged), so a preset names only what it changes."""
    try:
        raw = read_toml(path)
    except (OSError, TomlFileError) as exc:
        problem = exc if isinstance(exc, TomlFileError) else exc.strerror or exc
        raise BenchmarkError(f"cannot read benchmark spec {path}: {problem}") from None
    if "base" not in raw:
        return raw
    base = _spec_path(str(raw["base"]))
    if base is None or base == path or depth > 4:
        raise BenchmarkError(f"{path.name}: base '{raw['base']}' is no other benchmark spec")
    if not isinstance(raw.get("params", {}), dict):
        raise BenchmarkError(f"{path.name}: 'params' must be a [params] table")
    merged = {**_raw_spec(base, depth + 1), **raw}
    merged["params"] = {**merged.get("params", {}), **raw.get("params", {})}
    merged.pop("name", None)
    return merged


def _parse_spec(path: Path, given: str | None = None) -> BenchmarkSpec:
    """Validate a spec before any data is read, so a typo fails in one sentence, not mid-run.
    Parameters (`[params]`, or `given` on the command line: `anatomy`, `subject=anatomy`)
    fill `{name}` in the description and the file fields; given ones also name the
    benchmark (mmlu_anatomy)."""
    raw = _raw_spec(path)

    def fail(problem: str) -> NoReturn:
        raise BenchmarkError(f"{path.name}: {problem}")

    def need(ok: bool, problem: str) -> None:
        if not ok:
            fail(problem)

    for key in raw:
        need(key in _SPEC_KEYS, f"unknown key '{key}'; accepted keys: {', '.join(_SPEC_KEYS)}")
    params = raw.get("params", {})
    need(isinstance(params, dict), "'params' must be a [params] table")
    need(all(isinstance(v, str) for v in params.values()), "[params] values must be text")
    params, overrides = _spec_params(raw, params, path, given)
    shown = raw.get("description")
    raw = _fill(raw, params)
    name, text, tokens = raw.get("name", path.stem), raw.get("description"), raw.get("max_tokens")
    need(name == path.stem, f"name '{name}' must match the file name '{path.stem}'")
    if not isinstance(text, str) or "\n" in text:
        fail("'description' must be one line of text")
    ids = raw.get("ids")
    need(
        ids is None or (isinstance(ids, str) and re.fullmatch(r"[\w.-]+", ids) is not None),
        "'ids' must be a name",
    )
    kind, answer = raw.get("kind"), raw.get("answer")
    if not isinstance(kind, str) or kind not in KINDS:
        fail(f"kind {kind!r} is not one of: {', '.join(KINDS)}")
    found = get_kind(kind)
    accepted = found.answers
    need(
        answer is None or (isinstance(answer, str) and protocol_name(answer) in accepted),
        f"answer {answer!r} is not one of the {kind} kind's answer protocols: "
        f"{', '.join(accepted)}",
    )
    try:  # settings after the name (math-verify:precision=2) checked here, naming the file
        check_answer_protocol(kind, answer)
    except ValueError as exc:
        need(False, f"answer: {exc}")
    if type(tokens) is not int or tokens <= 0:
        fail(f"max_tokens must be a positive integer: {tokens!r}")
    instruction, seed = raw.get("instruction"), raw.get("seed", 0)
    need(instruction is None or isinstance(instruction, str), "'instruction' must be text")
    need(type(seed) is int, f"seed must be an integer: {seed!r}")
    for table in (t for t in _TABLES if t in raw):
        fields = raw[table]
        need(isinstance(fields, dict), f"'{table}' must be a [{table}] table")
        needed = ("repo",) * (table == "hub") + ("file", *found.fields)
        optional = (k for k in (*_OPTIONAL, *found.optional) if k in fields)
        for key in (*needed, *optional):
            ok = isinstance(fields.get(key), str) and fields[key] != ""
            need(ok, f"[{table}] needs a non-empty text value for '{key}'")
        suffixes = " or ".join(_TABLES[table])
        need(fields["file"].endswith(_TABLES[table]), f"[{table}] file must end in {suffixes}")
    builtin = raw.get("builtin")
    if builtin is not None:
        need(isinstance(builtin, dict), "'builtin' must be a [builtin] table")
        need("hub" not in raw and "local" not in raw, "[builtin] excludes [hub] and [local]")
        gen, size, seed = builtin.get("generator"), builtin.get("size"), builtin.get("seed", 0)
        known = isinstance(gen, str) and gen in GENERATORS
        need(known, f"generator {gen!r} is not one of: {', '.join(GENERATORS)}")
        need(type(size) is int and size > 0, f"size must be a positive integer: {size!r}")
        need(type(seed) is int, f"seed must be an integer: {seed!r}")
    need(any(t in raw for t in ("hub", "local", "builtin")), "needs [hub], [local] or [builtin]")
    if overrides:
        name = _variant_name(name, params, overrides)
        text = _variant_description(text, shown, overrides)
    hub, local = raw.get("hub"), raw.get("local")
    return BenchmarkSpec(
        name,
        text,
        kind,
        tokens,
        hub,
        local,
        path,
        builtin,
        instruction,
        raw.get("seed", 0),
        params,
        check_answer_protocol(kind, answer),
        raw.get("ids"),
    )


def _spec_params(
    raw: dict[str, Any], params: dict[str, str], path: Path, given: str | None
) -> tuple[dict[str, str], dict[str, str]]:
    """(every parameter, the given ones), checked; a built-in generator's checked by it and
    spelled its one way (arith's terms=2-2 is terms=2), so one question set has one name."""
    builtin = raw.get("builtin")
    found = builtin.get("generator") if isinstance(builtin, dict) else None
    generator = GENERATORS.get(found) if isinstance(found, str) else None
    takes = generator.accepted if generator else {}
    overrides = _overrides(given, list(params), path, takes) if given is not None else {}
    params = {**params, **overrides}
    if generator is not None:
        try:
            spelled = generator.params(params, path.stem)
        except ValueError as exc:
            raise BenchmarkError(str(exc)) from None
        params = {**params, **spelled}
    return params, {key: params[key] for key in params if key in overrides}  # the spec's order


def _variant_name(name: str, params: dict[str, str], given: dict[str, str]) -> str:
    """A spec's name with the parameters given (in the spec's order): by value for a spec of
    one (mmlu_anatomy), by key and value for a spec of several (arith_terms_2_digits_1), so
    no two settings share a name; it reads as the run's default folder (of the typed text)."""
    if len(params) == 1:
        return "_".join([name, *given.values()])
    return "_".join([name, *(f"{key}_{value}" for key, value in given.items())])


def _variant_description(text: str, raw: Any, given: dict[str, str]) -> str:
    """The description with each given parameter it does not show put after its lead, so
    tables, which print the lead, tell the variants apart: "Arith (terms=2): ..."."""
    hidden = [f"{key}={value}" for key, value in given.items() if f"{{{key}}}" not in str(raw)]
    if not hidden:
        return text
    lead, colon, rest = text.partition(": ")
    return f"{lead} ({', '.join(hidden)}){colon}{rest}"


def _fill(raw: dict[str, Any], params: dict[str, str]) -> dict[str, Any]:
    """`{name}` replaced by the parameter's value in the description and the tables' fields."""

    def fill(value: Any) -> Any:
        if isinstance(value, str):
            for key, given in params.items():
                value = value.replace(f"{{{key}}}", given)
        return value

    filled = {key: fill(value) for key, value in raw.items()}
    for table in ("hub", "local"):
        if isinstance(raw.get(table), dict):
            filled[table] = {key: fill(value) for key, value in raw[table].items()}
    return filled


def data_folder(spec: BenchmarkSpec, data_dir: Path | str | None) -> Path | None:
    """The folder a spec's [local] file is read from (None: its rows are built in or come
    from the hub): `data_dir`, else $MAD_EVAL_DATA, else the spec's own folder when it has
    no hub."""
    if spec.builtin or not spec.local:
        return None
    folder = data_dir or os.environ.get(DATA_ENV) or None
    if folder:
        return Path(folder).expanduser()
    return None if spec.hub else Path(spec.path or ".").parent


def local_file(spec: BenchmarkSpec, data_dir: Path | str | None) -> Path | None:
    """The file on this machine a benchmark's rows are read from, None for built-in or hub
    rows: what a dry run shows of an experiment file, which may name any file."""
    if spec.path is not None and spec.path.suffix == ".jsonl":  # a .jsonl given as such
        return spec.path
    folder = data_folder(spec, data_dir)
    return None if folder is None or spec.local is None else folder / spec.local["file"]


def _spec_questions(spec: BenchmarkSpec, data_dir: Path | None, given: str) -> list[Question]:
    """Built-in, else a local folder when one is given (or there is no hub), else the hub.
    `given` is the benchmark as the caller named it, for the advice of a missing file."""
    if spec.builtin:
        generate = GENERATORS[spec.builtin["generator"]].questions
        return generate(spec.builtin["size"], spec.builtin.get("seed", 0), spec.name, spec.params)
    folder = data_folder(spec, data_dir)
    if folder is not None:
        return local_questions(spec, folder, given)
    try:
        rows = hub_rows(spec)
    except HubError as exc:
        if spec.local:
            raise DataMissingError(exc.problem, given, spec.local["file"]) from exc
        raise BenchmarkError(
            f"{exc.problem}; benchmark '{spec.name}' names no [local] file to read instead."
        ) from exc
    return _to_questions(rows, spec.hub or {}, spec)


def local_questions(spec: BenchmarkSpec, folder: Path, given: str) -> list[Question]:
    """Every question of the spec's [local] file in `folder`, each row checked; a
    DataMissingError when the file is not there (`given`: the benchmark as named)."""
    local: dict[str, Any] = spec.local or {}
    file = folder / local["file"]
    if not file.is_file():
        raise DataMissingError(
            f"local data file '{local['file']}' for benchmark '{spec.name}' is not in {folder}",
            given,
            local["file"],
        )
    return _to_questions(read_jsonl(file, file.name), local, spec)


def table_questions(
    spec: BenchmarkSpec, rows: Rows, table: Literal["hub", "local"]
) -> list[Question]:
    """The questions of rows as the spec's [hub] or [local] table reads them."""
    return _to_questions(rows, getattr(spec, table) or {}, spec)


def hub_rows(spec: BenchmarkSpec) -> Rows:
    """The rows of a spec's [hub] file as the hub holds them (parquet values as pandas gives
    them); a HubError when the file cannot be had."""
    hub: dict[str, Any] = spec.hub or {}
    path, label = _download(hub), f"{hub['repo']}/{hub['file']}"
    return _read_parquet(path, label) if label.endswith(".parquet") else read_jsonl(path, label)


def _download(hub: dict[str, Any]) -> Path:
    """The hub file, from the local hub cache when the hub cannot be reached. Lazy import:
    offline users with local files never touch the hub client."""
    repo, file, revision = hub["repo"], hub["file"], hub.get("revision")
    reachable, told = True, False
    try:
        from huggingface_hub import constants, hf_hub_download

        reachable, told = online.hub_reachable(), constants.HF_HUB_OFFLINE
        if reachable:
            return Path(hf_hub_download(repo, file, repo_type="dataset", revision=revision))
        return Path(
            hf_hub_download(
                repo, file, repo_type="dataset", revision=revision, local_files_only=True
            )
        )
    except Exception as exc:  # offline, missing file, no client: all mean "use local files"
        if not reachable:
            why, shown = "the hub cannot be reached", "the hub cannot be reached"
        elif told:
            why, shown = "HF_HUB_OFFLINE is set", "HF_HUB_OFFLINE is set and the hub cache lacks it"
        else:
            why = shown = type(exc).__name__
        raise HubError(
            f"could not download {file} from the Hugging Face hub dataset {repo} ({shown})",
            why,
            offline=not reachable or told,
        ) from exc


def read_jsonl(path: Path, label: str) -> Rows:
    """Every JSON object of a JSON Lines file, each with where it was ("LABEL line N")."""
    try:
        data = path.read_bytes()
        data = gzip.decompress(data) if path.name.endswith(".gz") else data
        lines = data.decode("utf-8").split("\n")  # not splitlines(): U+2028 is JSON
    except (OSError, UnicodeDecodeError, EOFError) as exc:
        raise BenchmarkError(f"cannot read {label}: {exc}") from None
    rows: Rows = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{label} line {number}"
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise BenchmarkError(f"{where}: invalid JSON ({exc.msg})") from None
        if not isinstance(row, dict):
            raise BenchmarkError(f"{where}: expected a JSON object, got {type(row).__name__}")
        # A lone surrogate ("\ud800") no prompt or file can encode: U+FFFD from here on, so
        # the question's hash is the same at every load and a resumed run matches it.
        rows.append((where, valid_data(row, line)))
    return rows


def _read_parquet(path: Path, label: str) -> Rows:
    import pandas as pd

    try:
        frame = pd.read_parquet(path)
    except ImportError as exc:
        raise BenchmarkError(
            f"reading {label} needs a parquet engine: pip install pyarrow"
        ) from exc
    except (OSError, ValueError) as exc:
        raise BenchmarkError(f"cannot read {label} as parquet: {exc}") from exc
    records = cast(list[dict[str, Any]], frame.to_dict("records"))  # parquet's columns are text
    return [(f"{label} row {i}", row) for i, row in enumerate(records, 1)]


def _to_questions(rows: Rows, fields: dict[str, Any], spec: BenchmarkSpec) -> list[Question]:
    """Check every row up front: a bad row found mid-run wastes the requests made before it."""
    if not rows:
        raise BenchmarkError(f"benchmark '{spec.name}' has no rows")
    kind = get_kind(spec.kind)
    used = {fields.get(key, "").split(".")[0] for key in (*kind.fields, *kind.optional, "id")}
    questions: list[Question] = []
    seen: dict[str, str] = {}
    for index, (where, row) in enumerate(rows):
        qid = (
            _text(row, fields["id"], where)
            if fields.get("id")
            else f"{spec.ids or spec.name}-{index}"
        )
        if qid in seen:
            raise BenchmarkError(f"{where}: duplicate id '{qid}' (first used at {seen[qid]})")
        seen[qid] = where
        meta = {key: value for key, value in row.items() if key not in used}
        reader = _Row(row, fields, where, spec.instruction, spec.seed, qid)
        text, gold, extra = kind.question(reader)
        questions.append(Question(qid, text, gold, {**meta, **extra}, spec.kind, spec.answer))
    return questions


@dataclass
class _Row:
    """One row as its kind reads it (kinds.RowReader): fields by the kind's names, and each
    problem a BenchmarkError that says where the row is."""

    row: dict[str, Any]
    fields: Mapping[str, Any]
    where: str
    instruction: str | None
    seed: int
    qid: str

    def text(self, field: str, number_ok: bool = True) -> str:
        return _text(self.row, self.fields[field], self.where, number_ok)

    def verbatim(self, field: str) -> str:
        self.text(field, number_ok=False)
        return self.row[self.fields[field]]

    def options(self, field: str) -> list[str]:
        return _options(self.row, self.fields[field], self.where)

    def fail(self, problem: str) -> NoReturn:
        raise BenchmarkError(f"{self.where}: {problem}")


def _options(row: dict[str, Any], path: str, where: str) -> list[str]:
    """A list of option texts at `path` ("choices", or "choices.text" inside a mapping)."""
    value: Any = row
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            raise BenchmarkError(f"{where}: missing field '{path}'")
        value = value[part]
    value = value.tolist() if hasattr(value, "tolist") else value  # parquet gives arrays
    ok = isinstance(value, list) and 2 <= len(value) <= 26
    if not ok or not all(isinstance(v, str) and v.strip() for v in value):
        raise BenchmarkError(f"{where}: field '{path}' must be a list of 2 to 26 option texts")
    return [v.strip() for v in value]


def _text(row: dict[str, Any], field: str, where: str, number_ok: bool = True) -> str:
    """Hub answers may be numbers (AMC stores 27.0): integral floats become "27", others str()."""
    if field not in row:
        raise BenchmarkError(f"{where}: missing field '{field}'")
    value = row[field]
    if number_ok and isinstance(value, float) and not math.isnan(value):
        value = str(int(value)) if value.is_integer() else str(value)
    elif number_ok and isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str) or not value.strip():
        wanted = "non-empty text or a number" if number_ok else "non-empty text"
        raise BenchmarkError(f"{where}: field '{field}' must be {wanted}, got {value!r}")
    return value.strip()


@dataclass(frozen=True)
class Generator:
    """A built-in benchmark: its questions from (size, seed, name, parameters), and its check
    of the parameters, which spells them one way or raises a one-sentence ValueError."""

    questions: Callable[[int, int, str, Mapping[str, str]], list[Question]]
    params: Callable[[Mapping[str, str], str], dict[str, str]]
    accepted: Mapping[str, str]  # what each parameter takes, said when a value is refused


GENERATORS = {"arith": Generator(arith.generate, arith.canonical_params, arith.ACCEPTED)}
