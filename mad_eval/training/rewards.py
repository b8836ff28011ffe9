"""Verifiable rewards with the evaluation's grader: +1 for a right final answer, -1 otherwise
(a missing or unparsable answer is wrong). Two signatures: verl's custom reward function and
TRL's GRPO reward function."""

from __future__ import annotations

from typing import Any

from mad_eval.grading import grade


def compute_score(
    data_source: str, solution_str: str, ground_truth: str, extra_info: dict | None = None
) -> float:
    """verl: `custom_reward_function.path` = this file, `.name` = compute_score. The row's
    `extra_info` names the benchmark kind (and a choice's options); without it, math."""
    info = extra_info or {}
    kind, options = info.get("kind", "math"), info.get("options") or ()
    return 1.0 if grade(solution_str, str(ground_truth), kind, list(options)).correct else -1.0


def grpo_reward(completions: list[Any], ground_truth: list[str], **kwargs: Any) -> list[float]:
    """TRL's GRPOTrainer(reward_funcs=[grpo_reward]); the dataset's `ground_truth` column
    arrives as a keyword, and so does `extra_info` when the dataset has it. A completion is
    text, or (conversational data) a list of messages whose last one is the model's."""
    texts = [c if isinstance(c, str) else c[-1]["content"] for c in completions]
    infos = kwargs.get("extra_info") or [None] * len(texts)
    return [
        compute_score("", text, gold, info)
        for text, gold, info in zip(texts, ground_truth, infos, strict=True)
    ]
