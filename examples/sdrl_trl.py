"""Self-debate RL (SDRL) on-policy with TRL: both turns trained at every step.

    mad-eval train prompts my_train_set.jsonl --answer-protocol dapo --prompt-template sdrl \\
        --out data/first_turn.parquet
    python examples/sdrl_trl.py --model Qwen/Qwen3-4B-Base \\
        --train-file data/first_turn.parquet --output-dir results/sdrl-trl

Needs trl 1.16 (and torch): pip install -e ".[train]". Each step samples --num-generations
first-turn replies per prompt, pairs them by --pairing (freq: one reply of the most common
answer and one of the second most common) and samples --num-generations debate-turn replies
per pair; see mad_eval.training.trl_grpo. --setting authors (the default) is the authors' own
(training.sdrl, checked against their code in conformance/sdrl): groups all right or all wrong
dropped by accuracy before any penalty, answers compared as DAPO's text with unparsed ones an
answer of their own, a step with no pair skipped, debate groups with equal rewards dropped;
--setting mad-eval pairs by correctness and equivalence instead (the differences: the how-to).
With --eval-file, each evaluation also samples and grades the debate turn (its accuracy and
confusion counts logged as eval_self_debate/val/*). The rows' template sets the prompts:
`sdrl` is the authors' three-message debate turn in our words (a template of yours based on
it can hold their sentences).

The defaults are the seed paper's, as its authors' released verl scripts set them for
Qwen3-4B-Base: 8 replies per group in both turns, 256 prompts per step, one debate context per
prompt of first-turn replies of at most 2,048 tokens, replies of up to 8,192 tokens with DAPO's
overlong penalty over the last 2,048, 16 optimiser updates per step (mini-batches of 16 prompts'
replies), learning rate 1e-6 with 10 warm-up steps then constant, weight decay 0.1, clip
0.2/0.28 with verl's dual clip at 10 for negative advantages, no KL term, temperature 1.0, 200
steps (docs/how-to/train-with-self-debate.md). A step is one generation batch, as in the paper:
--max-steps, --warmup-steps and --save-steps count those, and TRL's optimiser steps are that
many times the updates per step (mad_eval.training.schedule). They need GPUs; --cpu and small
values run it on a toy model. TRL 1.16 does not truncate prompts: a debate-turn prompt is the
question plus two replies (`train prompts` prints its base).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True, help="a local model folder or a Hub name")
    p.add_argument("--train-file", required=True, help="`mad-eval train prompts` rows")
    p.add_argument("--output-dir", required=True)
    p.add_argument("--setting", default="authors", choices=("authors", "mad-eval"),
                   help="whose filter and pairing (default authors)")  # fmt: skip
    p.add_argument("--pairing", default="freq", help="freq or rand (default freq)")
    p.add_argument("--per-prompt", type=int, default=1, help="debate contexts per prompt")
    p.add_argument("--max-length", type=int, default=2048,
                   help="first-turn replies longer than this many tokens are not paired "
                        "(0: below --max-completion-length, so a cut reply is not)")  # fmt: skip
    p.add_argument("--overlong-buffer", type=int, default=2048,
                   help="DAPO's overlong penalty buffer in tokens (0: no penalty)")  # fmt: skip
    p.add_argument("--overlong-factor", type=float, default=1.0)
    p.add_argument("--num-generations", type=int, default=8, help="replies per group, both turns")
    p.add_argument("--prompts-per-step", type=int, default=256, help="first-turn prompts per step")
    p.add_argument("--mini-batch-prompts", type=int, default=16,
                   help="prompts' replies per optimiser update (verl's ppo_mini_batch_size): "
                        "--prompts-per-step / this many updates per step")  # fmt: skip
    p.add_argument("--accumulation-steps", type=int, default=1,
                   help="split each update's replies into this many micro-batches")  # fmt: skip
    p.add_argument("--max-completion-length", type=int, default=8192)
    p.add_argument("--learning-rate", type=float, default=1e-6)
    p.add_argument("--lr-scheduler", default="constant_with_warmup",
                   help="a transformers scheduler (verl's: constant after warm-up)")  # fmt: skip
    p.add_argument("--warmup-steps", type=int, default=10)
    p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--epsilon", type=float, default=0.2)
    p.add_argument("--epsilon-high", type=float, default=0.28)
    p.add_argument("--clip-c", type=float, default=10.0,
                   help="verl's dual clip: a negative advantage's ratio counts at most this "
                        "(TRL's delta; 0: none)")  # fmt: skip
    p.add_argument("--beta", type=float, default=0.0, help="KL coefficient (0: no reference)")
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--epochs", type=float, default=1.0)
    p.add_argument("--max-steps", type=int, default=200, help="stop after this many steps")
    p.add_argument("--save-steps", type=int, default=0, help="0: save at the end only")
    p.add_argument("--eval-file", help="`mad-eval train prompts` rows to validate on")
    p.add_argument("--eval-steps", type=int, default=5, help="validate every this many steps")
    p.add_argument("--eval-generations", type=int, default=32,
                   help="validation replies per prompt, and per pair")  # fmt: skip
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--cpu", action="store_true", help="train on the CPU")
    return p


def main(argv: Sequence[str] | None = None) -> Any:
    """Train, save the model in --output-dir and return the trainer."""
    opts = parser().parse_args(argv)
    from mad_eval.training import Overlong
    from mad_eval.training.onpolicy import SelfDebate
    from mad_eval.training.trl_grpo import SelfDebateGRPOTrainer, read_rows

    args = grpo_config(opts)
    overlong = (
        Overlong(opts.max_completion_length, opts.overlong_buffer, opts.overlong_factor)
        if opts.overlong_buffer
        else None
    )
    max_length = opts.max_length or None  # None: the trainer's, up to the completion limit
    self_debate = SelfDebate(opts.pairing, opts.per_prompt, max_length, overlong, opts.seed,
                             authors=opts.setting == "authors")  # fmt: skip
    rows = read_rows(opts.train_file)
    checks = read_rows(opts.eval_file) if opts.eval_file else None
    trainer = SelfDebateGRPOTrainer(opts.model, args, rows, self_debate=self_debate,
                                    eval_dataset=checks)  # fmt: skip
    trainer.train()
    trainer.save_model(opts.output_dir)
    return trainer


def grpo_config(opts: argparse.Namespace) -> Any:
    """The GRPOConfig the options ask for; steps are the paper's (generation batches), each
    --prompts-per-step / --mini-batch-prompts optimiser updates (mad_eval.training.schedule)."""
    from trl import GRPOConfig

    from mad_eval.training import TrainingError
    from mad_eval.training.schedule import Optimisation, trl_settings

    if opts.num_generations < 2:
        raise TrainingError(
            f"--num-generations must be 2 or more (a group to pair within), got "
            f"{opts.num_generations}."
        )
    if opts.prompts_per_step < 1:
        raise TrainingError(f"--prompts-per-step must be at least 1, got {opts.prompts_per_step}.")
    optimisation = Optimisation(
        prompts_per_step=opts.prompts_per_step,
        generations=opts.num_generations,
        mini_batch_prompts=opts.mini_batch_prompts,
        learning_rate=opts.learning_rate,
        warmup_steps=opts.warmup_steps,
        weight_decay=opts.weight_decay,
        clip_low=opts.epsilon,
        clip_high=opts.epsilon_high,
        clip_c=opts.clip_c or None,
        steps=opts.max_steps,
    )
    settings = trl_settings(optimisation, opts.accumulation_steps)
    if not opts.cpu and not _trains_in_bf16():
        raise TrainingError(
            "this machine has no GPU that trains in bf16, which GRPO's settings use; pass --cpu "
            "to train on the CPU (a toy model's pace)."
        )
    updates = optimisation.updates_per_step
    return GRPOConfig(
        **{
            **settings,
            "lr_scheduler_type": opts.lr_scheduler,
            "beta": opts.beta,
            "save_strategy": "steps" if opts.save_steps else "no",
            "save_steps": (opts.save_steps or 500) * updates,
        },
        eval_strategy="steps" if opts.eval_file else "no",
        eval_steps=opts.eval_steps * updates,
        num_generations_eval=opts.eval_generations,
        per_device_eval_batch_size=opts.eval_generations,  # one validation prompt a batch
        output_dir=opts.output_dir,
        max_completion_length=opts.max_completion_length,
        temperature=opts.temperature,
        num_train_epochs=opts.epochs,
        logging_steps=1,
        report_to="none",
        seed=opts.seed,
        use_cpu=opts.cpu,
    )


def _trains_in_bf16() -> bool:
    """What transformers asks of a GPU run in bf16 (a TPU through XLA counts)."""
    from transformers.utils import is_torch_bf16_gpu_available, is_torch_xla_available

    return is_torch_bf16_gpu_available() or is_torch_xla_available()


if __name__ == "__main__":
    import sys

    from mad_eval.errors import UserError

    try:
        main()
    except UserError as error:  # a bad option or file: its one sentence, no traceback
        sys.exit(f"error: {error}")
