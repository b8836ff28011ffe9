"""Verifiable rewards with the evaluation's grader: +1 for a right final answer, -1 otherwise
(a missing or unparsable answer is wrong). Two signatures: verl's custom reward function and
TRL's GRPO reward function.

The row's `extra_info` says how to grade: `kind`, `answer_protocol` and a choice's `options`.
verl hands it over as it was written (lists); a row read back with pandas holds numpy arrays
instead, whose truth value is an error, so nothing here tests a value for truth."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mad_eval.grading.grader import grade


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


def compute_score(
    data_source: str, solution_str: str, ground_truth: str, extra_info: dict | None = None
) -> float:
    """verl: `custom_reward_function.path` = this file, `.name` = compute_score. The row's
    `extra_info` names the benchmark kind, the answer protocol and a choice's options."""
    kind, options, protocol = grading_info(extra_info)
    graded = grade(solution_str, str(ground_truth), kind, options, answer=protocol)
    return 1.0 if graded.correct else -1.0


def grpo_reward(completions: list[Any], ground_truth: list[str], **kwargs: Any) -> list[float]:
    """TRL's GRPOTrainer(reward_funcs=[grpo_reward]); the dataset's `ground_truth` column
    arrives as a keyword, and so does `extra_info` when the dataset has it. A completion is
    text, or (conversational data) a list of messages whose last one is the model's."""
    texts = [c if isinstance(c, str) else c[-1]["content"] for c in completions]
    infos = kwargs.get("extra_info")
    infos = [None] * len(texts) if infos is None else infos
    return [
        compute_score("", text, gold, info)
        for text, gold, info in zip(texts, ground_truth, infos, strict=True)
    ]
