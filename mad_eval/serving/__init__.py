"""Checkpoints mad-eval serves itself: `serve:CHECKPOINT` models, whose `vllm serve`
processes it starts, routes to and stops, packed over a pool of GPUs."""

from __future__ import annotations

from mad_eval.serving.launch import LocalServer, ServerError, served
from mad_eval.serving.pool import (
    PoolError,
    PoolFailed,
    Work,
    describe,
    gpu_pool,
    makespan,
    plan,
    run_pool,
)
from mad_eval.serving.spec import ServeSpec, is_served, parse_serve, place

__all__ = [
    "LocalServer",
    "PoolError",
    "PoolFailed",
    "ServeSpec",
    "ServerError",
    "Work",
    "describe",
    "gpu_pool",
    "is_served",
    "makespan",
    "parse_serve",
    "place",
    "plan",
    "run_pool",
    "served",
]
