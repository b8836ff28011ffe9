"""The SDRL authors' own setting (their verl fork's self-debate trainer), as plain functions a
trainer calls: which first-turn groups it keeps, how it picks one (own, partner) pair per group,
the debate turn's chat, and which debate groups it keeps. It differs from training.pairs on
purpose: answers are compared as strings (DAPO's `pred`, "[INVALID]" an answer like any
other), a group's correctness is not read when pairing, and every draw comes from one numpy
RandomState carried across a step's groups, in the order the authors draw, so that a trainer
seeding it as they do makes their picks. conformance/sdrl checks all of it against the fork.
(The fork's num_debate_prompt, a random subset of groups to pair, is off in its configs and
not reproduced.)
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np

from mad_eval.debate.prompts import pair_prompt
from mad_eval.records import Messages, Question
from mad_eval.settings.templates import Template, load_template
from mad_eval.training.errors import TrainingError
from mad_eval.training.rewards import NO_ANSWER, Scored

MODES = ("frequency", "random")


def authors_pred(scored: Scored) -> str:
    """A first-turn reply's answer as the authors pair on it: DAPO's `pred`, which is
    "[INVALID]" where grade_group found no answer (under --answer-protocol dapo the rest
    equals DAPO's pred; conformance/dapo)."""
    return NO_ANSWER if scored.answer is None else scored.answer


def keeps_first_turn(acc: Sequence[float]) -> bool:
    """Whether a prompt's first-turn group is trained on (DAPO's group filter on `acc`): its
    replies' accuracies differ, or it holds a single reply."""
    if len(acc) == 0:
        raise TrainingError("a first-turn group holds at least one reply; got none.")
    return bool(np.std(np.asarray(acc, dtype=float)) > 0) or len(acc) == 1


def keeps_debate_turn(rewards: Sequence[float]) -> bool:
    """Whether a debate group (one pair's replies) is trained on: not every reward is close
    to the first (np.isclose, first reward as its first argument); a single reply never is."""
    if len(rewards) < 2:
        return False
    first, *rest = rewards
    return not all(np.isclose(first, r) for r in rest)


def authors_pairs(
    preds: Sequence[str | None],
    lengths: Sequence[int] | None,
    max_length: int | None,
    mode: str,
    rng: np.random.RandomState,
    validate: bool = False,
) -> list[tuple[int, int]]:
    """The (own, partner) pair of ONE first-turn group, as indices into it, or [] when it
    gives none. Replies longer than `max_length` tokens are left out. frequency: a reply of
    the most common pred and one of the second (a tie goes to the pred seen first), swapped
    at even odds in training; random: two distinct replies. Draws from `rng` exactly as the
    authors draw from numpy's global stream, so a trainer carries one RandomState across a
    step's groups, in batch order. A None pred is not counted (the authors skip it)."""
    if mode not in MODES:
        raise TrainingError(
            f"the authors' pairing mode is one of {', '.join(MODES)}, got {mode!r}."
        )
    if max_length is not None and lengths is None:
        raise TrainingError("a length limit needs the replies' lengths.")
    used = [
        i
        for i in range(len(preds))
        if max_length is None or lengths[i] <= max_length  # type: ignore[index]
    ]
    if mode == "random":
        if len(used) < 2:
            return []
        own, partner = rng.choice(used, size=2, replace=False)
        return [(int(own), int(partner))]
    counts = Counter(preds[i] for i in used if preds[i] is not None)
    if len(counts) < 2:
        return []
    (first, _), (second, _) = counts.most_common()[:2]
    own = int(rng.choice([i for i in used if preds[i] == first]))
    partner = int(rng.choice([i for i in used if preds[i] == second]))
    if validate or rng.rand() < 0.5:
        return [(own, partner)]
    return [(partner, own)]


def authors_chat(
    question: Question, own: str, partner: str, template: Template | None = None
) -> Messages:
    """The debate turn's three messages (templates/sdrl.toml, or a template based on it):
    the first-turn prompt, the own reply as the assistant's turn, the partner's reply with
    the instructions. Both replies are stripped and their double quotes escaped, as the
    authors send them. A row written with this template gets the same from row_pair_prompt."""
    return pair_prompt(question, own, partner, template or load_template("sdrl"))
