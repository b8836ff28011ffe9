"""Backends behind one async interface; a model spec string picks one."""

from __future__ import annotations

import importlib
import importlib.util
from functools import cache

from mad_eval.backends.base import (
    Backend,
    BackendError,
    BackendKind,
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
    "BackendKind",
    "Generation",
    "Guarded",
    "Replica",
    "Request",
    "RetryPolicy",
    "Sampling",
    "TransientError",
    "Where",
    "backend_kind",
    "make_backend",
    "require_installed",
]


# Model spec prefix -> the module that declares its BackendKind, imported on first use.
KINDS = {
    "openai": "mad_eval.backends.openai_backend",
    "vllm": "mad_eval.backends.vllm_backend",
    "sim": "mad_eval.backends.sim",
    "sim-judge": "mad_eval.backends.sim_judge",
}


def backend_kind(spec: str) -> BackendKind:
    """The kind of backend a model spec names; BackendError, listing the kinds, if none."""
    prefix = spec.partition(":")[0]
    if prefix not in KINDS:
        usages = [_kind(name).usage for name in KINDS]
        raise BackendError(f"unknown model spec '{spec}'; use {', '.join(usages)}.")
    return _kind(prefix)


@cache
def _kind(prefix: str) -> BackendKind:
    return importlib.import_module(KINDS[prefix]).KIND


def require_installed(spec: str) -> None:
    """Raise BackendError, saying what to install, if the spec's backend needs a package that
    is missing: found out before any tokenizer or data is loaded."""
    kind = backend_kind(spec)
    if kind.requires and importlib.util.find_spec(kind.requires) is None:
        raise BackendError(kind.install_hint)


def make_backend(spec: str, where: Where | None = None) -> Backend:
    """Build the backend a model spec names: 'openai:<model>' (a server at `base_url`),
    'vllm:<model>' (an in-process engine with `engine` options), 'sim[:<params>]' or, as a
    judge, 'sim-judge[:<params>]'. Text-prompt backends get `render`, which turns messages
    into prompt text."""
    kind = backend_kind(spec)
    rest = spec.partition(":")[2]
    if kind.needs_name and not rest:
        raise BackendError(
            f"model spec '{kind.name}:' needs a model name, e.g. {kind.name}:Qwen/Qwen3-8B."
        )
    require_installed(spec)
    return kind.build(spec, rest, where or Where())
