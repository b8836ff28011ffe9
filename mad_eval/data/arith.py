"""The built-in arith benchmark: seeded integer arithmetic whose golds are exact by
construction, made easier or harder by its parameters (terms, digits, ops)."""

from __future__ import annotations

import random
import re
from collections.abc import Mapping
from dataclasses import dataclass

from mad_eval.records import Question

MAX_TERMS, MAX_DIGITS = 6, 3
OPERATORS = {"add": "+", "sub": "-", "mul": "*", "div": "/"}  # ops=add.sub names the first two
ACCEPTED = {
    "terms": f"a whole number from 1 to {MAX_TERMS}, or a range of them such as 2-4",
    "digits": f"a whole number from 1 to {MAX_DIGITS}",
    "ops": "some of add, sub, mul and div joined by dots, each once (e.g. add.sub)",
}


@dataclass(frozen=True)
class Difficulty:
    """How hard the questions are. The defaults are the original mix, which plain `arith`
    asks: its seed stream and questions never change, since stored runs hold them."""

    terms: tuple[int, int] = (2, 4)  # fewest and most terms added or subtracted
    digits: int = 3  # most digits of any number written (the original's largest: 135 / 9)
    ops: str = "+-*/"  # the operators that may appear

    @property
    def signs(self) -> str:
        """The operators that join terms."""
        return "".join(sign for sign in "+-" if sign in self.ops)

    def params(self) -> dict[str, str]:
        """The parameters as a benchmark name spells them: terms=2-2 is terms=2, ops in
        add.sub.mul.div order."""
        low, high = self.terms
        ops = [name for name, sign in OPERATORS.items() if sign in self.ops]
        terms = str(low) if low == high else f"{low}-{high}"
        return {"terms": terms, "digits": str(self.digits), "ops": ".".join(ops)}


def difficulty(params: Mapping[str, str], benchmark: str = "arith") -> Difficulty:
    """The parameters read and checked; a ValueError names the one that is wrong, its value
    and what is accepted (`benchmark`: the name the sentence gives)."""
    for key in params:
        if key not in ACCEPTED:
            raise ValueError(
                f"benchmark {benchmark} takes no parameter '{key}'; its parameters: "
                f"{', '.join(ACCEPTED)}"
            )

    def refuse(key: str) -> ValueError:
        return ValueError(
            f"benchmark parameter '{key}={params[key]}' is not accepted by {benchmark}: "
            f"{key} takes {ACCEPTED[key]}"
        )

    level = Difficulty()
    terms, digits, ops = level.terms, level.digits, level.ops
    if "terms" in params:
        found = re.fullmatch(r"([0-9])(?:-([0-9]))?", params["terms"])
        terms = (int(found[1]), int(found[2] or found[1])) if found else (0, 0)
        if not 1 <= terms[0] <= terms[1] <= MAX_TERMS:
            raise refuse("terms")
    if "digits" in params:
        if not re.fullmatch(f"[1-{MAX_DIGITS}]", params["digits"]):
            raise refuse("digits")
        digits = int(params["digits"])
    if "ops" in params:
        names = params["ops"].split(".")
        if any(name not in OPERATORS for name in names) or len(set(names)) < len(names):
            raise refuse("ops")
        ops = "".join(sign for name, sign in OPERATORS.items() if name in names)
    level = Difficulty(terms, digits, ops)
    if terms[1] > 1 and not level.signs:
        shown = level.params()
        raise ValueError(
            f"benchmark parameters 'terms={shown['terms']}' and 'ops={shown['ops']}' do not fit "
            f"{benchmark}: more than one term needs add or sub in ops to join them (give "
            "terms=1, or put add or sub in ops)"
        )
    return level


def canonical_params(params: Mapping[str, str], benchmark: str = "arith") -> dict[str, str]:
    """The given parameters checked and spelled one way, so one question set has one name."""
    spelled = difficulty(params, benchmark).params()
    return {key: spelled[key] for key in params}


def generate(size: int, seed: int, name: str, params: Mapping[str, str]) -> list[Question]:
    """The questions of a spec's [builtin] table and its parameters."""
    return arith_questions(size, seed, name, difficulty(params, name))


_PHRASES = ("What is the value of {}?", "Compute {}.", "Evaluate {}.")


def arith_questions(
    size: int, seed: int = 0, name: str = "arith", level: Difficulty = Difficulty()
) -> list[Question]:
    """Seeded integer arithmetic: an offline smoke test whose golds are exact by construction.
    At the default level every draw is the original generator's, in its order."""
    rng = random.Random(seed)  # int seeds, randint and choice give the same stream everywhere
    low, high = level.terms
    questions = []
    for i in range(size):
        expression, value = _arith_term(rng, level)
        for _ in range(rng.randint(low - 1, high - 1)):
            term, term_value = _arith_term(rng, level)
            sign = rng.choice(level.signs)
            expression += f" {sign} {term}"
            value += term_value if sign == "+" else -term_value
        text = rng.choice(_PHRASES).format(expression)
        questions.append(Question(f"{name}-{i}", text, str(value), {"expression": expression}))
    return questions


def _arith_term(rng: random.Random, level: Difficulty) -> tuple[str, int]:
    """A term that binds tighter than + and -, so the whole value is a plain signed sum: a
    number, a product, a bracketed sum or difference times a number, or an exact quotient,
    as the level's operators allow; no number has more than the level's digits."""
    ops, top = level.ops, 10**level.digits - 1
    shapes = [0]  # a number
    shapes += [1] if "*" in ops else []
    shapes += [2] if "*" in ops and level.signs else []
    shapes += [3] if "/" in ops else []
    shape = shapes[rng.randrange(len(shapes))]  # all four: randrange(4), as the original drew
    if shape == 0:
        n = rng.randint(2, min(99, top))
        return str(n), n
    if shape == 1:
        a, b = rng.randint(2, min(25, top)), rng.randint(2, min(12, top))
        return f"{a} * {b}", a * b
    if shape == 2:
        a, b, c = rng.randint(2, min(30, top)), rng.randint(1, min(20, top)), rng.randint(2, 9)
        sign = rng.choice(level.signs)
        return f"({a} {sign} {b}) * {c}", (a + b if sign == "+" else a - b) * c
    divisor = rng.randint(2, min(9, top // 2))
    quotient = rng.randint(2, min(15, top // divisor))
    return f"{divisor * quotient} / {divisor}", quotient
