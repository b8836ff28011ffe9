"""The math-verify answer protocol against the stored outputs of its references
(conformance/math_verify): verl's math_verify.compute_score on every case, and Math-Verify
0.9.0 itself on its own regression cases under their tests' configurations (as settings:
`math-verify:extract=latex,precision=5,...`). No reference is installed here: the outcomes
are data. A difference not declared in differences.toml fails, and so does a declared one
that no longer differs.

The fast lane grades a fixed part (the regression cases, every declared difference, every
twentieth generated case); the whole suite is marked slow (each grade is a worker's round trip).
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from mad_eval.grading import verifier
from mad_eval.grading.grader import grade

HERE = Path(__file__).resolve().parent.parent / "conformance" / "math_verify"
Case = dict[str, Any]


def _load() -> tuple[Case, list[Case]]:
    header, *cases = (json.loads(line) for line in (HERE / "cases.jsonl").open())
    return header, cases


HEADER, CASES = _load()
DIFFERENCES = tomllib.loads((HERE / "differences.toml").read_text())
LISTED = {entry["id"]: entry for entry in DIFFERENCES.get("case", [])}


def _reasoning(case: Case) -> bool:
    """The class `reasoning`: verl reads the reply's reasoning too, and it changes verl's
    outcome; mad-eval reads the final content alone, so it gives verl's outcome there."""
    return "final_verl" in case and case["final_verl"] != case["verl"]


CLASSES: dict[str, Callable[[Case], bool]] = {"reasoning": _reasoning}


def settings_of(config: dict[str, Any]) -> str:
    """A regression test's configuration as the math-verify protocol's settings."""
    flag = {True: "true", False: "false"}
    return (
        f"math-verify:extract={'+'.join(config['match_types'])},"
        f"precision={config['precision']},strict={flag[config['strict']]},"
        f"set_relations={flag[config['allow_set_relation_comp']]},"
        f"box_priority={config['boxed_priority']},gold=searched"
    )


def _graded(jobs: Iterable[tuple[str, str, str]]) -> list[bool]:
    """Each (reply, gold, protocol) graded, as many at once as there are workers."""

    def one(job: tuple[str, str, str]) -> bool:
        return bool(grade(job[0], job[1], "math", answer=job[2]).correct)

    with ThreadPoolExecutor(verifier.max_graders()) as pool:
        return list(pool.map(one, jobs))


def _fast(index: int, case: Case) -> bool:
    declared = case["id"] in LISTED or any(test(case) for test in CLASSES.values())
    return case["id"].startswith("reg-") or declared or index % 20 == 0


def _check(cases: list[Case]) -> None:
    """Every case: mad-eval's verdict is verl's unless declared otherwise, and a declared
    difference still differs; a regression case under its test's settings is Math-Verify's."""
    regression = [c for c in cases if "config" in c]
    outcomes = _graded([(c["reply"], c["gold"], "math-verify") for c in cases])
    configured = _graded([(c["reply"], c["gold"], settings_of(c["config"])) for c in regression])
    wrong = []
    for case, ours in zip(cases, outcomes, strict=True):
        classes = [name for name, test in CLASSES.items() if test(case)]
        if case["id"] in LISTED or classes:
            want = case["final_verl"] if "reasoning" in classes else not case["verl"]
            if ours != want or ours == case["verl"]:
                wrong.append(f"{case['id']}: declared different from verl, but gives {ours}")
        elif ours != case["verl"]:
            wrong.append(f"{case['id']}: verl says {case['verl']}, math-verify {ours}")
    for case, ours in zip(regression, configured, strict=True):
        if ours != case["math_verify"]:
            wrong.append(f"{case['source']}: Math-Verify says {case['math_verify']}, ours {ours}")
    assert not wrong, "\n".join(wrong[:40])


def test_the_cases_are_those_the_readme_counts() -> None:
    assert HEADER["math_verify"] == "0.9.0" and len(CASES) == HEADER["cases"]
    assert len(CASES) - HEADER["regression"] >= 2000
    assert sum("config" in c for c in CASES) == HEADER["regression"] == 269
    assert len({c["id"] for c in CASES}) == len(CASES)
    for entry in DIFFERENCES.get("class", []):  # each class has its test, and a reason
        assert entry["name"] in CLASSES and entry["reason"].strip()
    assert set(LISTED) <= {c["id"] for c in CASES}
    # Reasoning is declared in both of its forms: a block the reply opens with, and a lone
    # close (the chat template opened the block).
    declared = [c for c in CASES if _reasoning(c)]
    assert {c["reply"].startswith("<think>") for c in declared} == {True, False}


@pytest.mark.slow
def test_math_verify_agrees_with_its_references_on_a_fixed_part() -> None:
    _check([c for i, c in enumerate(CASES) if _fast(i, c)])


@pytest.mark.slow
def test_math_verify_agrees_with_its_references_on_every_case() -> None:
    _check(CASES)
