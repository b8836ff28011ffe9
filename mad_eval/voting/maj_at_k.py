"""verl's maj@K/mean and maj@K/std: 1000 resamples of a question's K answers, drawn after
seeding numpy's legacy generator with 42 (verl reseeds it for every question)."""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np

from mad_eval.voting.groups import Graded

BOOTSTRAP_DRAWS, BOOTSTRAP_SEED = 1000, 42
# verl's prediction for a reply with no answer: an answer it votes on like any other, so a
# reply whose answer is this very text is the same answer as no answer.
NO_ANSWER = "[INVALID]"


@functools.lru_cache(maxsize=64)
def bootstrap_draws(k: int) -> np.ndarray:
    """verl's resampled indices for K answers: [1000, K]. RandomState(42) is the stream
    np.random.seed(42) starts; one call draws what verl's 1000 calls in a row draw (tested).
    Shared between calls: callers must not modify it."""
    drawn = np.random.RandomState(BOOTSTRAP_SEED).choice(k, size=(BOOTSTRAP_DRAWS, k))
    drawn.setflags(write=False)
    return drawn


def bootstrap_votes(samples: Sequence[Graded]) -> np.ndarray:
    """verl's 1000 resampled votes for one question's K answers (in agent order), each 1.0
    (right) or 0.0: in each resample of K answers with replacement, the most frequent exact
    answer string wins (ties go to the one drawn first), scored by its first drawn sample.
    Unparsed answers are one more answer, always wrong: verl's "[INVALID]", which an answer
    written as that text joins."""
    codes: dict[str, int] = {}
    keys = [NO_ANSWER if t.answer is None else t.answer for t in samples]
    answer = np.array([codes.setdefault(key, len(codes)) for key in keys])
    right = np.array([t.answer is not None and bool(t.correct) for t in samples], dtype=float)
    drawn = bootstrap_draws(len(samples))
    votes = answer[drawn]  # [draws, K]: the answer of each drawn sample
    counts = (votes[:, :, None] == np.arange(len(codes))).sum(axis=1)  # [draws, answers]
    support = np.take_along_axis(counts, votes, axis=1)  # each drawn sample's answer's count
    # The first position holding a most frequent answer: the winner's first drawn sample.
    first = np.argmax(support == support.max(axis=1, keepdims=True), axis=1)
    chosen: np.ndarray = right[drawn[np.arange(len(drawn)), first]]
    return chosen


def bootstrap_maj(samples: Sequence[Graded]) -> float:
    """verl's maj@K/mean for one question's K answers: the mean of its resampled votes."""
    return float(np.mean(bootstrap_votes(samples)))


def bootstrap_maj_std(samples: Sequence[Graded]) -> float:
    """verl's maj@K/std for one question's K answers: the spread of its resampled votes
    (NumPy's population standard deviation, as verl takes it)."""
    return float(np.std(bootstrap_votes(samples)))
