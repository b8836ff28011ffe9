"""The paper's optimiser mapped to TRL settings, with no trainer installed
(tests/test_train_schedule.py builds them into TRL's and verl's own configs)."""

from __future__ import annotations

import dataclasses

import pytest

from mad_eval.training import TrainingError
from mad_eval.training.schedule import PAPER, trl_settings, verl_overrides


def test_the_papers_step_is_16_updates_and_warm_up_and_steps_count_updates():
    settings = trl_settings(PAPER, accumulation=4)
    assert (settings["steps_per_generation"], settings["gradient_accumulation_steps"]) == (64, 4)
    assert settings["per_device_train_batch_size"] == 16 * 8 // 4
    assert (settings["warmup_steps"], settings["max_steps"]) == (160, 3200)
    assert "actor_rollout_ref.actor.ppo_mini_batch_size=16" in verl_overrides()
    assert "actor_rollout_ref.actor.clip_ratio_c=10.0" in verl_overrides()
    assert not any(
        "clip_ratio_c" in o for o in verl_overrides(dataclasses.replace(PAPER, clip_c=None))
    )


@pytest.mark.parametrize(
    ("change", "accumulation", "says"),
    [
        ({"mini_batch_prompts": 24}, 1, r"must divide --prompts-per-step \(256\)"),
        ({"mini_batch_prompts": 0}, 1, "--mini-batch-prompts must divide"),
        ({}, 3, "--accumulation-steps must divide an update's 128 first-turn replies"),
        ({"clip_c": 1.2}, 1, r"--clip-c must be above 1 \+ --epsilon-high \(1.28\)"),
    ],
)
def test_a_split_that_cannot_be_even_is_refused_in_one_sentence(change, accumulation, says):
    with pytest.raises(TrainingError, match=says):
        trl_settings(dataclasses.replace(PAPER, **change), accumulation)
