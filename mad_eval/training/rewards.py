"""Verifiable rewards with the evaluation's grader: +1 for a right final answer, -1 otherwise
(a missing or unparsable answer is wrong), optionally less DAPO's overlong penalty.

`grade_group` grades one prompt's completions once each and returns, per completion, the
reward, the extracted answer, its correctness and whether math-verify ran out of time: an
on-policy trainer rewards with the first and pairs with the others (pairing reads
correctness, never the reward, so a penalty cannot turn a right answer into a wrong one).
`compute_score` (verl's custom reward function) and `grpo_reward` (TRL's) call it.

The row's `extra_info` says how to grade: `kind`, `answer_protocol` and a choice's `options`.
verl hands it over as it was written (lists); a row read back with pandas holds numpy arrays
instead, whose truth value is an error, so nothing here tests a value for truth."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from mad_eval.grading.grader import grade
from mad_eval.training.errors import TrainingError

# verl's vote key for a reply with no answer (its DAPO scorer's), so maj@K counts all
# unanswered replies as one wrong answer, as mad-eval's bootstrap maj@K does.
NO_ANSWER = "[INVALID]"


@dataclass(frozen=True)
class Overlong:
    """DAPO's overlong penalty, as verl's DAPO reward manager applies it: a reply longer than
    `max_length - buffer` loses `factor` times the share of the buffer it ran into, so a reply
    of exactly `max_length` loses `factor`. Lengths are in the trainer's unit (tokens)."""

    max_length: int
    buffer: int
    factor: float = 1.0

    def __post_init__(self) -> None:
        if not 1 <= self.buffer <= self.max_length:
            raise TrainingError(
                f"the overlong buffer must be from 1 to the max length ({self.max_length}), "
                f"got {self.buffer}."
            )
        if self.factor < 0:
            raise TrainingError(
                f"the overlong penalty factor must be 0 or more, got {self.factor}."
            )

    def penalty(self, length: int) -> float:
        """The (non-positive) amount added to the reward of a reply `length` long."""
        exceed = length - (self.max_length - self.buffer)
        return 0.0 if exceed <= 0 else -exceed / self.buffer * self.factor


class Scored(NamedTuple):
    """One graded completion: `reward` for the loss, the rest for pairing and logs."""

    reward: float  # +1 right, -1 wrong, plus the overlong penalty when one is set
    answer: str | None  # the extracted final answer; None when there is none
    correct: bool
    timed_out: bool  # math-verify could not decide: wrong, and compared by text when paired


def grading_info(extra_info: Mapping[str, Any] | None) -> tuple[str, list[str], str | None]:
    """(kind, options, answer protocol) from a row's extra_info; without it, math with the
    default protocol."""
    info = extra_info if extra_info is not None else {}
    kind, options, protocol = (info.get(k) for k in ("kind", "options", "answer_protocol"))
    return (
        "math" if kind is None else str(kind),
        [] if options is None else [str(o) for o in options],
        None if protocol is None else str(protocol),
    )


def _text(completion: Any) -> str:
    """A completion's text: text, or (conversational data) the last message's content."""
    return completion if isinstance(completion, str) else str(completion[-1]["content"])


def gold_answer(gold: Any, where: str) -> str:
    """`gold` as the text a reply is graded against; none, None or blank is refused: graded
    against the text "None", every reply would be trained as wrong."""
    if gold is None or not str(gold).strip():
        raise TrainingError(f"a reward needs the gold answer ({where}); got none.")
    return str(gold)


def grade_group(
    completions: Sequence[Any],
    gold: str,
    kind: str = "math",
    *,
    options: Sequence[str] = (),
    answer_protocol: str | None = None,
    lengths: Sequence[int] | None = None,
    overlong: Overlong | None = None,
) -> list[Scored]:
    """Grade one prompt's completions (text or message lists) against `gold`, each once.
    `overlong` lowers the reward of long ones by `lengths` (tokens), or by characters when
    no lengths are given; correctness never changes."""
    gold = gold_answer(gold, "gold")
    if lengths is not None and len(lengths) != len(completions):
        raise TrainingError(
            f"completions and lengths need one item per completion; got {len(completions)} "
            f"completions and {len(lengths)} lengths."
        )
    texts = [_text(c) for c in completions]
    sizes = [len(t) for t in texts] if lengths is None else [int(n) for n in lengths]
    scored = []
    for text, size in zip(texts, sizes, strict=True):
        graded = grade(text, gold, kind, options, answer=answer_protocol)
        right = bool(graded.correct)
        reward = (1.0 if right else -1.0) + (0.0 if overlong is None else overlong.penalty(size))
        scored.append(Scored(reward, graded.answer, right, graded.timed_out))
    return scored


def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: str,
    extra_info: Mapping[str, Any] | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """verl: `reward.custom_reward_function.path` = this file, `.name` = compute_score.
    Returns `score` (the reward), `acc` (1.0 right, 0.0 wrong) and `pred` (the answer verl's
    maj@K votes on), so verl's validation mean@K and maj@K read correctness. Keywords verl
    adds (`reward_router_address`, ...) are ignored; its DAPO reward manager adds the
    overlong penalty itself."""
    kind, options, protocol = grading_info(extra_info)
    gold = gold_answer(ground_truth, "reward_model.ground_truth")
    (scored,) = grade_group([solution_str], gold, kind, options=options, answer_protocol=protocol)
    return {
        "score": scored.reward,
        "acc": 1.0 if scored.correct else 0.0,
        "pred": NO_ANSWER if scored.answer is None else scored.answer,
    }


def _golds(ground_truth: Any, reward_model: Any, count: int) -> list[Any]:
    """Each completion's gold: the `ground_truth` column, else verl's `reward_model` one."""
    if ground_truth is not None:
        golds = list(ground_truth)
    elif reward_model is not None:
        golds = [None if r is None else r.get("ground_truth") for r in reward_model]
    else:
        raise TrainingError(
            "grpo_reward needs the dataset's `ground_truth` column or verl's `reward_model` "
            "column ({'ground_truth': ...}); neither was given."
        )
    if len(golds) != count:
        raise TrainingError(
            f"completions and golds need one item per completion; got {count} completions and "
            f"{len(golds)} golds."
        )
    return golds


def make_grpo_reward(overlong: Overlong | None = None) -> Callable[..., list[float]]:
    """A TRL reward function like `grpo_reward`, with DAPO's overlong penalty when given
    (lengths: TRL's `completion_ids`, else characters)."""
    score = make_grpo_scorer(overlong)

    def grpo_reward(
        completions: list[Any],
        ground_truth: Sequence[Any] | None = None,
        reward_model: Sequence[Mapping[str, Any]] | None = None,
        **kwargs: Any,
    ) -> list[float]:
        """TRL's GRPOTrainer(reward_funcs=[grpo_reward]): the gold comes from the dataset's
        `ground_truth` column or verl's `reward_model`; `extra_info` when the dataset has it.
        A completion is text, or (conversational data) a list of messages."""
        graded = score(completions, ground_truth, reward_model, **kwargs)
        return [scored.reward for scored in graded]

    return grpo_reward


def make_grpo_scorer(overlong: Overlong | None = None) -> Callable[..., list[Scored]]:
    """What `make_grpo_reward`'s function computes, each completion's whole Scored: a
    trainer that logs correctness reads it here, never from the penalised reward."""

    def score(
        completions: list[Any],
        ground_truth: Sequence[Any] | None = None,
        reward_model: Sequence[Mapping[str, Any]] | None = None,
        **kwargs: Any,
    ) -> list[Scored]:
        golds = _golds(ground_truth, reward_model, len(completions))
        infos = kwargs.get("extra_info")
        infos = [None] * len(completions) if infos is None else infos
        ids = kwargs.get("completion_ids")
        lengths = [None] * len(completions) if ids is None else [len(i) for i in ids]
        graded = []
        for completion, gold, info, size in zip(completions, golds, infos, lengths, strict=True):
            kind, options, protocol = grading_info(info)
            (scored,) = grade_group(
                [completion],
                gold_answer(gold, "ground_truth"),
                kind,
                options=options,
                answer_protocol=protocol,
                lengths=None if size is None else [size],
                overlong=overlong,
            )
            graded.append(scored)
        return graded

    return score


grpo_reward = make_grpo_reward()
