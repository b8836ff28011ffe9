"""Bootstrap intervals and the paired test on counts built by hand."""

from __future__ import annotations

import numpy as np
import pytest

from mad_eval.measure.bootstrap import bootstrap_ci, paired_test, point
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
