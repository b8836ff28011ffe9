"""Backends behind one async interface; a model spec string picks one."""

from __future__ import annotations

import importlib
import importlib.util
from functools import cache

from mad_eval.backends.base import (
    Backend,
    BackendError,
    BackendType,
    Generation,
    Guarded,
    Replica,
    Request,
    RetryPolicy,
    Sampling,
    TransientError,
    Where,
)

__all__ = [
    "Backend",
    "BackendError",
    "BackendType",
    "Generation",
    "Guarded",
    "Replica",
    "Request",
    "RetryPolicy",
    "Sampling",
    "TransientError",
    "Where",
    "backend_type",
    "make_backend",
    "require_installed",
]


# Model spec prefix -> the module that declares its BackendType, imported on first use.
PREFIXES = {
    "openai": "mad_eval.backends.openai_backend",
    "vllm": "mad_eval.backends.vllm_backend",
    "serve": "mad_eval.backends.serve_backend",
    "sim": "mad_eval.backends.sim",
    "sim-judge": "mad_eval.backends.sim_judge",
}


def backend_type(spec: str) -> BackendType:
    """The type of backend a model spec names; BackendError, listing the types, if none."""
    prefix = spec.partition(":")[0]
    if prefix not in PREFIXES:
        usages = [_type(name).usage for name in PREFIXES]
        raise BackendError(f"unknown model spec '{spec}'; use {', '.join(usages)}.")
    return _type(prefix)


@cache
def _type(prefix: str) -> BackendType:
    return importlib.import_module(PREFIXES[prefix]).TYPE


def require_installed(spec: str) -> None:
    """Raise BackendError, saying what to install, if the spec's backend needs a package that
    is missing: found out before any tokenizer or data is loaded."""
    found = backend_type(spec)
    if found.requires and importlib.util.find_spec(found.requires) is None:
        raise BackendError(found.install_hint)


def make_backend(spec: str, where: Where | None = None) -> Backend:
    """Build the backend a model spec names: 'openai:<model>' (a server at `base_url`),
    'vllm:<model>' (an in-process engine with `engine` options), 'sim[:<params>]' or, as a
    judge, 'sim-judge[:<params>]'. Text-prompt backends get `render`, which turns messages
    into prompt text."""
    found = backend_type(spec)
    rest = spec.partition(":")[2]
    if found.needs_name and not rest:
        raise BackendError(
            f"model spec '{found.name}:' needs a model name, e.g. {found.name}:Qwen/Qwen3-8B."
        )
    require_installed(spec)
    return found.build(spec, rest, where or Where())
