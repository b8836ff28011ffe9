"""Checkpoints mad-eval serves itself: packing their servers over a pool of GPUs."""

from __future__ import annotations

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

__all__ = [
    "PoolError",
    "PoolFailed",
    "Work",
    "describe",
    "gpu_pool",
    "makespan",
    "plan",
    "run_pool",
]
