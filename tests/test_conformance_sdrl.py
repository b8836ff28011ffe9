"""mad-eval against the SDRL authors' verl fork (conformance/sdrl/cases.jsonl, made by its
generate.py from the fork's own trainer code): the pair each first-turn group gives, the
DAPO grades it pairs on, the debate turn's three messages, and both group filters. Any
difference not declared in differences.toml fails, and so does a declared one that no longer
differs."""

from __future__ import annotations

import json
import tomllib
from collections import Counter
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mad_eval.records import Question
from mad_eval.settings.templates import load_template
from mad_eval.training.rewards import grade_group
from mad_eval.training.sdrl import (
    authors_chat,
    authors_pairs,
    authors_pred,
    keeps_debate_turn,
    keeps_first_turn,
)

FOLDER = Path(__file__).resolve().parent.parent / "conformance" / "sdrl"
Case = dict[str, Any]


@cache
def cases(kind: str) -> list[Case]:
    with open(FOLDER / "cases.jsonl", encoding="utf-8") as lines:
        return [
            case for line in lines if line.strip() and (case := json.loads(line))["set"] == kind
        ]


@cache
def declared() -> dict[str, Any]:
    return tomllib.loads((FOLDER / "differences.toml").read_text(encoding="utf-8"))


# What the stored suite must hold at least (meta.json gives the exact counts).
MINIMUM = {"groups": 2000, "prompt": 200, "ties": 500}

# Each class differences.toml may name: whether it covers a case (none is needed so far).
PREDICATES: dict[str, Callable[[Case], bool]] = {}


class Differences:
    """The differences one check finds (pairing, grading, prompt, filter), each checked
    against differences.toml, whose classes and cases name the checks they hold for."""

    def __init__(self, check: str, kind: str):
        self.check_name, self.kind = check, kind
        self.classes = {c["name"]: c for c in declared().get("class", []) if check in c["sets"]}
        unknown = [
            c["predicate"] for c in self.classes.values() if c["predicate"] not in PREDICATES
        ]
        assert not unknown, f"differences.toml names predicates this test lacks: {unknown}"
        self.ids = {c["id"] for c in declared().get("case", []) if check in c["sets"]}
        self.hits = dict.fromkeys(self.classes, 0)
        self.seen: set[str] = set()
        self.undeclared: list[str] = []

    def found(self, case: Case, what: str) -> None:
        if case["id"] in self.ids:
            self.seen.add(case["id"])
            return
        known = [n for n, c in self.classes.items() if PREDICATES[c["predicate"]](case)]
        if known:
            self.hits[known[0]] += 1
        else:
            self.undeclared.append(f"{case['id']}: {what}")

    def check(self) -> None:
        total = len(cases(self.kind))
        assert not self.undeclared, (
            f"{len(self.undeclared)} of {total} {self.kind} cases differ from the SDRL fork in "
            f"{self.check_name} without a declared reason, e.g. {self.undeclared[:3]}"
        )
        stale = [n for n, hits in self.hits.items() if not hits] + sorted(self.ids - self.seen)
        assert not stale, f"differences.toml declares what no longer differs: {stale}"


def tied(group: dict[str, Any], limit: int | None) -> bool:
    """Whether the first-seen order picks the majority or the second pred: two of the most
    common preds (among the replies within `limit`) tie for first or for second place."""
    kept = zip(group["pred"], group["lengths"], strict=True)
    sizes = [n for _, n in Counter(p for p, n in kept if limit is None or n <= limit).most_common()]
    return sizes[1:2] == sizes[:1] or (len(sizes) > 2 and sizes[1] == sizes[2])


def test_the_suite_is_pinned_and_covers_every_rule() -> None:
    meta = json.loads((FOLDER / "meta.json").read_text(encoding="utf-8"))
    assert meta["commit"].startswith("a4e0337")
    pairing, prompt, filters = cases("pairing"), cases("prompt"), cases("filter")
    groups = [(g, c["max_length"]) for c in pairing for g in c["groups"]]
    first = [v for c in filters if c["turn"] == "first" for v in c["values"]]
    debate = [v for c in filters if c["turn"] == "debate" for v in c["values"]]
    count = meta["cases"]
    assert (count["pairing_cases"], count["pairing_groups"], count["pairs"]) == (
        len(pairing), len(groups), sum(len(c["pairs"]) for c in pairing)
    )  # fmt: skip
    assert (count["prompt"], count["filter_first_groups"], count["filter_debate_groups"]) == (
        len(prompt), len(first), len(debate)
    )  # fmt: skip
    assert len(groups) >= MINIMUM["groups"] and len(prompt) >= MINIMUM["prompt"]
    # Every branch of the rules is taken: both modes, in training and validation, ties in
    # frequency, "[INVALID]" as an answer, replies cut by length, groups giving no pair.
    assert {(c["mode"], c["validate"]) for c in pairing} == {
        (mode, validate) for mode in ("frequency", "random") for validate in (False, True)
    }
    assert sum(tied(g, limit) for g, limit in groups) >= MINIMUM["ties"]
    assert any("[INVALID]" in g["pred"] for g, _ in groups)
    assert any(limit is not None and max(g["lengths"]) > limit for g, limit in groups)
    assert len(groups) > sum(len(c["pairs"]) for c in pairing)
    # Replies whose quoting matters: surrounding whitespace, double quotes.
    assert any('"' in c["own"] and '"' in c["partner"] for c in prompt)
    assert any(c["own"] != c["own"].strip() for c in prompt)
    # Filters: single replies, equal and unequal groups, rewards within np.isclose.
    assert {len(v) for v in first} >= {1, 2} and {len(v) for v in debate} >= {1, 2}
    assert {keeps_first_turn(v) for v in first} == {keeps_debate_turn(v) for v in debate} == {
        True, False
    }  # fmt: skip


def pairs_of(case: Case) -> list[list[int]]:
    """[group, own, partner] for each group that gives a pair: one RandomState for the case,
    carried across its groups in order, as the fork's global stream is."""
    rng = np.random.RandomState(case["seed"])
    found = []
    for g, group in enumerate(case["groups"]):
        chosen = authors_pairs(
            group["pred"], group["lengths"], case["max_length"], case["mode"], rng,
            validate=case["validate"],
        )  # fmt: skip
        found += [[g, own, partner] for own, partner in chosen]
    return found


def test_each_group_gives_the_pair_the_fork_picks() -> None:
    """Every pick, swap and skipped group the same as the fork's."""
    differences = Differences("pairing", "pairing")
    for case in cases("pairing"):
        mine = pairs_of(case)
        if mine != case["pairs"]:
            differences.found(case, f"ours {mine[:3]}, the fork's {case['pairs'][:3]}")
    differences.check()


@pytest.mark.slow
def test_dapo_grades_each_reply_as_the_fork_pairs_on_it() -> None:
    """grade_group under --answer-protocol dapo gives the fork's pred (authors_pred: its
    "[INVALID]" for no answer), acc and score for every first-turn reply."""
    differences = Differences("grading", "pairing")
    for case in cases("pairing"):
        for g, group in enumerate(case["groups"]):
            scored = grade_group(group["replies"], group["gold"], "math", answer_protocol="dapo")
            mine = (
                [authors_pred(s) for s in scored],
                [s.correct for s in scored],
                [s.reward for s in scored],
            )
            theirs = (group["pred"], group["acc"], group["score"])
            if mine != theirs:
                differences.found(case, f"group {g}: ours {mine}, the fork's {theirs}")
    differences.check()


# templates/sdrl.toml with the fork's sentences as generate.py hid them: its placeholders.
PLACEHOLDERS = """base = "sdrl"

[values]
task = "\u27e8task\u27e9"
reminder = "\u27e8reminder\u27e9"
intro = "\u27e8intro\u27e9"
start = "\u27e8start\u27e9"
end = "\u27e8end\u27e9"
request = "\u27e8request\u27e9"
steps = ["\u27e8step1\u27e9", "\u27e8step2\u27e9", "\u27e8step3\u27e9", "\u27e8step4\u27e9"]
answer_line = "\u27e8answer_line\u27e9"
"""


def test_the_sdrl_template_sends_the_debate_turn_the_fork_builds(tmp_path: Path) -> None:
    """The three messages, byte for byte, the fork's sentences being the placeholders in
    both: its first-turn prompt, the own reply stripped and quote-escaped as the assistant's
    turn, the partner's the same way between the markers."""
    path = tmp_path / "sdrl-placeholders.toml"
    path.write_text(PLACEHOLDERS, encoding="utf-8")
    template = load_template(str(path))
    differences = Differences("prompt", "prompt")
    for case in cases("prompt"):
        question = Question(case["id"], case["question"], "0", kind="math", answer="dapo")
        messages = authors_chat(question, case["own"], case["partner"], template)
        if messages != case["messages"]:
            differences.found(case, "the messages differ")
    differences.check()


def test_both_filters_keep_the_groups_the_fork_keeps() -> None:
    keeps = {"first": keeps_first_turn, "debate": keeps_debate_turn}
    differences = Differences("filter", "filter")
    for case in cases("filter"):
        mine = [keeps[case["turn"]](values) for values in case["values"]]
        if mine != case["kept"]:
            differences.found(case, f"ours {mine}, the fork's {case['kept']}")
    differences.check()


@pytest.mark.parametrize(
    "reply", ['\r\n  say "2" \u00a0\n', '\u2028\u3000x\\"y\\"\x1c', "  {{ 1 }} {% raw %}\t", ""]
)
def test_replies_are_stripped_and_escaped_as_python_does(reply: str) -> None:
    """Carriage returns, Unicode spaces, escapes already there, template syntax: the
    shipped template quotes each reply as str.strip() and then escaping every quote gives."""
    question = Question("q", "What is 1+1?", "2", kind="math", answer="dapo")
    _, own, said = authors_chat(question, reply, reply)
    expected = reply.strip().replace('"', '\\"')
    assert own == {"role": "assistant", "content": expected}
    assert f"\n{expected}\n" in said["content"]


# ---- the rules on small groups, each one way it can go wrong -----------------------------


def test_a_tie_goes_to_the_answer_seen_first_and_validation_never_swaps() -> None:
    preds = ["7", "5", "7", "5", "[INVALID]"]
    for seed in range(20):
        (pair,) = authors_pairs(preds, None, None, "frequency", np.random.RandomState(seed), True)
        assert preds[pair[0]] == "7" and preds[pair[1]] == "5"


def test_training_swaps_at_even_odds_and_invalid_counts_as_an_answer() -> None:
    preds = ["[INVALID]", "[INVALID]", "3"]
    rng = np.random.RandomState(0)
    owns = [authors_pairs(preds, None, None, "frequency", rng)[0][0] for _ in range(400)]
    assert 150 < sum(preds[own] == "[INVALID]" for own in owns) < 250


def test_long_replies_and_one_answer_groups_give_no_pair() -> None:
    rng = np.random.RandomState(0)
    assert authors_pairs(["1", "2"], [10, 11], 10, "frequency", rng) == []
    assert authors_pairs(["1", "1", None], None, None, "frequency", rng) == []
    assert authors_pairs(["1", "2"], [10, 11], 10, "random", rng) == []
    assert authors_pairs(["1", "2"], [10, 10], 10, "random", rng) in ([(0, 1)], [(1, 0)])


@pytest.mark.parametrize(
    ("values", "first", "debate"),
    [([1.0], True, False), ([0.0, 0.0], False, False), ([0.0, 1.0], True, True),
     ([1.0, 1.0 + 1e-9], True, False)],
)  # fmt: skip
def test_filters_on_small_groups(values: list[float], first: bool, debate: bool) -> None:
    assert keeps_first_turn(values) is first and keeps_debate_turn(values) is debate
