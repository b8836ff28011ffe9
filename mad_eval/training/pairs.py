"""Debate pairs from a model's own rollouts, by the seed paper's two rules.

A prompt whose rollouts are all correct or all incorrect teaches nothing under a +1/-1
reward (zero advantage, as in DAPO's dynamic sampling), so it is dropped. Of the rest:
- random: two distinct rollouts, drawn uniformly;
- frequency: one rollout carrying the most common extracted answer and one carrying the
  second most common (answers grouped by equivalence, unparsed ones not counted; ties in
  frequency broken by the seeded generator). A prompt with fewer than two distinct answers
  gives no pair.
The two rollouts are put in random order, so position carries no signal. Every draw comes
from a generator seeded by (seed, rule, prompt id): a prompt's pairs do not depend on the
other prompts in the file.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from itertools import combinations

from mad_eval.grading import same_answer
from mad_eval.records import derive_seed
from mad_eval.tally import answer_groups
from mad_eval.training.rollouts import Rollout

PAIRINGS = {"rand": "random", "freq": "frequency"}


def pairing_rule(name: str) -> str:
    """The rule's short name (rand, freq), given it or its long one (random, frequency)."""
    short = {long: short for short, long in PAIRINGS.items()}.get(name, name)
    if short not in PAIRINGS:
        raise ValueError(f"--pairing must be one of {', '.join(PAIRINGS)}, got '{name}'.")
    return short


@dataclass(frozen=True)
class Pair:
    first: Rollout
    second: Rollout


@dataclass
class Summary:
    prompts: int = 0
    rollouts: int = 0
    all_correct: int = 0  # prompts dropped: no rollout was wrong
    all_wrong: int = 0  # prompts dropped: no rollout was right
    one_answer: int = 0  # kept prompts with fewer than two distinct answers (frequency rule)
    kept: int = 0  # prompts that gave pairs
    pairs: int = 0
    distinct: list[int] = field(default_factory=list)  # distinct answers per prompt
    unparsed: int = 0  # rollouts with no extractable answer

    @property
    def mean_distinct(self) -> float:
        return sum(self.distinct) / len(self.distinct) if self.distinct else 0.0


def build_pairs(
    rollouts: list[Rollout], pairing: str, per_prompt: int = 1, seed: int = 0, kind: str = "math"
) -> tuple[list[Pair], Summary]:
    """Up to `per_prompt` distinct pairs per prompt by the rule `pairing` (rand or freq);
    answers are grouped by the benchmark kind's equivalence."""
    pairing = pairing_rule(pairing)
    if per_prompt < 1:
        raise ValueError(f"--per-prompt must be at least 1, got {per_prompt}.")
    by_prompt: dict[str, list[Rollout]] = {}
    for rollout in rollouts:
        by_prompt.setdefault(rollout.prompt_id, []).append(rollout)
    summary = Summary(prompts=len(by_prompt), rollouts=len(rollouts))
    pairs: list[Pair] = []
    for prompt_id, mine in by_prompt.items():
        groups = answer_groups(mine, same_answer(kind))
        summary.distinct.append(len(groups))
        summary.unparsed += sum(1 for r in mine if r.answer is None)
        right = sum(r.correct for r in mine)
        if right == len(mine):
            summary.all_correct += 1
            continue
        if right == 0:
            summary.all_wrong += 1
            continue
        rng = random.Random(derive_seed(seed, "pair", pairing, prompt_id))
        if pairing == "rand":
            candidates = list(combinations(mine, 2))
        else:
            if len(groups) < 2:
                summary.one_answer += 1
                continue
            rng.shuffle(groups)  # ties in frequency fall in random order...
            groups.sort(key=len, reverse=True)  # ...which a stable sort keeps
            candidates = [(a, b) for a in groups[0] for b in groups[1]]
        chosen = rng.sample(candidates, min(per_prompt, len(candidates)))
        for a, b in chosen:
            pairs.append(Pair(a, b) if rng.random() < 0.5 else Pair(b, a))
        summary.kept += 1
        summary.pairs += len(chosen)
    return pairs, summary
