"""Regenerate cases.jsonl: pairs of answers and golds, each with the verdict Math-Verify gives
when asked as mad-eval's worker asks it (mad_eval.grading.verify_worker: both sides boxed and
parsed, `verify(gold, answer)`), by Math-Verify itself, unchanged. Run by hand, never by CI.

What it records (facts: Math-Verify's outputs on these inputs): for every pair, `math_verify`,
its verdict. tests/test_conformance_quick_compare.py checks that grading's cheap decisions
(mad_eval.grading.kinds.math.quick_compare: equal text, two integers, two plain rationals)
never differ from it, and that the worker's own comparison (which skips sympy's simplifying
where two constants are numerically apart) gives it on every pair.

The pairs: every gold of MATH500, AIME 2024/2025 and AMC 2023 (--data) that is a number or
a fraction, each against itself written another way and against near and random others;
seeded random rationals (small, large, negative, unreduced, zero) in every written form,
equal and unequal, and lookalikes the cheap rules must leave to math-verify (decimals,
percents, thousands separators, `\\frac12`, spaces inside, a zero denominator); and
`expressions`: each MATH500 solution's boxed answer against its gold, random pairs of all
the golds and those answers, and equal constants written two ways (`\\sqrt{8}`, `2\\sqrt{2}`).

    .venv/bin/python conformance/quick_compare/generate.py --data ../shared/data

The inputs are seeded: the same Math-Verify writes the same file, byte for byte.
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import re
import sys
from fractions import Fraction
from importlib import metadata
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from mad_eval.grading.grader import extract_answer

FOLDER = Path(__file__).resolve().parent
FILES = ("math500.jsonl", "aime24.jsonl", "aime25.jsonl", "amc23.jsonl")
NUMBER = re.compile(r"-?(\d+|\\[dt]?frac\{-?\d+\}\{-?\d+\}|\d+/\d+|\d*\.\d+)")


def forms(value: Fraction, rng: random.Random) -> list[str]:
    """Ways an answer writes `value`: exact forms the cheap rules read, and lookalikes."""
    p, q = value.numerator, value.denominator
    sign = "-" if p < 0 else ""
    a = abs(p)
    k = rng.choice((2, 3, 10))
    written = [
        f"{sign}\\frac{{{a}}}{{{q}}}",
        f"{sign}\\dfrac{{{a}}}{{{q}}}",
        f"{sign}\\tfrac{{{a * k}}}{{{q * k}}}",
        f"\\frac{{{p}}}{{{q}}}",
        f"\\frac{{{-p}}}{{{-q}}}",
        f"{sign}{a}/{q}",
        f"{sign}\\frac {{{a}}}{{{q}}}",
        f"{sign}{float(abs(value)):.6g}",
        f"{sign}{float(abs(value)) * 100:.6g}\\%",
    ]
    if q == 1:
        written += [
            f"{p}",
            f"{sign}0{a}",
            f"{sign}{a:,}",
            f"{p}.0",
            f"+{a}" if not sign else f"{p}",
        ]
    if a < 10 and q < 10:
        written.append(f"{sign}\\frac{a}{q}")
    return written


def values(rng: random.Random) -> list[Fraction]:
    found = [Fraction(0), Fraction(1), Fraction(-1), Fraction(1, 3), Fraction(333333, 1000000)]
    for _ in range(120):
        found.append(Fraction(rng.randint(-50, 50), rng.randint(1, 12)))
    for _ in range(40):
        found.append(Fraction(rng.randint(-(10**9), 10**9), rng.randint(1, 10**6)))
    for _ in range(20):
        found.append(Fraction(rng.randint(-(10**28), 10**28), rng.randint(1, 10**28)))
    return found


def near(value: Fraction, rng: random.Random) -> list[Fraction]:
    p, q = value.numerator, value.denominator
    return [Fraction(p + 1, q), Fraction(p, q + 1), -value, value * 10, value + Fraction(1, 10**7)]


def golds(data: Path) -> list[str]:
    found = []
    for name in FILES:
        for line in (data / name).open(encoding="utf-8"):
            row = json.loads(line)
            gold = str(row.get("answer", row.get("gold", ""))).strip()
            if NUMBER.fullmatch(" ".join(gold.split())):
                found.append(gold)
    return sorted(set(found))


EQUAL_CONSTANTS = [
    (r"\frac{\sqrt{2}}{2}", r"\frac{1}{\sqrt{2}}"), (r"2\sqrt{3}", r"\sqrt{12}"),
    (r"\frac{\pi}{3}", r"60^\circ"), (r"e^{i\pi}", "-1"), (r"\sqrt{8}", r"2\sqrt{2}"),
    (r"\frac{1+\sqrt{5}}{2}", r"\frac{2}{\sqrt{5}-1}"), (r"\log_2 8", "3"),
    (r"\sin(\pi/6)", r"\frac12"), (r"\sqrt[3]{27}", "3"), (r"i^2", "-1"),
    (r"\binom{5}{2}", "10"), (r"5!", "120"), (r"\cos 0", "1"), (r"0.333333", r"\frac13"),
    (r"\sqrt{2}+\sqrt{3}", r"\sqrt{5+2\sqrt{6}}"), (r"\tan(\pi/4)", "1"), (r"\ln(e^2)", "2"),
    (r"3\%", "0.03"), (r"\frac{\sqrt{3}}{3}", r"\frac{1}{\sqrt{3}}"),
]  # fmt: skip


def expressions(data: Path, rng: random.Random) -> list[tuple[str, str, str]]:
    """Answers as models write them against golds: MATH500's solutions against their golds,
    random pairs of golds and those answers, and equal constants in two forms (both ways)."""
    golds, answers, pairs = [], [], []
    for name in FILES:
        for line in (data / name).open(encoding="utf-8"):
            row = json.loads(line)
            gold = " ".join(str(row.get("answer", "")).split())
            found = extract_answer(row["solution"]) if row.get("solution") else None
            if gold:
                golds.append(gold)
            if found and gold:
                answers.append(" ".join(found.split()))
                pairs.append(("expressions-solution", answers[-1], gold))
    for a, b in EQUAL_CONSTANTS:
        pairs += [("expressions-equal", a, b), ("expressions-equal", b, a)]
    for _ in range(5000):
        pairs.append(("expressions-random", rng.choice(golds + answers), rng.choice(golds)))
    return pairs


def math_verify_verdict() -> Any:
    """Math-Verify's verdict on (answer, gold) as the worker asks it, with whether one of its
    own timeouts fired (such a pair is left out: its outcome depends on the machine)."""
    from math_verify import parse, verify

    fired = []

    class Timeouts(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.getMessage().startswith("Timeout during"):
                fired.append(True)

    logger = logging.getLogger("math_verify")
    logger.addHandler(Timeouts(logging.WARNING))
    logger.setLevel(logging.WARNING)
    logger.propagate = False
    parsed: dict[str, Any] = {}

    def read(latex: str) -> Any:
        if latex not in parsed:
            parsed[latex] = parse(f"\\boxed{{{latex}}}")
        return parsed[latex]

    def verdict(answer: str, gold: str) -> tuple[bool, bool]:
        fired.clear()
        equal = bool(verify(read(gold), read(answer)))
        return equal, bool(fired) and not equal

    return verdict


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True, help="the benchmark files' folder")
    args = parser.parse_args()
    rng = random.Random(47)
    compare = math_verify_verdict()
    pairs: list[tuple[str, str, str]] = []  # (family, answer, gold)
    real = golds(args.data)
    for gold in real:
        try:
            value = Fraction(
                gold.replace("\\dfrac", "\\frac")
                .replace("\\frac{", "")
                .replace("}{", "/")
                .rstrip("}")
            )
        except (ValueError, ZeroDivisionError):
            value = None
        if value is not None:
            for answer in rng.sample(forms(value, rng), 4):
                pairs.append(("gold-same", answer, gold))
            for other in near(value, rng)[:3]:
                pairs.append(("gold-near", rng.choice(forms(other, rng)), gold))
        for other in rng.sample(real, 3):
            pairs.append(("gold-other", other, gold))
    for value in values(rng):
        written = forms(value, rng)
        for answer in rng.sample(written, min(5, len(written))):
            pairs.append(("same", answer, rng.choice(written)))
        for other in near(value, rng):
            pairs.append(("near", rng.choice(forms(other, rng)), rng.choice(written)))
    for _ in range(100):
        pairs.append(("zero", f"\\frac{{{rng.randint(0, 9)}}}{{0}}", f"{rng.randint(0, 9)}"))
    pairs += expressions(args.data, rng)
    seen, cases, dropped = set(), [], 0
    for family, answer, gold in pairs:
        a, g = " ".join(answer.split()), " ".join(gold.split())
        if (a, g) in seen:
            continue
        seen.add((a, g))
        equal, timed_out = compare(a, g)
        if timed_out:
            dropped += 1
            continue
        cases.append({"id": f"{family}-{len(cases)}", "answer": a, "gold": g, "math_verify": equal})
    versions = {
        name: metadata.version(name) for name in ("math-verify", "latex2sympy2_extended", "sympy")
    }
    with open(FOLDER / "cases.jsonl", "w", encoding="utf-8") as out:
        for case in cases:
            out.write(json.dumps(case, ensure_ascii=False) + "\n")
    meta = {
        "reference": "Math-Verify, unchanged, asked as mad_eval.grading.verify_worker asks it",
        "packages": versions,
        "seed": 47,
        "cases": len(cases),
        "dropped_for_timeouts": dropped,
        "equal": sum(c["math_verify"] for c in cases),
    }
    (FOLDER / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    print(f"{len(cases)} cases, {meta['equal']} equal to math-verify")


if __name__ == "__main__":
    main()
