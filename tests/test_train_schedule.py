"""The seed authors' optimiser settings reach both trainers: the TRL example's GRPOConfig, built
with its defaults, and verl 0.9.1's own config composed with mad-eval's overrides give 16 updates
per step and verl's learning-rate curve (read from built schedulers, not from the settings)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

pytestmark = pytest.mark.train

torch = pytest.importorskip("torch")
pytest.importorskip("trl")
pytest.importorskip("verl")

from hydra import compose, initialize_config_module  # noqa: E402
from transformers import get_scheduler  # noqa: E402
from verl.utils.torch_functional import get_constant_schedule_with_warmup  # noqa: E402

from mad_eval.training.schedule import verl_overrides  # noqa: E402
from mad_eval.training.verl_config import MANAGER, check_config  # noqa: E402

PAPER_STEPS = (0, 5, 10, 100, 199)
RECIPE = [
    f"+actor_rollout_ref.rollout.agent.agent_loop_manager_class={MANAGER}",
    "reward.custom_reward_function.path=pkg://mad_eval.training.rewards",
    "reward.custom_reward_function.name=compute_score",
    "algorithm.adv_estimator=grpo",
    "data.max_prompt_length=5120",
    "data.max_response_length=8192",
    "+self_debate.max_length=2048",
]


def example_config(tmp_path, *argv: str):
    path = Path(__file__).resolve().parents[1] / "examples" / "sdrl_trl.py"
    spec = importlib.util.spec_from_file_location("sdrl_trl", path)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    opts = example.parser().parse_args(
        ["--model", "m", "--train-file", "t.parquet", "--output-dir", str(tmp_path), "--cpu", *argv]
    )
    return example.grpo_config(opts)


def verl_config():
    with initialize_config_module(config_module="verl.trainer.config", version_base=None):
        return compose("ppo_trainer", overrides=[*RECIPE, *verl_overrides()])


def learning_rates(scheduler, steps: int) -> list[float]:
    """The learning rate each of the first `steps` scheduler steps trains with."""
    rates = []
    for _ in range(steps):
        rates.append(scheduler.get_last_lr()[0])
        scheduler.optimizer.step()
        scheduler.step()
    return rates


def optimiser(lr: float):
    return torch.optim.AdamW([torch.nn.Parameter(torch.zeros(1))], lr=lr)


def test_the_trl_example_takes_16_updates_per_step_at_verls_learning_rate(tmp_path):
    args = example_config(tmp_path)
    updates = args.steps_per_generation // args.gradient_accumulation_steps
    assert updates == 256 // 16 == 16
    assert args.generation_batch_size == 256 * 8  # one generation batch: the first turn's step
    assert args.per_device_train_batch_size * args.gradient_accumulation_steps == 16 * 8
    assert (args.num_iterations, args.max_steps) == (1, 200 * 16)

    trl = learning_rates(
        get_scheduler(args.lr_scheduler_type, optimiser(args.learning_rate),
                      num_warmup_steps=args.warmup_steps, num_training_steps=args.max_steps),
        args.max_steps,
    )  # fmt: skip
    cfg = verl_config().actor_rollout_ref.actor.optim
    verl = learning_rates(
        get_constant_schedule_with_warmup(optimiser(cfg.lr), cfg.lr_warmup_steps),
        200,
    )
    # verl steps its scheduler once per step, TRL once per update: update 16 s opens step s.
    assert [trl[16 * s] for s in PAPER_STEPS] == [verl[s] for s in PAPER_STEPS]
    assert [verl[s] for s in PAPER_STEPS] == pytest.approx([0, 5e-7, 1e-6, 1e-6, 1e-6])
    assert set(trl[16 * 10 :]) == {1e-6}  # constant after warm-up, to the last update
    assert len(trl) == 16 * len(verl)

    assert (args.epsilon, args.epsilon_high, args.delta) == (0.2, 0.28, 10.0)
    assert (args.beta, args.loss_type, args.weight_decay) == (0.0, "dapo", 0.1)


def test_mad_eval_s_verl_overrides_are_the_authors_settings_and_pass_the_check():
    cfg = verl_config()
    actor = cfg.actor_rollout_ref.actor
    assert check_config(cfg) is not None
    assert (cfg.data.train_batch_size, cfg.actor_rollout_ref.rollout.n) == (256, 8)
    assert (actor.ppo_mini_batch_size, actor.ppo_epochs) == (16, 1)
    assert cfg.data.train_batch_size // actor.ppo_mini_batch_size == 16  # first-turn updates
    assert (actor.clip_ratio_low, actor.clip_ratio_high, actor.clip_ratio_c) == (0.2, 0.28, 10.0)
    assert (actor.optim.lr, actor.optim.lr_warmup_steps) == (1e-6, 10)
    assert (actor.optim.lr_scheduler_type, actor.optim.weight_decay) == ("constant", 0.1)
    assert (actor.loss_agg_mode, actor.use_kl_loss, actor.use_dynamic_bsz) == (
        "token-mean", False, True
    )  # fmt: skip
    assert cfg.algorithm.use_kl_in_reward is False
    assert cfg.trainer.total_training_steps == 200


def test_a_smaller_step_or_mini_batch_scales_updates_and_warm_up_alike(tmp_path):
    args = example_config(
        tmp_path, "--prompts-per-step", "64", "--mini-batch-prompts", "8",
        "--accumulation-steps", "4", "--max-steps", "3", "--clip-c", "0",
    )  # fmt: skip
    assert args.steps_per_generation // args.gradient_accumulation_steps == 8
    assert (args.per_device_train_batch_size, args.gradient_accumulation_steps) == (16, 4)
    assert (args.warmup_steps, args.max_steps, args.delta) == (80, 24, None)
    whole = example_config(tmp_path, "--prompts-per-step", "2")  # a mini-batch past the step
    assert (whole.steps_per_generation, whole.warmup_steps) == (1, 10)
