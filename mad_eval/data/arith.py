"""The built-in arith benchmark: seeded integer arithmetic whose golds are exact by construction."""

from __future__ import annotations

import random

from mad_eval.records import Question

_PHRASES = ("What is the value of {}?", "Compute {}.", "Evaluate {}.")


def arith_questions(size: int, seed: int = 0, name: str = "arith") -> list[Question]:
    """Seeded integer arithmetic: an offline smoke test whose golds are exact by construction."""
    rng = random.Random(seed)  # int seeds, randint and choice give the same stream everywhere
    questions = []
    for i in range(size):
        expression, value = _arith_term(rng)
        for _ in range(rng.randint(1, 3)):
            term, term_value = _arith_term(rng)
            sign = rng.choice("+-")
            expression += f" {sign} {term}"
            value += term_value if sign == "+" else -term_value
        text = rng.choice(_PHRASES).format(expression)
        questions.append(Question(f"{name}-{i}", text, str(value), {"expression": expression}))
    return questions


def _arith_term(rng: random.Random) -> tuple[str, int]:
    """A term that binds tighter than + and -, so the whole value is a plain signed sum."""
    shape = rng.randrange(4)
    if shape == 0:
        n = rng.randint(2, 99)
        return str(n), n
    if shape == 1:
        a, b = rng.randint(2, 25), rng.randint(2, 12)
        return f"{a} * {b}", a * b
    if shape == 2:
        a, b, c, sign = rng.randint(2, 30), rng.randint(1, 20), rng.randint(2, 9), rng.choice("+-")
        return f"({a} {sign} {b}) * {c}", (a + b if sign == "+" else a - b) * c
    divisor, quotient = rng.randint(2, 9), rng.randint(2, 15)
    return f"{divisor * quotient} / {divisor}", quotient
