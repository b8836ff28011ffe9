"""A number as a function of a run's rates (by tally key): evaluated on all
questions for metrics.json, on resampled questions for a bootstrap (stats). The small
builders every formula module shares."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

# Rates by tally key (tally.Rates, or any mapping of them): typed here as a plain mapping so
# that the formula modules (cost, dynamics) need nothing from the tally that counts them.
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
