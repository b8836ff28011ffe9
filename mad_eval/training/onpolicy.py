"""One prompt's step of on-policy self-debate RL, with no trainer in it.

The seed paper's step, per prompt: sample a group of first-turn replies, reward them, pair a
reply with a partner's from the same group, build each pair's debate-turn prompt, and sample
the debate turn as a group of its own. `SelfDebate.step` is the middle of that: it grades the
group once (`grade_group`), pairs by correctness (`debate_pairs`, never the penalised reward)
and returns each pair's debate-turn row, built by the evaluation's own prompt builder from the
first-turn row alone. The TRL trainer (training.trl_grpo) and the verl agent loop
(training.verl_loop) call it; neither is imported here.

`SelfDebate(authors=True)` is the SDRL authors' own setting instead (training.sdrl, proven
against their code in conformance/sdrl): a group whose replies are all right or all wrong is
dropped from training before any pairing (their filter on accuracy), and one pair per group is
drawn on DAPO's `pred` strings from a numpy RandomState carried across the step.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mad_eval.grading.grader import same_answer
from mad_eval.training.errors import TrainingError
from mad_eval.training.pairs import PAIRINGS, Pairs, debate_pairs, pairing_rule
from mad_eval.training.rewards import Overlong, Scored, grade_group
from mad_eval.training.rows import row_pair_prompt, row_question
from mad_eval.training.sdrl import authors_pairs, authors_pred, keeps_first_turn


@dataclass(frozen=True)
class Group:
    """One prompt's first-turn group after `SelfDebate.step`."""

    scored: list[Scored]  # per first-turn reply: reward, answer, correct, timed_out
    pairs: Pairs  # (own, partner) indices into the group; `dropped` says why there are none
    debates: list[dict[str, Any]] = field(default_factory=list)  # one debate-turn row per pair
    trained: bool = True  # False: the authors' filter drops its first-turn replies from the loss

    @property
    def rewards(self) -> list[float]:
        return [s.reward for s in self.scored]


@dataclass(frozen=True)
class SelfDebate:
    """The paper's on-policy pairing settings. `per_prompt`: debate contexts per prompt (each
    sampled as its own group by the trainer); `max_length`: first-turn replies longer than
    this many tokens are not paired (a truncated reply is no answer); `overlong`: DAPO's
    penalty on the first turn's rewards (pairing still reads correctness); `stop_unparsed`:
    steps in a row without one parsed first-turn reply that stop the run (AnswerWatch);
    `authors`: the SDRL authors' filter and pairing (module docstring), one pair per group."""

    rule: str = "freq"
    per_prompt: int = 1
    max_length: int | None = None
    overlong: Overlong | None = None
    seed: int = 0
    stop_unparsed: int = 10
    authors: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "rule", pairing_rule(self.rule))
        if self.per_prompt < 1:
            raise TrainingError(f"per_prompt must be at least 1, got {self.per_prompt}.")
        if self.authors and self.per_prompt != 1:
            raise TrainingError(
                f"the authors' setting pairs once per prompt; per_prompt must be 1, got "
                f"{self.per_prompt}."
            )
        if self.max_length is not None and self.max_length < 1:
            raise TrainingError(f"max_length must be at least 1, got {self.max_length}.")
        if self.stop_unparsed < 1:
            raise TrainingError(f"stop_unparsed must be at least 1, got {self.stop_unparsed}.")

    def watch(self) -> AnswerWatch:
        """What a trainer keeps across steps to stop a model that never answers."""
        return AnswerWatch(self.stop_unparsed)

    def rng(self) -> Any:
        """The generator a trainer keeps across steps, so each step draws fresh pairs: a
        random.Random, or under `authors` a numpy RandomState, drawn from as they draw."""
        return np.random.RandomState(self.seed) if self.authors else random.Random(self.seed)

    def step(
        self,
        row: Mapping[str, Any],
        texts: Sequence[str],
        lengths: Sequence[int] | None = None,
        rng: Any = None,
        validate: bool = False,
    ) -> Group:
        """Grade one first-turn row's group of replies (`texts`, with their token `lengths`),
        pair them and build the debate-turn rows. A group of one is refused. `validate`
        (authors' setting): no group is filtered and the own reply is the majority's."""
        if len(texts) < 2:
            raise TrainingError(
                f"self-debate needs a group of at least 2 first-turn replies per prompt; got "
                f"{len(texts)} (set the trainer's group size, num_generations or rollout.n, to 2 "
                "or more)."
            )
        question = row_question(row)
        scored = grade_group(
            texts,
            question.gold,
            question.kind,
            options=question.options,
            answer_protocol=question.answer,
            lengths=lengths,
            overlong=self.overlong,
        )
        rng = rng if rng is not None else self.rng()
        if self.authors:
            return self._authors_step(row, texts, lengths, scored, rng, validate)
        pairs = debate_pairs(
            [s.answer for s in scored],
            [s.correct for s in scored],
            rule=self.rule,
            per_prompt=self.per_prompt,
            lengths=lengths if self.max_length is not None else None,
            max_length=self.max_length,
            seed=rng,
            same=same_answer(question.kind),
            timed_out=[s.timed_out for s in scored],
        )
        debates = [debate_row(row, texts, scored, a, b, self.rule) for a, b in pairs]
        return Group(scored, pairs, debates)

    def _authors_step(
        self,
        row: Mapping[str, Any],
        texts: Sequence[str],
        lengths: Sequence[int] | None,
        scored: list[Scored],
        rng: np.random.RandomState,
        validate: bool,
    ) -> Group:
        right = [s.correct for s in scored]
        if not validate and not keeps_first_turn(right):
            return Group(scored, Pairs([], "all-right" if right[0] else "all-wrong"), [], False)
        limit = self.max_length if not validate else None  # they validate up to the reply limit
        if limit is not None and lengths is None:
            raise TrainingError("a length limit needs the replies' lengths.")
        preds = [authors_pred(s) for s in scored]
        chosen = authors_pairs(preds, lengths, limit, PAIRINGS[self.rule], rng, validate)
        if not chosen:
            within = sum(limit is None or n <= limit for n in lengths or [0] * len(texts))
            return Group(scored, Pairs([], "one-answer" if within > 1 else "too-long"))
        debates = [debate_row(row, texts, scored, a, b, self.rule) for a, b in chosen]
        return Group(scored, Pairs(chosen), debates)


def debate_row(
    row: Mapping[str, Any],
    texts: Sequence[str],
    scored: Sequence[Scored],
    own: int,
    partner: int,
    rule: str = "freq",
) -> dict[str, Any]:
    """The debate-turn row of one pair, shaped as `train pairs` writes its rows: agent 0's
    round-1 prompt in a two-agent debate whose own answer is reply `own` and whose partner's
    is reply `partner`, with the first-turn row's gold and grading keys."""
    info = dict(row["extra_info"])
    info.update(
        pairing=PAIRINGS[pairing_rule(rule)],
        answers=[scored[own].answer, scored[partner].answer],
        correct=[scored[own].correct, scored[partner].correct],
        sources=[f"first turn reply {own}", f"first turn reply {partner}"],
        turn="debate",
    )
    return {
        "data_source": row.get("data_source"),
        "prompt": row_pair_prompt(row, texts[own], texts[partner]),
        "ability": row.get("ability"),
        "reward_model": dict(row["reward_model"]),
        "extra_info": info,
    }


class NoAnswers(UserWarning):
    """A training step in which no first-turn reply gave an answer the rows' protocol reads."""


@dataclass
class AnswerWatch:
    """Stops a run whose model never writes an answer the rows' protocol reads: every reply
    then scores as wrong (and, under an overlong penalty, shorter is all it learns), so no
    group pairs and the run trains on nothing it should. The first such step is warned of,
    `limit` in a row stop the run."""

    limit: int = 10
    steps: int = 0  # steps in a row without one parsed first-turn reply

    def step(self, groups: Sequence[Group]) -> str | None:
        """Count one step's first-turn groups in: the warning of its first step without an
        answer (None otherwise); a TrainingError when `limit` such steps come in a row."""
        replies = sum(len(group.scored) for group in groups)
        if not replies or any(s.answer is not None for g in groups for s in g.scored):
            self.steps = 0
            return None
        self.steps += 1
        if self.steps >= self.limit:
            raise TrainingError(
                f"none of the first-turn replies of the last {self.steps} steps gave an answer "
                "the rows' answer protocol reads, so nothing was paired or learned; check that "
                "the rows' template asks for the format that protocol reads and that the model "
                "follows it (`mad-eval run` on the same model shows its replies)."
            )
        if self.steps > 1:
            return None
        return (
            f"no first-turn reply of this step ({replies} replies) gave an answer the rows' "
            f"answer protocol reads; the run stops after {self.limit} such steps in a row."
        )
