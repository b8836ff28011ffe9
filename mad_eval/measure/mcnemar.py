"""McNemar's exact test of two methods scored on the same questions: of the pairs where
exactly one is right (A alone `b` times, B alone `c` times), is either right alone more
often than a fair coin would make it? The two-sided binomial p of min(b, c) in b + c draws."""

from __future__ import annotations

import math
from fractions import Fraction


def mcnemar_p(b: int, c: int) -> float | None:
    """Two-sided exact p (doubled smaller tail, at most 1); None with no discordant pair."""
    n = b + c
    if n == 0:
        return None
    tail = sum(math.comb(n, k) for k in range(min(b, c) + 1))
    return float(min(Fraction(1), Fraction(2 * tail, 2**n)))
