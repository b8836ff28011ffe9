"""Backends behind one async interface; a model spec string picks one."""

from __future__ import annotations

from mad_eval.backends.base import (
    Backend,
    BackendError,
    Generation,
    Guarded,
    Request,
    Sampling,
)

__all__ = [
    "Backend",
    "BackendError",
    "Generation",
    "Guarded",
    "Request",
    "Sampling",
    "make_backend",
]

KINDS = ("openai", "sim")


def make_backend(spec: str, base_url: str | None = None, timeout: float = 600.0) -> Backend:
    """Build the backend a model spec names: 'openai:<model>' or 'sim[:<params>]'."""
    kind, _, rest = spec.partition(":")
    if kind == "sim":
        from mad_eval.backends.sim import SimBackend, SimParams

        return SimBackend(SimParams.parse(rest), spec)
    if kind == "openai":
        if not rest:
            raise BackendError(
                "model spec 'openai:' needs a model name, e.g. openai:Qwen/Qwen3-8B."
            )
        from mad_eval.backends.openai_backend import OpenAIBackend

        return OpenAIBackend(rest, base_url, timeout=timeout)
    raise BackendError(
        f"unknown model spec '{spec}'; use openai:<model> for an OpenAI-compatible server "
        "or sim[:p0=...,s0=...] for simulated agents."
    )
