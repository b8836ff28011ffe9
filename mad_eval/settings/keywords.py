"""The keyword settings a run is asked for (mad_eval.run, an experiment's tables, the
command's options), typed for editors and checked by name and by their type hints."""

from __future__ import annotations

import functools
import typing
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypedDict

from mad_eval.settings.config import RENAMED, ConfigError
from mad_eval.settings.hints import describe, fits
from mad_eval.words import did_you_mean


class RequestSettings(TypedDict, total=False):
    """How requests travel (config.REQUESTS), for a run as for mad_eval.judge."""

    base_url: str | Sequence[str] | None  # the model's endpoint, or its replicas
    concurrency: int
    timeout: float
    retries: int
    backoff: float
    cache: str | Path | None  # a request cache file


class SingleSettings(RequestSettings, total=False):
    """mad_eval.single's settings: a run's, but for the debate's shape (protocol, agents,
    rounds), which sampling fixes. RunConfig's fields as a caller gives them: a file may be
    a Path, a list a tuple, an extra body its JSON text; None leaves it to be resolved."""

    benchmark: str | Path  # a registered name, or a .jsonl file
    limit: int | None
    answer_protocol: str | None  # None: the benchmark's own
    model: str | None  # None: sim, or each roster agent's own
    runs: int
    seed: int
    temperature: float
    top_p: float
    max_tokens: int | None  # None: the benchmark's own budget
    prompt_template: str | Path | None  # a template name or .toml file; None: the preset's
    strip_think: bool
    quote: str | None  # None: the preset's, else final
    extra_body: dict[str, Any] | str | None  # an object, or its JSON text
    max_model_len: int | None
    tokenizer: str | Path | None
    roster: str | Path | None  # a roster file (RunConfig holds its entries)
    api: str
    template: str
    dtype: str
    tensor_parallel_size: int
    gpu_memory_utilization: float
    enforce_eager: bool
    agent: Sequence[str] | None  # MODEL[@URL][*COUNT] per group, as --agent gives them
    data_dir: str | Path | None  # where benchmark data is read from


class RunSettings(SingleSettings, total=False):
    """mad_eval.run's settings: `mad-eval run`'s long options, with underscores."""

    protocol: str | Path  # a preset name or file
    agents: int | None  # None: the roster's size, else 5
    rounds: int


@functools.cache
def setting_types() -> dict[str, Any]:
    """Each setting's type, as RunSettings declares it."""
    return typing.get_type_hints(RunSettings)


def check_names(given: Mapping[str, Any], accepted: Mapping[str, Any], what: str) -> None:
    """Refuse a setting name that is not one of `accepted`: a renamed one with its new name,
    another with the nearest one."""
    for name in given:
        if name in accepted:
            continue
        if RENAMED.get(name) in accepted:
            raise ConfigError(f"'{name}' is now '{RENAMED[name]}': give it by its new name.")
        hint = did_you_mean(name, accepted)
        raise ConfigError(
            f"'{name}' is not a setting of {what}{hint}; the settings are the long options "
            f"of its --help, with underscores: {', '.join(sorted(accepted))}."
        )


def check_types(given: Mapping[str, Any], what: str) -> None:
    """Refuse a setting of the wrong type (a TOML string where a number belongs, say), with
    the setting of a near name the value would fit (agent=3 meant agents)."""
    hints = setting_types()
    for name, value in given.items():
        if not fits(value, hints[name]):
            near = [other for other in hints if other not in given and fits(value, hints[other])]
            raise ConfigError(
                f"{what}: '{name}' must be {describe(hints[name])}, got {value!r}"
                f"{did_you_mean(name, near, 0.8)}."
            )


def endpoints(given: str | Sequence[str] | None) -> tuple[str, ...]:
    """base_url as given (one URL, a list of replicas' or none) as RunConfig holds it."""
    return (given,) if isinstance(given, str) else tuple(given or ())


def as_text(settings: Mapping[str, Any]) -> dict[str, Any]:
    """The settings with each file named by a Path (where the hint allows one) written as
    text, as the run records it."""
    return {k: str(v) if isinstance(v, Path) else v for k, v in settings.items()}
