"""Error bars over questions: bootstrap confidence intervals and a paired bootstrap test.

Both resample questions with replacement and re-evaluate the same formula that gives the
number in metrics.json (schema.formulas), averaged over runs as metrics.json averages it.
The resampling is seeded, so a table prints the same intervals every time.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable

import numpy as np

from mad_eval.measure.formula import Formula
from mad_eval.measure.tallies import BLOCK, Rates, Tallies

# Question resamples behind every bootstrap interval and paired test.
REPLICATES = 2000


@functools.lru_cache(maxsize=2)
def _weights(questions: int, replicates: int, seed: int) -> np.ndarray:
    """How often each replicate draws each question: [replicates, questions] integer counts,
    a byte each unless a count needs more. The same for every number asked of one size (one
    seed), so bootstrap_ci and paired_test draw it once (a table draws its own a block at a
    time: Resampled); callers must not modify it. Drawn a block of replicates at a time,
    which gives the same draws as one call."""
    rng = np.random.default_rng(seed)
    p = np.full(questions, 1 / questions)
    # A question drawn 256 times of N draws at 1/N each: never seen past a few hundred
    # questions, so a byte holds every count (half of uint16's 40 MB at 10k questions), and
    # a wider type is taken only where a block holds a larger one.
    counts = np.empty((replicates, questions), np.uint8)
    for start in range(0, replicates, BLOCK):
        rows = min(BLOCK, replicates - start)
        block = rng.multinomial(questions, p, size=rows)
        if block.max() > np.iinfo(counts.dtype).max:
            counts = counts.astype(np.min_scalar_type(questions))
        counts[start : start + rows] = block
    counts.setflags(write=False)
    return counts


def _over_runs(values: np.ndarray) -> np.ndarray:
    """Mean over runs (axis 0), ignoring runs where the number is undefined."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a replicate with nothing defined
        means: np.ndarray = np.nanmean(values, axis=0)
        return means


# Replicates drawn at a time by replicate_values: any block size gives the same draws, and
# a small one keeps its counts (int64) and their float copy to a few MB at 10k questions.
STREAMED = 25


def replicate_values(
    tallies: Tallies, formulas: dict[str, Formula], replicates: int = REPLICATES, seed: int = 0
) -> dict[str, np.ndarray]:
    """Each formula's value (mean over runs) in each of `replicates` question resamples:
    the same draws `_weights` holds, drawn and weighed a block of replicates at a time and
    let go, so memory is bounded by a block however many questions there are."""
    questions = len(tallies.questions)
    rng = np.random.default_rng(seed)
    p = np.full(questions, 1 / questions)
    found = {name: np.empty(replicates) for name in formulas}
    for start in range(0, replicates, STREAMED):
        rows = min(STREAMED, replicates - start)
        rates = Rates(tallies, rng.multinomial(questions, p, size=rows))
        for name, formula in formulas.items():
            found[name][start : start + rows] = _over_runs(formula(rates))
    return found


def difference(tallies: Tallies, formula_a: Formula, formula_b: Formula) -> float:
    """Number A less number B on the same tallies (each a mean over runs), as paired_test
    observes it; NaN where either is undefined."""
    rates = tallies.rates()
    return float(_over_runs(formula_a(rates)) - _over_runs(formula_b(rates)))


def interval(draws: np.ndarray, level: float = 0.95) -> tuple[float | None, float | None]:
    """The percentile interval of a number's replicates; (None, None) if never defined."""
    draws = draws[~np.isnan(draws)]
    if draws.size == 0:
        return None, None
    tail = 100 * (1 - level) / 2
    low, high = np.percentile(draws, [tail, 100 - tail])
    return float(low), float(high)


def p_value(observed: float, diffs: np.ndarray) -> float | None:
    """Two-sided p-value that a difference is zero, from its replicates: centred on the
    observed one, they estimate its distribution when there is none; p is the share at
    least as far from zero as observed."""
    if np.isnan(observed):
        return None
    diffs = diffs[~np.isnan(diffs)]
    extreme = np.sum(np.abs(diffs - observed) >= abs(observed) - 1e-12)
    return float((1 + extreme) / (1 + diffs.size))


def point(tallies: Tallies, formula: Formula) -> float | None:
    value = float(_over_runs(formula(tallies.rates())))
    return None if np.isnan(value) else value


def bootstrap_ci(
    tallies: Tallies,
    formula: Formula,
    replicates: int = REPLICATES,
    level: float = 0.95,
    seed: int = 0,
) -> tuple[float | None, float | None]:
    """Percentile interval of the number over question resamples; (None, None) if undefined."""
    draws = _over_runs(formula(tallies.rates(_weights(len(tallies.questions), replicates, seed))))
    return interval(draws, level)


def paired_test(
    a: Tallies,
    formula_a: Formula,
    b: Tallies,
    formula_b: Formula,
    replicates: int = REPLICATES,
    seed: int = 0,
) -> tuple[float | None, int]:
    """Two-sided p-value that number A equals number B, with both computed on the same
    resampled questions (those both have answered); and how many questions that was.

    See `p_value` for how the replicates' differences make p.
    """
    common = sorted(set(a.questions) & set(b.questions))
    if not common:
        return None, 0
    a, b = a.on(common), b.on(common)
    observed = _over_runs(formula_a(a.rates())) - _over_runs(formula_b(b.rates()))
    if np.isnan(observed):
        return None, len(common)
    w = _weights(len(common), replicates, seed)
    diffs = _over_runs(formula_a(a.rates(w))) - _over_runs(formula_b(b.rates(w)))
    return p_value(float(observed), diffs), len(common)


# Where a number's replicates are drawn: a set of tallies (by id), and the questions a
# paired test shares (None: all of them, in its own order).
Source = tuple[int, tuple[str, ...] | None]


class Resampled:
    """The intervals and paired tests of many numbers (a table's), asked for first and
    worked out together by `compute`: one replicate_values pass per set of tallies, or per
    set of questions a paired test shares, so no replicates x questions matrix is kept
    while they are made. The same draws, intervals and p-values as bootstrap_ci and
    paired_test give; each answer is read after `compute`."""

    def __init__(self, replicates: int = REPLICATES, seed: int = 0):
        self.replicates, self.seed = replicates, seed
        self._sources: dict[Source, tuple[Tallies, dict[str, Formula]]] = {}
        self._draws: dict[Source, dict[str, np.ndarray]] = {}
        self._points: dict[Source, dict[str, np.ndarray]] = {}

    def _ask(
        self, tallies: Tallies, formula: Formula, questions: list[str] | None = None
    ) -> tuple[Source, str]:
        shared = None if questions is None or questions == tallies.questions else tuple(questions)
        source = (id(tallies), shared)
        self._sources.setdefault(source, (tallies, {}))[1][str(id(formula))] = formula
        return source, str(id(formula))

    def interval(
        self, tallies: Tallies, formula: Formula, level: float = 0.95
    ) -> Callable[[], tuple[float | None, float | None]]:
        """bootstrap_ci's interval, once computed."""
        source, name = self._ask(tallies, formula)
        return lambda: interval(self._draws[source][name], level)

    def paired(
        self, a: Tallies, formula_a: Formula, b: Tallies, formula_b: Formula
    ) -> tuple[Callable[[], float | None], int]:
        """paired_test's p-value, once computed, and how many questions it is on."""
        common = sorted(set(a.questions) & set(b.questions))
        if not common:
            return lambda: None, 0
        (x, one), (y, other) = self._ask(a, formula_a, common), self._ask(b, formula_b, common)

        def p() -> float | None:
            observed = self._points[x][one] - self._points[y][other]
            if np.isnan(observed):
                return None
            return p_value(float(observed), self._draws[x][one] - self._draws[y][other])

        return p, len(common)

    def compute(self) -> None:
        """Every number's replicates, a set of tallies at a time; a paired test's sides are
        taken on their shared questions only while theirs are drawn."""
        for source, (tallies, formulas) in self._sources.items():
            shared = source[1]
            on = tallies if shared is None else tallies.on(list(shared))
            self._draws[source] = replicate_values(on, formulas, self.replicates, self.seed)
            rates = on.rates()
            self._points[source] = {n: _over_runs(f(rates)) for n, f in formulas.items()}
