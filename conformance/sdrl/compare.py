"""How mad-eval's own pairing (`SelfDebate()`) differs from the authors' (`SelfDebate(authors=
True)`, equal to their code on every stored case) on the same first-turn groups: the stored
training groups in frequency mode whose replies are part right (what their filter lets
through), each paired both ways. Prints the count of groups whose pair differs in answers,
by cause; the numbers in docs/how-to/train-with-self-debate.md come from it.

    python conformance/sdrl/compare.py
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from mad_eval.grading.grader import same_answer
from mad_eval.training.pairs import Pairs, debate_pairs
from mad_eval.training.rewards import NO_ANSWER

CASES = Path(__file__).resolve().parent / "cases.jsonl"


def groups() -> list[tuple[dict, int | None, tuple[int, int] | None]]:
    """(group, length limit, the authors' pair) of each part-right training group."""
    found = []
    for line in CASES.read_text(encoding="utf-8").splitlines():
        case = json.loads(line)
        if case["set"] != "pairing" or case["mode"] != "frequency" or case["validate"]:
            continue
        theirs = {g: (own, partner) for g, own, partner in case["pairs"]}
        for index, group in enumerate(case["groups"]):
            if len(set(group["acc"])) == 2:
                found.append((group, case["max_length"], theirs.get(index)))
    return found


def cause(group: dict, limit: int | None, theirs: tuple[int, int] | None, ours: Pairs) -> str:
    """Why the two pairs differ in answers ("" when they do not)."""
    answers = [None if p == NO_ANSWER else p for p in group["pred"]]
    mine = sorted(map(str, {answers[i] for i in ours[0]})) if ours else None
    their = sorted(map(str, {answers[i] for i in theirs})) if theirs else None
    if mine == their:
        return ""
    if theirs and None in {answers[i] for i in theirs}:
        return "an unparsed reply paired: they count [INVALID] as an answer"
    if ours.dropped in ("all-right", "all-wrong"):
        return "the replies short enough to pair are all right or all wrong: they still pair"
    texts = {a for a in answers if a is not None}
    same = same_answer("math")
    if any(same(a, b) for a in texts for b in texts if a != b):
        return "answers equal in value, written differently: they count them apart"
    eligible = Counter(
        str(a)
        for a, n in zip(answers, group["lengths"], strict=True)
        if limit is None or n <= limit
    )
    if mine and their and sorted(eligible[a] for a in mine) == sorted(eligible[a] for a in their):
        return "a tie in frequency: they take the first seen, mad-eval draws"
    return "other"


def main() -> None:
    causes: Counter[str] = Counter()
    found = groups()
    for group, limit, theirs in found:
        answers = [None if p == NO_ANSWER else p for p in group["pred"]]
        ours = debate_pairs(answers, group["acc"], rule="freq", lengths=group["lengths"],
                            max_length=limit, same=same_answer("math"), seed=0)  # fmt: skip
        why = cause(group, limit, theirs, ours)
        causes[why or "the same answers"] += 1
    print(f"{len(found)} part-right training groups in frequency mode")
    for why, count in causes.most_common():
        print(f"{count:6d}  {why}")


if __name__ == "__main__":
    main()
