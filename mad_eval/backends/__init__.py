"""Backends behind one async interface; a model spec string picks one."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from typing import Any

from mad_eval.backends.base import (
    Backend,
    BackendError,
    Generation,
    Guarded,
    Replica,
    Request,
    RetryPolicy,
    Sampling,
    TransientError,
)
from mad_eval.prompts import Messages

__all__ = [
    "Backend",
    "BackendError",
    "Generation",
    "Guarded",
    "Replica",
    "Request",
    "RetryPolicy",
    "Sampling",
    "TransientError",
    "make_backend",
    "require_installed",
]


def require_installed(spec: str) -> None:
    """Raise BackendError, saying what to install, if the spec's backend needs a package that
    is missing: found out before any tokenizer or data is loaded."""
    if spec.startswith("vllm:") and importlib.util.find_spec("vllm") is None:
        from mad_eval.backends.vllm_backend import INSTALL_HINT

        raise BackendError(INSTALL_HINT)


def make_backend(
    spec: str,
    base_url: str | None = None,
    *,
    timeout: float = 600.0,
    api: str = "chat",
    render: Callable[[Messages], str] | None = None,
    engine: dict[str, Any] | None = None,
) -> Backend:
    """Build the backend a model spec names: 'openai:<model>' (a server at `base_url`),
    'vllm:<model>' (an in-process engine with `engine` options), 'sim[:<params>]' or, as a
    judge, 'sim-judge[:<params>]'.
    `render` turns messages into prompt text for backends that take text."""
    kind, _, rest = spec.partition(":")
    if kind == "sim":
        from mad_eval.backends.sim import SimBackend, SimParams

        return SimBackend(SimParams.parse(rest), spec)
    if kind == "sim-judge":
        from mad_eval.backends.sim_judge import SimJudge

        return SimJudge.parse(spec)
    if kind in ("openai", "vllm") and not rest:
        raise BackendError(f"model spec '{kind}:' needs a model name, e.g. {kind}:Qwen/Qwen3-8B.")
    if kind == "openai":
        from mad_eval.backends.openai_backend import OpenAIBackend

        return OpenAIBackend(rest, base_url, timeout=timeout, api=api, render=render)
    if kind == "vllm":
        from mad_eval.backends.vllm_backend import VLLMBackend

        require_installed(spec)

        if render is None:
            raise ValueError("the in-process vLLM backend needs a function that renders prompts")
        return VLLMBackend(rest, render, **(engine or {}))
    raise BackendError(
        f"unknown model spec '{spec}'; use openai:<model> for an OpenAI-compatible server, "
        "vllm:<model> for an in-process vLLM engine, sim[:p0=...,s0=...] for simulated agents "
        "or sim-judge[:bad=...] for a simulated judge."
    )
