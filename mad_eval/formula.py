"""A number as a function of a run's rates (tally.Rates, by tally key): evaluated on all
questions for metrics.json, on resampled questions for a bootstrap (stats). The small
builders every formula module shares."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from mad_eval.tally import Rates

Formula = Callable[["Rates"], np.ndarray]


def plain(key: str) -> Formula:
    return lambda rates: rates[key]


def percent(key: str) -> Formula:
    """A rate in percent."""
    return lambda rates: 100.0 * rates[key]


def gain(before: str, after: str) -> Formula:
    """How far a rate moved, in points."""
    return lambda rates: 100.0 * (rates[after] - rates[before])
