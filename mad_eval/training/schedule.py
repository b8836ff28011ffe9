"""The seed authors' optimiser settings (their verl script for Qwen3-4B-Base) and the TRL
settings that give the same optimiser updates per step and learning-rate curve.

verl splits a step's batch into mini-batches of `ppo_mini_batch_size` prompts' replies, one
optimiser update each, and steps its learning-rate scheduler once per step. TRL splits a
generation batch into `steps_per_generation` slices and steps its scheduler once per update.
So TRL needs steps_per_generation = prompts / mini-batch prompts, and its warm-up and step
counts multiplied by that many updates. Imports neither trainer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mad_eval.training.errors import TrainingError


@dataclass(frozen=True)
class Optimisation:
    """One run's optimiser settings in the paper's units: a step is one generation batch."""

    prompts_per_step: int = 256
    generations: int = 8
    mini_batch_prompts: int = 16
    learning_rate: float = 1e-6
    warmup_steps: int = 10
    weight_decay: float = 0.1
    clip_low: float = 0.2
    clip_high: float = 0.28
    clip_c: float | None = 10.0  # verl's dual clip; None: no bound for negative advantages
    steps: int = 200

    @property
    def updates_per_step(self) -> int:
        """Optimiser updates per step for the first turn's replies (a mini-batch larger than
        the step is the whole step, as verl's split gives one chunk)."""
        return self.prompts_per_step // min(self.mini_batch_prompts, self.prompts_per_step)


PAPER = Optimisation()


def trl_settings(opt: Optimisation, accumulation: int = 1) -> dict[str, Any]:
    """GRPOConfig keywords for `opt`; `accumulation` splits each update into micro-batches."""
    mini = min(opt.mini_batch_prompts, opt.prompts_per_step)
    if mini < 1 or opt.prompts_per_step % mini:
        raise TrainingError(
            f"--mini-batch-prompts must divide --prompts-per-step ({opt.prompts_per_step}) so "
            f"every update gets an equal share, got {opt.mini_batch_prompts}."
        )
    rows = mini * opt.generations
    if accumulation < 1 or rows % accumulation:
        raise TrainingError(
            f"--accumulation-steps must divide an update's {rows} first-turn replies "
            f"(--mini-batch-prompts x --num-generations), got {accumulation}."
        )
    if opt.clip_c is not None and opt.clip_c <= 1 + opt.clip_high:
        raise TrainingError(
            f"--clip-c must be above 1 + --epsilon-high ({1 + opt.clip_high}) to bound only "
            f"what the clip leaves unbounded, got {opt.clip_c}."
        )
    updates = opt.prompts_per_step // mini
    return {
        "num_generations": opt.generations,
        "per_device_train_batch_size": rows // accumulation,
        "gradient_accumulation_steps": accumulation,
        "steps_per_generation": updates * accumulation,
        "learning_rate": opt.learning_rate,
        "lr_scheduler_type": "constant_with_warmup",
        "warmup_steps": opt.warmup_steps * updates,
        "weight_decay": opt.weight_decay,
        "epsilon": opt.clip_low,
        "epsilon_high": opt.clip_high,
        # TRL's `delta` caps the ratio at delta before the clipped minimum; above 1 + epsilon_high
        # it changes only negative advantages' loss, to verl's dual clip at clip_ratio_c.
        "delta": opt.clip_c,
        "loss_type": "dapo",  # token-mean, as verl's loss_agg_mode
        "beta": 0.0,
        "max_steps": opt.steps * updates,
    }


def verl_overrides(opt: Optimisation = PAPER) -> list[str]:
    """The same settings as verl 0.9.1 hydra overrides (verl's defaults differ: mini-batch
    256, clip_ratio_c 3.0, weight decay 0.01, no warm-up)."""
    actor = "actor_rollout_ref.actor"
    settings = [
        f"data.train_batch_size={opt.prompts_per_step}",
        f"actor_rollout_ref.rollout.n={opt.generations}",
        f"{actor}.ppo_mini_batch_size={opt.mini_batch_prompts}",
        f"{actor}.ppo_epochs=1",
        f"{actor}.optim.lr={opt.learning_rate}",
        f"{actor}.optim.lr_warmup_steps={opt.warmup_steps}",
        f"{actor}.optim.lr_scheduler_type=constant",
        f"{actor}.optim.weight_decay={opt.weight_decay}",
        f"{actor}.clip_ratio_low={opt.clip_low}",
        f"{actor}.clip_ratio_high={opt.clip_high}",
        f"{actor}.loss_agg_mode=token-mean",
        f"{actor}.use_kl_loss=false",
        "algorithm.use_kl_in_reward=false",
        f"{actor}.use_dynamic_bsz=true",
        f"trainer.total_training_steps={opt.steps}",
    ]
    if opt.clip_c is not None:
        settings.append(f"{actor}.clip_ratio_c={opt.clip_c}")
    return settings
