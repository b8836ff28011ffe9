"""Backends behind one async interface; a model spec string picks one."""

from __future__ import annotations

import importlib.util

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
    served_name,
)
from mad_eval.records import shown
from mad_eval.registry import Registry
from mad_eval.words import did_you_mean

__all__ = [
    "BACKENDS",
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
    "model_label",
    "require_installed",
]


# The backends whose specs name a model by a path or hub id after the colon.
NAMED_BY_PATH = ("openai", "vllm", "serve")

# Model spec prefix -> its BackendType, each module imported on first use; other packages add
# theirs through the `mad_eval.backends` entry-point group.
BACKENDS: Registry[BackendType] = Registry(
    "backend", "mad_eval.backends", error=BackendError, holds=BackendType
)
for _prefix, _module in (
    ("openai", "openai_backend"),
    ("vllm", "vllm_backend"),
    ("serve", "serve_backend"),
    ("sim", "sim"),
    ("sim-judge", "sim_judge"),
):
    BACKENDS.add(_prefix, f"mad_eval.backends.{_module}:TYPE")


def backend_type(spec: str) -> BackendType:
    """The type of backend a model spec names; BackendError, listing the types, if none."""
    prefix = spec.partition(":")[0]
    if prefix not in BACKENDS:
        usages = [found.usage for _, found in BACKENDS.items()]
        near = did_you_mean(prefix, BACKENDS.names()) if len(prefix) <= 100 else ""
        raise BackendError(f"unknown model spec {shown(spec, 80)}{near}; use {', '.join(usages)}.")
    return BACKENDS.get(prefix)


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


def model_label(spec: str) -> str:
    """How tables and the viewer name a model, however it is reached: a served or loaded
    model by the name a server started for it answers to, its last path part
    (serve:/ckpts/SmolLM2-135M-Instruct/, vllm:HuggingFaceTB/SmolLM2-135M-Instruct and
    openai:SmolLM2-135M-Instruct are all SmolLM2-135M-Instruct); a simulated one by its
    whole spec."""
    prefix, _, name = spec.partition(":")
    if prefix in NAMED_BY_PATH and name.strip("/"):
        return served_name(name)
    return spec
