"""The seeded generator a vote breaks its ties with, so every report, table and viewer page
of a run picks the same answer."""

from __future__ import annotations

import random

from mad_eval.records import derive_seed


class TieBreak(random.Random):
    """The generator a vote breaks ties with, seeded from `parts` only when a tie needs it:
    most votes have one largest group, and seeding cost more than the rest of a vote. It
    draws exactly what random.Random(derive_seed(*parts)) would. `drawn` holds what its last
    real draw chose among (None: no tie needed one), so a page can say a coin decided."""

    def __init__(self, *parts: object):  # no seeding yet
        self.parts: tuple[object, ...] | None = parts
        self.drawn: list[object] | None = None

    def choice(self, seq):  # type: ignore[no-untyped-def]
        if len(seq) > 1:
            self.drawn = list(seq)
        if self.parts is not None:
            if len(seq) == 1:  # what a fresh generator's choice gives, without its draw
                return seq[0]
            self.seed(derive_seed(*self.parts))
            self.parts = None
        return super().choice(seq)


def vote_ties(seed: int, run: int, question: str, round_: int) -> TieBreak:
    """The generator one round's vote breaks its ties with."""
    return TieBreak(seed, "vote", run, question, round_)
