"""Bootstrap intervals and the paired test on counts built by hand."""

from __future__ import annotations

import numpy as np
import pytest

from mad_eval.measure.bootstrap import Resampled, bootstrap_ci, paired_test, point
from mad_eval.measure.counts import Tallies
from mad_eval.measure.schema import formulas
from mad_eval.measure.scoring import Scoring

ACCURACY = formulas(Scoring(1, 0, (0,), kind="math", seed=0))["round0.agent_accuracy"]


def tallies(questions: list[str], right: list[list[float]], asked: list[list[float]]) -> Tallies:
    num, den = np.array(right, dtype=float), np.array(asked, dtype=float)
    return Tallies(list(range(len(right))), questions, {"agent0": num}, {"agent0": den})


def test_rates_pool_questions_then_average_runs():
    # Run 0: 1 of 2 and 2 of 2 right = 75%; run 1: 0 of 1 and 1 of 3 = 25%. Mean 50.
    t = tallies(["a", "b"], [[1, 2], [0, 1]], [[2, 2], [1, 3]])
    assert point(t, ACCURACY) == pytest.approx(50.0)


def test_an_interval_collapses_when_every_question_agrees():
    t = tallies(["a", "b", "c"], [[1, 1, 1]], [[2, 2, 2]])
    assert bootstrap_ci(t, ACCURACY, replicates=500) == pytest.approx((50.0, 50.0))


def test_pairs_use_only_the_questions_both_answered_in_one_order():
    a = tallies(["q1", "q2", "q3"], [[1, 0, 1]], [[1, 1, 1]])
    b = tallies(["q3", "q1"], [[1, 1]], [[1, 1]])  # same answers on q1 and q3, other order
    assert paired_test(a, ACCURACY, b, ACCURACY, replicates=500) == (1.0, 2)
    assert a.on(["q3", "q1"]).num["agent0"].tolist() == [[1.0, 1.0]]
    disjoint = tallies(["q9"], [[1]], [[1]])
    assert paired_test(a, ACCURACY, disjoint, ACCURACY) == (None, 0)


def test_undefined_numbers_give_no_interval():
    t = tallies(["a"], [[0]], [[0]])  # nothing asked: no accuracy
    assert point(t, ACCURACY) is None
    assert bootstrap_ci(t, ACCURACY, replicates=200) == (None, None)


def test_the_shared_resamples_are_one_multinomial_draw_kept_a_byte_a_count():
    from mad_eval.measure.bootstrap import _weights

    found = _weights(300, 250, 7)  # three blocks of replicates, the last one short
    drawn = np.random.default_rng(7).multinomial(300, np.full(300, 1 / 300), size=250)
    assert found.dtype == np.uint8 and (found == drawn).all()


def test_numbers_asked_first_get_the_intervals_and_tests_of_one_at_a_time():
    rng = np.random.default_rng(3)
    names = [f"q{i}" for i in range(60)]
    a = tallies(names, rng.integers(0, 3, (2, 60)), np.full((2, 60), 2))
    b = tallies(names[::-1][:45], rng.integers(0, 3, (1, 45)), np.full((1, 45), 2))
    other = formulas(Scoring(1, 0, (0,), kind="math", seed=0))["round0.agent_accuracy"]
    resampled = Resampled(replicates=300)
    ci_a, ci_b = resampled.interval(a, ACCURACY), resampled.interval(b, ACCURACY)
    against_b, n = resampled.paired(a, ACCURACY, b, other)  # on the 45 shared, sorted
    itself, _ = resampled.paired(a, ACCURACY, a, ACCURACY)  # no difference: p is 1
    resampled.compute()
    assert ci_a() == bootstrap_ci(a, ACCURACY, 300) and ci_b() == bootstrap_ci(b, ACCURACY, 300)
    assert (against_b(), n) == paired_test(a, ACCURACY, b, other, 300) and n == 45
    assert itself() == 1.0
