"""The typed run configuration, validated before the first request."""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import re
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from mad_eval.errors import UserError
from mad_eval.grading.reasoning import parse_quoting
from mad_eval.sanitize import redact
from mad_eval.settings.roster import Agent, Entry, check_extra_body, group_labels

DEFAULT_MODEL = "sim"
APIS = ("chat", "completions")
TEMPLATES = ("chat", "raw", "bare")
DEFAULT_BENCHMARK = "arith"
RESULTS_ROOT = Path("results")
# The most agents (or single-agent samples), rounds and seeded runs one run may have:
# planning reads every agent's view of every other, so a team of 100,000 would plan for
# hours, and a report counts every round of every run.
MAX_AGENTS = 1024
MAX_ROUNDS = 1000
MAX_RUNS = 1000
# Each count's bounds, held by a new run's settings and a recorded manifest's alike.
COUNTS = {"agents": (1, MAX_AGENTS), "rounds": (0, MAX_ROUNDS), "runs": (1, MAX_RUNS)}


def count_problem(name: str, value: int) -> str | None:
    """Why `value` cannot be a run's count `name` (agents, rounds, runs), or None."""
    least, most = COUNTS[name]
    if value < least:
        return f"at least {least}" if least else "0 or more"
    return f"at most {most}" if value > most else None


def spec_folders(kind: str) -> list[Path]:
    """Where TOML specs of a kind ("benchmarks", "protocols", "templates") live: the
    project's own folder first, then ./<kind> in the working directory, whose files add
    new names but never replace one of ours: a cloned repository's ./templates/debate.toml
    is no default (it is read only when named by its path)."""
    folders: list[Path] = []
    for folder in (project_folder(kind), Path.cwd() / kind):
        if folder.is_dir() and all(folder.resolve() != seen.resolve() for seen in folders):
            folders.append(folder)
    return folders


def project_folder(kind: str) -> Path:
    """The project's own folder of specs of a kind: top level in a checkout, a packaged copy
    in a wheel."""
    package = Path(__file__).resolve().parent.parent  # mad_eval/, this module is in settings/
    in_checkout = (package.parent / "pyproject.toml").is_file()
    return package.parent / kind if in_checkout else package / "_specs" / kind


def spec_files(kind: str) -> dict[str, Path]:
    """The TOML files of a kind by name (their stem), the first found in spec_folders()
    order: a built-in name always means the project's file."""
    found: dict[str, Path] = {}
    for folder in spec_folders(kind):
        for path in sorted(folder.glob("*.toml")):
            found.setdefault(path.stem, path)
    return found


def unreached_files(kind: str, by_name: dict[str, Path]) -> list[Path]:
    """The working directory's files of a kind that no name in `by_name` reaches, because
    the name is built in: read only when named by their path."""
    here = Path.cwd() / kind
    if not here.is_dir() or here.resolve() == project_folder(kind).resolve():
        return []
    return [p for p in sorted(here.glob("*.toml")) if by_name.get(p.stem) != p]


# The protocol class of `mad-eval single`: every agent answers alone.
SINGLE = "single"


def is_single(protocol_class: str | None, rounds: int) -> bool:
    """Whether a run is a single run (`mad-eval single`: K independent samples per question,
    no debate): its resolved protocol is of the single class and it has no round after
    round 0. The one test every reader makes, of a plan or of a manifest (whose protocol
    "class" records the resolved class)."""
    return protocol_class == SINGLE and rounds == 0


class ConfigError(UserError, ValueError):
    """A setting the user gave cannot work; the message names it and what is accepted."""


@dataclass(frozen=True)
class RecordedConfig:
    """The settings that decide what a run records: manifest.json's "config", which a
    resume requires unchanged. A roster's entries are recorded without their endpoints."""

    protocol: str = "decentralized"
    agents: int = 5
    rounds: int = 3
    benchmark: str = DEFAULT_BENCHMARK
    limit: int | None = None
    answer_protocol: str | None = None  # None: the benchmark's own
    model: str = DEFAULT_MODEL
    runs: int = 1
    seed: int = 0
    temperature: float = 1.0
    top_p: float = 0.9
    max_tokens: int | None = None  # None: the benchmark's own budget
    prompt_style: str = "debate"  # the prompt template: a built-in name or a .toml file
    strip_think: bool = False
    quote: str = "final"  # what agents read of others' replies: final | full | tail:N
    # Request fields merged into every request (a roster group's own go over them).
    extra_body: dict[str, Any] = field(default_factory=dict)
    max_model_len: int | None = None  # None: what the server reports, else no budget
    tokenizer: str | None = None  # None: the model's own when it can be found
    roster: tuple[Entry, ...] = ()  # empty: `agents` copies of `model`
    api: str = "chat"  # chat | completions: which OpenAI endpoint receives the prompt
    template: str = "chat"  # chat | raw | bare: how text-prompt backends render the messages
    dtype: str = "auto"  # the in-process vLLM engine's weights type

    def to_dict(self) -> dict[str, Any]:
        """The settings as manifest.json records them (entries' endpoints left out)."""
        data = {f.name: copy.deepcopy(getattr(self, f.name)) for f in fields(RecordedConfig)}
        data["roster"] = [_recorded_entry(entry) for entry in self.roster]
        return data


# An operational setting of the in-process vLLM engine, not of the requests (a judge has none).
ENGINE = {"engine": True}


@dataclass(frozen=True)
class RunConfig(RecordedConfig):
    """A run's whole configuration: what it records and, below, its operational settings,
    which change how fast a run goes, never what it records."""

    base_urls: tuple[str, ...] = ()  # replicas of the one model; a roster names its own
    concurrency: int = 64
    timeout: float = 600.0
    retries: int = 5
    backoff: float = 1.0  # seconds before the first retry, doubling each time
    cache: str | None = None
    tensor_parallel_size: int = field(default=1, metadata=ENGINE)
    gpu_memory_utilization: float = field(default=0.9, metadata=ENGINE)
    enforce_eager: bool = field(default=False, metadata=ENGINE)

    def validate(self) -> None:
        for name in COUNTS:
            value = getattr(self, name)
            problem = count_problem(name, value)
            if problem is not None:
                raise ConfigError(f"--{name} must be {problem}, got {value}.")
        checks = [
            (
                self.limit is None or self.limit >= 1,
                f"--limit must be at least 1, got {self.limit}",
            ),
            (
                0.0 <= self.temperature <= 2.0,
                f"--temperature must lie in [0, 2], got {self.temperature}",
            ),
            (0.0 < self.top_p <= 1.0, f"--top-p must lie in (0, 1], got {self.top_p}"),
            (
                self.max_tokens is None or self.max_tokens >= 1,
                f"--max-tokens must be at least 1, got {self.max_tokens}",
            ),
            (
                self.prompt_style != "roles" or self.agents >= 2,
                "--prompt-template roles needs at least 2 agents (an advocate and a critic)",
            ),
            (
                self.max_model_len is None or self.max_model_len >= 2,
                f"--max-model-len must be at least 2, got {self.max_model_len}",
            ),
            (
                not self.roster or sum(e.count for e in self.roster) == self.agents,
                f"the roster has {sum(e.count for e in self.roster)} agents but --agents is "
                f"{self.agents}; leave --agents out or make them match",
            ),
            (self.api in APIS, f"--api must be one of {', '.join(APIS)}, got '{self.api}'"),
            (
                self.template in TEMPLATES,
                f"--template must be one of {', '.join(TEMPLATES)}, got '{self.template}'",
            ),
            *(
                (
                    url.startswith(("http://", "https://")),
                    f"--base-url '{url}' needs a scheme, e.g. http://{url}",
                )
                for url in self.base_urls
            ),
            (self.concurrency >= 1, f"--concurrency must be at least 1, got {self.concurrency}"),
            (self.timeout > 0, f"--timeout must be positive, got {self.timeout}"),
            (self.retries >= 0, f"--retries must be 0 or more, got {self.retries}"),
            (self.backoff >= 0, f"--backoff must be 0 or more, got {self.backoff}"),
            (
                self.tensor_parallel_size >= 1,
                f"--tensor-parallel-size must be at least 1, got {self.tensor_parallel_size}",
            ),
            (
                0.0 < self.gpu_memory_utilization <= 1.0,
                f"--gpu-memory-utilization must lie in (0, 1], got {self.gpu_memory_utilization}",
            ),
        ]
        for ok, message in checks:
            if not ok:
                raise ConfigError(message + ".")
        try:
            parse_quoting(self.quote)
        except ValueError as exc:
            raise ConfigError(f"--{exc}.") from None
        check_extra_body(self.extra_body, "--extra-body")  # RosterError: one sentence too

    def team(self) -> list[Agent]:
        """Every agent with its model, endpoint and sampling resolved, in index order."""
        entries = self.roster or (Entry(self.model, self.agents),)
        labels = group_labels(entries)
        team: list[Agent] = []
        for entry, label in zip(entries, labels, strict=True):
            for _ in range(entry.count):
                team.append(
                    Agent(
                        index=len(team),
                        group=label,
                        model=entry.model,
                        base_urls=entry.base_urls or self.base_urls,
                        temperature=_first(entry.temperature, self.temperature),
                        top_p=_first(entry.top_p, self.top_p),
                        max_tokens=_first(entry.max_tokens, self.max_tokens),
                        max_model_len=_first(entry.max_model_len, self.max_model_len),
                        tokenizer=_first(entry.tokenizer, self.tokenizer),
                        persona=entry.persona,
                        prompt_template=entry.prompt_template or self.prompt_style,
                        quote=parse_quoting(entry.quote or self.quote),
                        extra_body={**self.extra_body, **(entry.extra_body or {})},
                    )
                )
        return team

    def recorded(self) -> RecordedConfig:
        """The settings that decide what the run records; resuming requires them unchanged.
        Endpoints are operational: a server may move without changing what it answers."""
        values = {f.name: getattr(self, f.name) for f in fields(RecordedConfig)}
        values["roster"] = tuple(replace(entry, base_urls=()) for entry in self.roster)
        return RecordedConfig(**values)

    def identity(self) -> dict[str, Any]:
        """The recorded settings as manifest.json holds them."""
        return self.recorded().to_dict()

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["roster"] = [entry.to_dict() for entry in self.roster]
        data["base_urls"] = list(self.base_urls)
        return data

    def default_out(self, budget: int | None = None, single: bool = False) -> Path:
        """results/<benchmark>-<protocol>-n<N>-t<T>-<model> (a `single` run's:
        <benchmark>-<protocol>-k<K>-<model>), then each recorded setting that is not its
        default (`budget`: the benchmark's own max tokens), so the same command finds the
        same run and a sweep's runs never share a folder:
        arith-decentralized-n5-t3-sim-temperature0.7. The answer protocol is always spelled
        out (arith-single-k5-sim-answer_protocol-last-number); the tokenizer never is."""
        bench = Path(self.benchmark).stem if self.benchmark.endswith(".jsonl") else self.benchmark
        bench = re.sub(r"[:=,]", "_", bench)  # mmlu:anatomy -> mmlu_anatomy
        if self.roster:
            groups = zip(group_labels(self.roster), self.roster, strict=True)
            model = "+".join(f"{label}x{entry.count}" for label, entry in groups)
        else:
            model = self.model
        if single:  # K samples, no debate
            name = f"{bench}-{self.protocol}-k{self.agents}-{model}"
        else:
            name = f"{bench}-{self.protocol}-n{self.agents}-t{self.rounds}-{model}"
        if self.prompt_style != "debate":
            name += f"-{Path(self.prompt_style).stem}"
        if self.quote != "final":
            name += f"-q{self.quote}"
        if self.extra_body:  # named by a short hash: what it holds is in the manifest
            # Of the body as recorded: a hash of a secret would let a guess be checked.
            body = json.dumps(redact(self.extra_body), sort_keys=True).encode()
            name += f"-x{hashlib.sha256(body).hexdigest()[:6]}"
        if self.runs > 1:
            name += f"-r{self.runs}"
        if self.limit:
            name += f"-l{self.limit}"
        if self.seed:
            name += f"-s{self.seed}"
        if self.answer_protocol is not None:  # spelled out: it changes which answers count
            name += "-answer_protocol-" + re.sub(r"[^A-Za-z0-9._-]+", "_", self.answer_protocol)
        name += self._differing(budget)
        return RESULTS_ROOT / re.sub(r"[^A-Za-z0-9._=-]+", "_", name)

    def _differing(self, budget: int | None) -> str:
        """The recorded settings the name above leaves out, each one not at its default, as
        -name<number>, -name-<text> or -name (a switch); past NAMED characters, a hash of
        them instead (manifest.json's config says each)."""
        defaults = RecordedConfig(max_tokens=budget)
        given = {
            f.name: getattr(self, f.name)
            for f in fields(RecordedConfig)
            if f.name not in (*IN_NAME, *UNNAMED)
            and getattr(self, f.name) != getattr(defaults, f.name)
        }
        parts = []
        for key, value in given.items():
            if isinstance(value, bool):
                parts.append(f"-{key}" if value else f"-no_{key}")
            elif isinstance(value, int | float):
                parts.append(f"-{key}{value}")
            else:
                parts.append(f"-{key}-{value}")
        # No "=": --label RUN=NAME names a run by its folder.
        joined = re.sub(r"[^A-Za-z0-9._-]+", "_", "".join(parts))
        if len(joined) <= NAMED:
            return joined
        settings = json.dumps(given, sort_keys=True, default=str).encode()
        return f"-c{hashlib.sha256(settings).hexdigest()[:8]}"


# The recorded settings the default folder name always spelled its own way (or, for a
# roster's entries, by their models and counts).
IN_NAME = (
    "protocol",
    "agents",
    "rounds",
    "benchmark",
    "limit",
    "model",
    "runs",
    "seed",
    "prompt_style",
    "quote",
    "extra_body",
    "roster",
    "answer_protocol",
)
# Recorded settings no folder name holds: the tokenizer (a path) counts the prompts' tokens,
# and where mad-eval renders them its chat template is the model's own; manifest.json records
# it, and a resume requires it unchanged.
UNNAMED = ("tokenizer",)
# The longest run of other settings a folder name spells out; longer, a hash stands in.
NAMED = 60


# The settings that change how fast a run goes, never what it records: the one list, which
# the manifest's "operational" section, a resume, a judge and an experiment go by (by
# RunConfig's field names, which manifest.json records).
OPERATIONAL = tuple(
    f.name for f in fields(RunConfig) if f.name not in {r.name for r in fields(RecordedConfig)}
)
# A setting's name (its long option with underscores) -> the RunConfig field that holds it,
# where the two differ: manifest.json records the field's name, which runs made before the
# setting was renamed hold too.
FIELDS = {"prompt_template": "prompt_style", "base_url": "base_urls"}
SETTINGS = {held: name for name, held in FIELDS.items()}
# The old keywords of renamed settings, refused with their new name (for one release).
RENAMED = {"prompt_style": "prompt_template", "base_urls": "base_url", "labels": "label"}


def setting_name(field_name: str) -> str:
    """The setting a RunConfig field holds, as the API and the command line name it."""
    return SETTINGS.get(field_name, field_name)


# How requests travel (endpoints, limits, retries, cache), by setting name: a judge's as a
# run's.
REQUESTS = tuple(
    setting_name(f.name) for f in fields(RunConfig) if f.name in OPERATIONAL and not f.metadata
)


def _recorded_entry(entry: Entry) -> dict[str, Any]:
    """A roster entry as recorded: its endpoints only where a manifest written by hand
    gave them, so a resume still compares them."""
    data = entry.to_dict()
    if not entry.base_urls:
        del data["base_urls"]
    return data


def _first(value: Any, default: Any) -> Any:
    return default if value is None else value


def run_defaults() -> dict[str, Any]:
    """What a run is asked for, by the names the API and the command line share, with each
    default: RunConfig's settings, those left None to be resolved (the team's size, the
    preset's prompt and quoting, the benchmark's token budget), and where the team and
    the questions come from (--agent, --roster, --data-dir)."""
    defaults = {}
    for f in dataclasses.fields(RunConfig):
        if f.name != "roster":
            factory = f.default_factory
            defaults[setting_name(f.name)] = factory() if callable(factory) else f.default
    resolved = {"agents": None, "prompt_template": None, "quote": None, "model": None}
    return {**defaults, **resolved, "agent": (), "roster": None, "data_dir": None}


def operational_defaults() -> dict[str, Any]:
    """How requests travel (endpoints, limits, retries, cache), for a judge as for a run."""
    defaults = run_defaults()
    return {name: defaults[name] for name in REQUESTS}
