"""A number as a function of a run's rates (by tally key): evaluated on all
questions for metrics.json, on resampled questions for a bootstrap (stats). The small
builders every formula module shares."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

import numpy as np

# Rates by tally key (tallies.Rates, or any mapping of them): typed here as a plain mapping so
# that the family modules need nothing from the tallies that count them.
Rates = Mapping[str, np.ndarray]
Formula = Callable[[Rates], np.ndarray]


def plain(key: str) -> Formula:
    return lambda rates: rates[key]


def percent(key: str) -> Formula:
    """A rate in percent."""
    return lambda rates: 100.0 * rates[key]


def gain(before: str, after: str) -> Formula:
    """How far a rate moved, in points."""
    return lambda rates: 100.0 * (rates[after] - rates[before])


def total(*keys: str) -> Formula:
    """Rates added up (tokens of several kinds, or of several rounds)."""
    return lambda rates: np.asarray(sum(rates[k] for k in keys))


def mean_std(values: list[float | None]) -> tuple[float | None, float | None]:
    """Mean and sample standard deviation across runs (std is None with fewer than 2 runs)."""
    present = [v for v in values if v is not None and not math.isnan(v)]
    if not present:
        return None, None
    std = float(np.std(present, ddof=1)) if len(present) > 1 else None
    return float(np.mean(present)), std


def json_number(value: float) -> float | None:
    """A number as metrics.json holds it: None where it is none (NaN) or is out of a float's
    range (a sum of huge records), which JSON has no number for."""
    return float(value) if math.isfinite(value) else None
