"""Per-question counts behind every rate a run reports.

Each rate is a ratio of two sums over questions (right votes / questions with a vote, right
answers / answers, ...). Keeping the numerator and denominator of each question apart lets
one code path give a run's number (sum over all questions) and a bootstrap replicate's
(questions drawn with replacement, so each is counted as often as it was drawn).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


class Rates(dict[str, np.ndarray]):
    """Rates by tally key, each worked out when first asked for. A rate with nothing to
    count is NaN."""

    def __init__(self, tallies: Tallies, weights: np.ndarray | None):
        super().__init__()
        self.tallies, self.weights = tallies, weights

    def __missing__(self, key: str) -> np.ndarray:
        num, den = self.tallies.num[key], self.tallies.den[key]
        if self.weights is None:  # summed in float64 whatever the counts are kept in
            num, den = num.sum(axis=1, dtype=float), den.sum(axis=1, dtype=float)
        else:
            num, den = _weighted(num, self.weights), _weighted(den, self.weights)
        with np.errstate(invalid="ignore", divide="ignore"):
            self[key] = np.where(den > 0, num / den, np.nan)
        return self[key]


# Bootstrap replicates drawn and weighed at once: their question counts are drawn as
# integers and made floats a block at a time, so no replicates x questions float matrix
# ever exists (800 MB at 50k questions and 2,000 replicates).
BLOCK = 100


def _weighted(values: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """values [runs, questions] summed with each replicate's counts [replicates, questions]:
    [runs, replicates]."""
    values = values.astype(float, copy=False)  # float32 counts too: a mixed product skips BLAS
    out = np.empty((values.shape[0], counts.shape[0]))
    for start in range(0, counts.shape[0], BLOCK):
        out[:, start : start + BLOCK] = values @ counts[start : start + BLOCK].T.astype(float)
    return out


@dataclass
class Tallies:
    """Numerators and denominators per (run, question) of every rate of a set of turns.

    Its keys are those of the metric families that apply to the run (measure.families),
    each family's module naming its own.
    """

    runs: list[int]
    questions: list[str]
    num: dict[str, np.ndarray]  # key -> [runs, questions]
    den: dict[str, np.ndarray]
    # Rates already worked out, by the weights they were weighed with (kept, so their ids
    # stay theirs).
    _rates: dict[int | None, tuple[np.ndarray | None, Rates]] = field(
        default_factory=dict, repr=False, compare=False
    )

    def rates(self, weights: np.ndarray | None = None) -> Rates:
        """Every rate per run ([runs]); with question weights [replicates, questions] (how
        often a bootstrap replicate drew each question), per run and replicate. The same
        weights give the same Rates, so a table's numbers weigh each key once."""
        key = None if weights is None else id(weights)
        if key not in self._rates or self._rates[key][0] is not weights:
            self._rates[key] = (weights, Rates(self, weights))
        return self._rates[key][1]

    def on(self, questions: list[str]) -> Tallies:
        """The same tallies on `questions` (a subset, in that order), to pair two methods."""
        if questions == self.questions:
            return self
        where = {q: i for i, q in enumerate(self.questions)}
        index = [where[q] for q in questions]
        return Tallies(
            self.runs,
            list(questions),
            {k: v[:, index] for k, v in self.num.items()},
            {k: v[:, index] for k, v in self.den.items()},
        )
