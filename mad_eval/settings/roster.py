"""The team of agents: one model spec, endpoint and sampling setting per agent.

A homogeneous run is N copies of --model. A heterogeneous one comes from `--agent` options
(MODEL[@URL][*COUNT]), a roster file, or a preset's `roster`: a list of entries, each a group
of identical agents whose numbers metrics.json can break down.
"""

from __future__ import annotations

import dataclasses
import re
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, get_type_hints

from mad_eval.errors import UserError
from mad_eval.foreign import loads
from mad_eval.grading.reasoning import FINAL, Quoting, parse_quoting
from mad_eval.settings.hints import fits
from mad_eval.settings.tomlfile import TomlFileError, read_toml


class RosterError(UserError, ValueError):
    """A roster entry or file cannot be used; the message names it."""


@dataclass(frozen=True)
class Entry:
    """A group of `count` identical agents; unset sampling fields fall back to the run's."""

    model: str
    count: int = 1
    name: str | None = None
    base_urls: tuple[str, ...] = ()  # replicas serving `model`; empty: the run's --base-url
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    max_model_len: int | None = None
    tokenizer: str | None = None
    persona: str | None = None
    prompt_template: str | None = None  # a template name or file; None: the run's
    quote: str | None = None  # what these agents read of others' replies; None: the run's
    # Fields merged into each request, over the run's --extra-body (top-level keys).
    extra_body: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        data = {k: v for k, v in dataclasses.asdict(self).items() if v is not None}
        data["base_urls"] = list(self.base_urls)
        return data


@dataclass(frozen=True)
class Agent:
    """One agent as it runs: everything resolved."""

    index: int
    group: str
    model: str
    base_urls: tuple[str, ...]
    temperature: float
    top_p: float
    max_tokens: int | None
    max_model_len: int | None
    tokenizer: str | None
    persona: str | None
    prompt_template: str  # the template name or file its prompts are built from
    quote: Quoting = FINAL  # what it reads of the replies it is shown
    extra_body: dict[str, Any] = field(default_factory=dict)  # merged into its requests

    @property
    def slots(self) -> tuple[str, ...]:
        """What its requests are limited by, --concurrency each: every replica's URL, or,
        with no server named, its model."""
        return self.base_urls or (self.model,)


# A roster file writes `base_url`: one URL, or a list of replicas of the same model.
_TYPES = {k: v for k, v in get_type_hints(Entry).items() if k != "base_urls"}
_TYPES["base_url"] = str | tuple[str, ...]
_OPTION = re.compile(r"^(?P<model>.+?)(?:@(?P<url>https?://\S+?))?(?:\*(?P<count>\d+))?$")


def parse_agent_option(text: str) -> Entry:
    """'openai:q3@http://host:8000/v1*3' -> 3 agents of openai:q3 served at that URL;
    'openai:q3@http://a/v1,http://b/v1' -> one agent served by two replicas."""
    if text.strip().isdigit():  # `--agent 5`, meaning the number of agents
        raise RosterError(
            f"--agent '{text}' is no model: --agent takes MODEL[@URL][*COUNT], e.g. "
            f"openai:q25*2; did you mean --agents {text.strip()}?"
        )
    match = _OPTION.match(text.strip())
    if match and "@" in match["model"] and "@http" not in match["model"]:
        where = match["model"].rsplit("@", 1)[1]
        raise RosterError(
            f"the endpoint '{where}' in --agent '{text}' needs a scheme, e.g. @http://{where}."
        )
    if not match or "@http" in match["model"] or "*" in match["model"]:
        raise RosterError(
            f"cannot read --agent '{text}'; write MODEL[@URL][*COUNT], "
            "e.g. openai:q25@http://localhost:8000/v1*2."
        )
    urls = tuple(match["url"].split(",")) if match["url"] else ()
    entry = Entry(match["model"], int(match["count"] or 1), base_urls=urls)
    _check(entry, f"--agent '{text}'")
    return entry


def entries_from_dicts(rows: Any, where: str) -> tuple[Entry, ...]:
    """Roster entries from TOML tables, checked key by key."""
    if not isinstance(rows, list) or not rows:
        raise RosterError(f"{where}: the roster must be a non-empty list of agent tables.")
    entries = []
    for number, row in enumerate(rows, start=1):
        label = f"{where}, agent entry {number}"
        if not isinstance(row, dict):
            raise RosterError(f"{label} is not a table.")
        unknown = set(row) - set(_TYPES)
        if unknown:
            raise RosterError(
                f"{label}: unknown key(s) {', '.join(sorted(unknown))}; "
                f"accepted: {', '.join(_TYPES)}."
            )
        if "model" not in row:
            raise RosterError(f"{label} has no 'model'.")
        for key, value in row.items():
            if not fits(value, _TYPES[key]) or value == []:  # base_url: one URL at least
                raise RosterError(f"{label}: {key} = {value!r} is not {_kind(key)}.")
        row = dict(row)
        urls = row.pop("base_url", ())
        entry = Entry(**row, base_urls=(urls,) if isinstance(urls, str) else tuple(urls))
        _check(entry, label)
        entries.append(entry)
    return tuple(entries)


def load_roster_file(path: Path) -> tuple[Entry, ...]:
    """A TOML file of [[agent]] tables (model, count, name, base_url, sampling, persona,
    prompt_template, quote, extra_body)."""
    try:
        data = read_toml(Path(path))
    except FileNotFoundError as exc:
        raise RosterError(f"cannot read roster file {path}: {exc.strerror}.") from None
    except TomlFileError as exc:  # a FIFO or device, too large, not UTF-8 TOML, too deep
        raise RosterError(f"roster file {path} cannot be read: {exc}.") from None
    if set(data) != {"agent"}:
        raise RosterError(
            f"roster file {path} must hold only [[agent]] tables, "
            f"found: {', '.join(data) or 'nothing'}."
        )
    return entries_from_dicts(data["agent"], str(path))


def group_labels(entries: tuple[Entry, ...]) -> list[str]:
    """A distinct label per entry: its name, else its model spec (numbered if repeated)."""
    labels: list[str] = []
    for entry in entries:
        label = entry.name or entry.model
        base, n = label, 2
        while label in labels:
            label, n = f"{base}#{n}", n + 1
        labels.append(label)
    return labels


# Request fields mad-eval sets itself (or reads one way only): an extra body may not set them.
OWN_FIELDS = {
    "model": "the model spec",
    "messages": "the prompt",
    "prompt": "the prompt",
    "temperature": "--temperature",
    "top_p": "--top-p",
    "max_tokens": "--max-tokens",
    "max_completion_tokens": "--max-tokens",
    "seed": "--seed",
    "n": "one answer per turn (more agents, or mad-eval single -k, give more)",
    "stream": "whole answers",
    "stream_options": "whole answers",
}


def check_extra_body(body: Any, where: str) -> dict[str, Any]:
    """An extra body as given (a JSON object / TOML table), checked: RosterError if it is no
    table or sets a field mad-eval sets itself."""
    if not isinstance(body, dict):
        raise RosterError(f'{where} must be a table of request fields, e.g. {{"top_k": 20}}.')
    for key in body:
        if key in OWN_FIELDS:
            raise RosterError(
                f"{where} sets {key!r}, which mad-eval sets itself; use {OWN_FIELDS[key]}."
            )
    kwargs = body.get("chat_template_kwargs")
    if kwargs is not None and not isinstance(kwargs, dict):
        raise RosterError(
            f'{where}: chat_template_kwargs must be a table, e.g. {{"enable_thinking": false}}.'
        )
    return body


def parse_extra_body(text: str | None) -> dict[str, Any]:
    """--extra-body JSON: a JSON object of request fields."""
    if not text:
        return {}
    try:
        body = loads(text)
    except ValueError as exc:
        raise RosterError(
            f"--extra-body is not valid JSON ({exc}); give an object, e.g. "
            '\'{"top_k": 20, "chat_template_kwargs": {"enable_thinking": true}}\'.'
        ) from None
    return check_extra_body(body, "--extra-body")


def _kind(key: str) -> str:
    """What a roster key takes, as its message says it."""
    if key == "base_url":
        return "a URL or a non-empty list of URLs"
    accepted = typing.get_args(_TYPES[key]) or (_TYPES[key],)
    if float in accepted:
        return "a number"
    if int in accepted:
        return "a whole number"
    return "a table" if str not in accepted else "a string"


def _check(entry: Entry, where: str) -> None:
    checks = [
        (entry.count >= 1, f"count must be at least 1, got {entry.count}"),
        (bool(entry.model.strip()), "model must not be empty"),
        *(
            (
                url.startswith(("http://", "https://")),
                f"base_url '{url}' needs a scheme, e.g. http://{url}",
            )
            for url in entry.base_urls
        ),
        (
            entry.temperature is None or 0.0 <= entry.temperature <= 2.0,
            f"temperature must lie in [0, 2], got {entry.temperature}",
        ),
        (
            entry.top_p is None or 0.0 < entry.top_p <= 1.0,
            f"top_p must lie in (0, 1], got {entry.top_p}",
        ),
        (
            entry.max_tokens is None or entry.max_tokens >= 1,
            f"max_tokens must be at least 1, got {entry.max_tokens}",
        ),
        (
            entry.max_model_len is None or entry.max_model_len >= 2,
            f"max_model_len must be at least 2, got {entry.max_model_len}",
        ),
    ]
    for ok, message in checks:
        if not ok:
            raise RosterError(f"{where}: {message}.")
    if entry.quote is not None:
        try:
            parse_quoting(entry.quote)
        except ValueError as exc:
            raise RosterError(f"{where}: {exc}.") from None
    if entry.extra_body is not None:
        check_extra_body(entry.extra_body, f"{where}: extra_body")
