"""Regenerate cases.jsonl: pairs of plain numbers in the forms answers and golds take, each
with the verdict math-verify gives when mad-eval's worker asks it (mad_eval.grading.
verify_worker: both sides boxed and parsed, `verify(gold, answer)`). Run by hand, never by CI.

What it records (facts: Math-Verify's outputs on these inputs): for every pair, `math_verify`,
the worker's verdict. tests/test_conformance_quick_compare.py checks that grading's cheap
decisions (mad_eval.grading.kinds.math.quick_compare: equal text, two integers, two plain
rationals) never differ from it, so deciding without a worker changes no verdict.

The pairs: every gold of MATH500, AIME 2024/2025 and AMC 2023 (--data) that is a number or
a fraction, each against itself written another way and against near and random others;
then seeded random rationals (small, large, negative, unreduced, zero) in every written
form, equal and unequal, and lookalikes the cheap rules must leave to math-verify (decimals,
percents, thousands separators, `\\frac12`, spaces inside, a zero denominator).

    .venv/bin/python conformance/quick_compare/generate.py --data ../shared/data

The inputs are seeded: the same Math-Verify writes the same file, byte for byte.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
from fractions import Fraction
from importlib import metadata
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from mad_eval.grading.verify_worker import _math_verify

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True, help="the benchmark files' folder")
    args = parser.parse_args()
    rng = random.Random(47)
    compare, _ = _math_verify()
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
    seen, cases = set(), []
    for family, answer, gold in pairs:
        a, g = " ".join(answer.split()), " ".join(gold.split())
        if (a, g) in seen:
            continue
        seen.add((a, g))
        verdict = compare(a, g)
        if verdict.timed_out:
            continue
        cases.append(
            {"id": f"{family}-{len(cases)}", "answer": a, "gold": g, "math_verify": verdict.equal}
        )
    versions = {
        name: metadata.version(name) for name in ("math-verify", "latex2sympy2_extended", "sympy")
    }
    with open(FOLDER / "cases.jsonl", "w", encoding="utf-8") as out:
        for case in cases:
            out.write(json.dumps(case, ensure_ascii=False) + "\n")
    meta = {
        "reference": "Math-Verify as mad_eval.grading.verify_worker asks it",
        "packages": versions,
        "seed": 47,
        "cases": len(cases),
        "equal": sum(c["math_verify"] for c in cases),
    }
    (FOLDER / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    print(f"{len(cases)} cases, {meta['equal']} equal to math-verify")


if __name__ == "__main__":
    main()
