"""Debate pairs from a model's own rollouts, by the seed paper's two rules.

A prompt whose rollouts are all right or all wrong teaches nothing (zero advantage, as in
DAPO's dynamic sampling), so it is dropped. Every rule reads each rollout's correctness and
answer, never its reward: a reward lowered by DAPO's overlong penalty is still a right answer.
Of the rest:
- random: two distinct rollouts, drawn uniformly;
- frequency: one rollout carrying the most common extracted answer and one carrying the
  second most common (answers grouped by equivalence, unparsed ones not counted; ties in
  frequency broken by the seeded generator). A prompt with fewer than two distinct answers
  gives no pair.
Each pair is put in random order: its first rollout is the "own" one (the model's own
earlier answer), the second its partner's, so position carries no signal.

`debate_pairs` does this for one prompt on plain sequences, as an on-policy trainer calls it
at every step; `build_pairs` calls it per prompt of a file, so both paths pair alike. There,
every draw comes from a generator seeded by (seed, rule, prompt id): a prompt's pairs do not
depend on the other prompts in the file.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields
from itertools import combinations
from typing import Any

from mad_eval.grading.grader import equivalent, same_answer
from mad_eval.records import derive_seed
from mad_eval.training.errors import TrainingError
from mad_eval.training.rollouts import Rollout
from mad_eval.voting.groups import answer_groups

PAIRINGS = {"rand": "random", "freq": "frequency"}


def pairing_rule(name: str) -> str:
    """The rule's short name (rand, freq), given it or its long one (random, frequency)."""
    short = {long: short for short, long in PAIRINGS.items()}.get(name, name)
    if short not in PAIRINGS:
        raise TrainingError(f"--pairing must be one of {', '.join(PAIRINGS)}, got '{name}'.")
    return short


@dataclass(frozen=True)
class _Graded:
    """One rollout as voting.groups.answer_groups reads it."""

    index: int
    answer: str | None
    correct: bool
    grade_timed_out: bool


def _check_counts(per_prompt: int, copies: int, max_length: int | None) -> None:
    if per_prompt < 1:
        raise TrainingError(f"--per-prompt must be at least 1, got {per_prompt}.")
    if copies < 1:
        raise TrainingError(f"--copies must be at least 1, got {copies}.")
    if max_length is not None and max_length < 1:
        raise TrainingError(f"--max-length must be at least 1, got {max_length}.")


class Pairs(list[tuple[int, int]]):
    """One prompt's pairs as (own, partner) indices, and why it gave none (`dropped`):
    "too-long" (no rollout within the length limit), "all-right" or "all-wrong" (every rollout
    used), "one-answer" (frequency rule, fewer than two distinct answers); None when it gave
    pairs."""

    def __init__(self, pairs: Sequence[tuple[int, int]] = (), dropped: str | None = None):
        super().__init__(pairs)
        self.dropped = dropped


def _correctness(correct: Sequence[object]) -> list[bool]:
    """Each rollout's correctness as bools; a reward (-1, 0.8) is refused, since pairing must
    not read a penalised reward as a grade."""
    for value in correct:
        if value not in (0, 1) or isinstance(value, str):
            raise TrainingError(
                "debate_pairs reads each rollout's correctness (True or False, e.g. grade_group's "
                f"`correct`), not its reward; got {value!r}."
            )
    return [bool(value) for value in correct]


def debate_pairs(
    answers: Sequence[str | None],
    correct: Sequence[bool],
    *,
    rule: str = "freq",
    per_prompt: int = 1,
    lengths: Sequence[int] | None = None,
    max_length: int | None = None,
    copies: int = 1,
    seed: int | random.Random = 0,
    same: Callable[[str, str], bool] = equivalent,
    timed_out: Sequence[bool] | None = None,
) -> Pairs:
    """The debate pairs of ONE prompt's rollouts (two or more), as (own, partner) indices into
    them: up to `per_prompt` distinct pairs by `rule` (freq or rand), each listed `copies`
    times in a row (each copy is a row, and verl and TRL sample a group per row).

    `answers`: each rollout's extracted answer (None: unparsed); `correct`: whether each is
    right (grade_group gives both; never the reward, which a penalty may have lowered), so
    two right answers are one answer. `same`: the kind's equivalence (grading.same_answer(kind);
    math's by default). Rollouts whose `lengths` exceed `max_length` are not used (a truncated
    reply is no answer): the lengths are in the unit of the limit, e.g. tokens from a trainer.
    `timed_out`: answers math-verify could not decide, compared by text. Draws come from
    `seed` (an int, or a random.Random carried across steps). Pure: no I/O, no records.
    The result is a list; when empty, its `dropped` says why."""
    rule = pairing_rule(rule)
    _check_counts(per_prompt, copies, max_length)
    if max_length is not None and lengths is None:
        raise TrainingError("a length limit needs the rollouts' lengths.")
    sizes = {len(answers), len(correct)}
    sizes |= {len(s) for s in (lengths, timed_out) if s is not None}
    if len(sizes) > 1:
        raise TrainingError(
            f"answers, correct, lengths and timed_out need one item per rollout; got "
            f"sequences of {' and '.join(map(str, sorted(sizes)))} items."
        )
    if len(answers) < 2:
        raise TrainingError(
            f"debate pairs need a group of at least 2 rollouts of one prompt; got {len(answers)}."
        )
    right = _correctness(correct)
    used = [
        i
        for i in range(len(answers))
        if max_length is None or lengths[i] <= max_length  # type: ignore[index]
    ]
    if not used:
        return Pairs([], "too-long")
    if len({right[i] for i in used}) < 2:
        return Pairs([], "all-right" if right[used[0]] else "all-wrong")
    rng = seed if isinstance(seed, random.Random) else random.Random(seed)
    if rule == "rand":
        candidates = list(combinations(used, 2))
    else:
        graded = [
            _Graded(i, answers[i], right[i], timed_out is not None and bool(timed_out[i]))
            for i in used
        ]
        groups = answer_groups(graded, same)
        if len(groups) < 2:
            return Pairs([], "one-answer")
        rng.shuffle(groups)  # ties in frequency fall in random order...
        groups.sort(key=len, reverse=True)  # ...which a stable sort keeps
        candidates = [(a.index, b.index) for a in groups[0] for b in groups[1]]
    pairs = []
    for a, b in rng.sample(candidates, min(per_prompt, len(candidates))):
        pairs += [(a, b) if rng.random() < 0.5 else (b, a)] * copies
    return Pairs(pairs)


@dataclass(frozen=True)
class Pair:
    first: Rollout  # the own rollout: the model's own earlier answer
    second: Rollout  # the partner's


@dataclass
class Summary:
    rule: str = "freq"  # the pairing rule's short name (PAIRINGS)
    prompts: int = 0
    rollouts: int = 0
    all_correct: int = 0  # prompts dropped: no rollout was wrong
    all_wrong: int = 0  # prompts dropped: no rollout was right
    one_answer: int = 0  # kept prompts with fewer than two distinct answers (frequency rule)
    kept: int = 0  # prompts that gave pairs
    pairs: int = 0  # rows written: distinct pairs times copies
    distinct: list[int] = field(default_factory=list)  # distinct answers per prompt
    unparsed: int = 0  # rollouts with no extractable answer
    too_long: int = 0  # rollouts not used: longer than the length limit
    all_too_long: int = 0  # prompts dropped: every rollout was too long
    lengths: Any = None  # training.rows.Lengths of the rows written

    def dropped(self, length_limit: bool) -> str:
        """The prompts dropped, and why, as a sentence says it."""
        parts = [f"{self.all_correct} prompts all correct", f"{self.all_wrong} all wrong"]
        parts += [f"{self.one_answer} with one distinct answer"] if self.rule == "freq" else []
        parts += [f"{self.all_too_long} with every rollout too long"] if length_limit else []
        return f"{', '.join(parts[:-1])} and {parts[-1]}"

    @property
    def mean_distinct(self) -> float:
        return sum(self.distinct) / len(self.distinct) if self.distinct else 0.0

    def __repr__(self) -> str:
        """One line: the counts, the distinct answers as their mean (not one per prompt)."""
        shown = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "distinct"}
        shown["mean_distinct"] = round(self.mean_distinct, 2)
        return f"Summary({', '.join(f'{k}={v!r}' for k, v in shown.items())})"


def build_pairs(
    rollouts: list[Rollout],
    pairing: str,
    per_prompt: int = 1,
    seed: int = 0,
    *,
    kind: str,
    max_length: int | None = None,
    copies: int = 1,
) -> tuple[list[Pair], Summary]:
    """`debate_pairs` over every prompt of a file, by each rollout's recorded grade (a prompt
    with one rollout is dropped as all right or all wrong); `max_length` counts the response's
    characters. Distinct answers and unparsed ones are
    counted over all rollouts read."""
    pairing = pairing_rule(pairing)
    _check_counts(per_prompt, copies, max_length)
    by_prompt: dict[str, list[Rollout]] = {}
    for rollout in rollouts:
        by_prompt.setdefault(rollout.prompt_id, []).append(rollout)
    summary = Summary(pairing, prompts=len(by_prompt), rollouts=len(rollouts))
    same = same_answer(kind)
    pairs: list[Pair] = []
    for prompt_id, mine in by_prompt.items():
        summary.distinct.append(len(answer_groups(mine, same)))
        summary.unparsed += sum(1 for r in mine if r.answer is None)
        lengths = [len(r.response) for r in mine]
        fits = [max_length is None or n <= max_length for n in lengths]
        summary.too_long += fits.count(False)
        if len(mine) == 1:  # no group: dropped as its one rollout's grade says
            dropped: str | None = (
                "too-long" if not fits[0] else "all-right" if mine[0].correct else "all-wrong"
            )
            chosen = Pairs([], dropped)
        else:
            chosen = debate_pairs(
                [r.answer for r in mine],
                [bool(r.correct) for r in mine],
                rule=pairing,
                per_prompt=per_prompt,
                lengths=lengths,
                max_length=max_length,
                copies=copies,
                seed=derive_seed(seed, "pair", pairing, prompt_id),
                same=same,
                timed_out=[r.grade_timed_out for r in mine],
            )
        dropped = chosen.dropped
        if dropped == "all-right":
            summary.all_correct += 1
        elif dropped == "all-wrong":
            summary.all_wrong += 1
        elif dropped == "one-answer":
            summary.one_answer += 1
        elif dropped == "too-long":
            summary.all_too_long += 1
        else:
            summary.kept += 1
            summary.pairs += len(chosen)
            pairs += [Pair(mine[a], mine[b]) for a, b in chosen]
    return pairs, summary
