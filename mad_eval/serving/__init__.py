"""Checkpoints mad-eval serves itself: `serve:CHECKPOINT` models, whose `vllm serve`
processes it starts, routes to and stops."""

from __future__ import annotations

from mad_eval.serving.launch import LocalServer, ServerError, served
from mad_eval.serving.spec import ServeSpec, gpu_pool, is_served, parse_serve, place

__all__ = [
    "LocalServer",
    "ServeSpec",
    "ServerError",
    "gpu_pool",
    "is_served",
    "parse_serve",
    "place",
    "served",
]
