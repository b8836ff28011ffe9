"""Self-debate RL on-policy in TRL (1.16): a GRPOTrainer that trains both turns of SDRL.

    from trl import GRPOConfig
    from mad_eval.training.onpolicy import SelfDebate
    from mad_eval.training.trl_grpo import SelfDebateGRPOTrainer, read_rows

    trainer = SelfDebateGRPOTrainer(
        model="path/to/model",
        args=GRPOConfig(output_dir="out", num_generations=8, max_completion_length=1024),
        train_dataset=read_rows("first_turn.parquet"),  # from `mad-eval train prompts`
        self_debate=SelfDebate(rule="freq", per_prompt=1),
    )
    trainer.train()

Per generation step in training, GRPO samples `num_generations` first-turn replies per prompt;
`SelfDebate.step` grades each prompt's group once (that grade is the first turn's reward) and
pairs it by correctness; each pair's debate-turn prompt, built by the evaluation's builder, is
sampled as a group of its own (`num_generations` replies) and rewarded by the same grader; both
turns go to TRL's loss, each reply's advantage normalised within its own group. Evaluation
samples the first turn only. The trainer rewards by itself (no `reward_funcs`), runs in one
process and on text-only models. Imports trl and torch: nothing in mad_eval imports this module.

A step's batch is the first turn's rows plus num_generations rows per debate context, so it
varies with the pairs found; TRL's own metrics (reward, lengths) average the two turns, and
`self_debate/*` tell them apart (first_reward, debate_reward, pairs, prompts, dropped_*).
TRL splits it into `steps_per_generation` equal slices (optimiser updates, or their
accumulation micro-batches), so the debate rows widen those updates rather than adding any;
it is padded for that with fully masked rows, which count for nothing in the losses TRL
divides by the tokens counted (dapo, the default; bnpo, cispo, vespo) and slightly dilute
those it divides by the rows (grpo, sapo, luspo, dr_grpo).
"""

from __future__ import annotations

import dataclasses
import warnings
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from trl import GRPOTrainer

from mad_eval.training.errors import TrainingError
from mad_eval.training.onpolicy import Group, NoAnswers, SelfDebate
from mad_eval.training.rewards import make_grpo_reward
from mad_eval.training.rows import row_pair_prompt, row_question

# The columns of a `train prompts` row that a debate-turn row is built from (the last two
# are needed: the gold, and the question and template).
ROW_COLUMNS = ("data_source", "ability", "reward_model", "extra_info")
# GRPOTrainer arguments that would replace what this trainer does itself.
OWN_ARGUMENTS = ("reward_funcs", "rollout_func", "tools", "environment_factory")
# Per-row tensors of a generation batch, padded to a common width on the side TRL pads them,
# with the value TRL pads them with (None: the tokenizer's pad id).
LEFT_PADDED = {"prompt_ids": None, "prompt_mask": 0}
RIGHT_PADDED = {
    "completion_ids": None,
    "completion_mask": 0,
    "old_per_token_logps": 0.0,
    "ref_per_token_logps": 0.0,
    "sampling_per_token_logps": 0.0,
    "importance_sampling_ratio": 1.0,
    "tool_mask": 1,
}
PER_ROW = {"advantages"}
DROPPED = ("all-right", "all-wrong", "one-answer", "too-long")


def read_rows(path: str | Path) -> Any:
    """`mad-eval train prompts` rows (Parquet or JSON Lines) as a datasets.Dataset."""
    from datasets import Dataset

    path = Path(path)
    if path.suffix not in (".parquet", ".jsonl"):
        raise TrainingError(f"--train-file must end in .parquet or .jsonl, got '{path.name}'.")
    if not path.is_file():
        raise TrainingError(f"--train-file '{path}' does not exist.")
    rows = (
        Dataset.from_parquet(str(path))
        if path.suffix == ".parquet"
        else Dataset.from_json(str(path))
    )
    if len(rows) == 0:
        raise TrainingError(f"--train-file '{path}' holds no rows.")
    return rows


def check_rows(rows: Any) -> None:
    """Refuse, before any step, rows that cannot rebuild their question or whose template
    cannot build a debate-turn prompt (checked once per template and protocol)."""
    if rows is None or not hasattr(rows, "__len__"):
        return  # an iterable dataset is checked row by row as it is read
    built: set[tuple[str, ...]] = set()
    for row in rows:
        missing = [c for c in ("prompt", "reward_model", "extra_info") if c not in row]
        if missing:
            raise TrainingError(
                f"a self-debate training row needs the columns `mad-eval train prompts` writes; "
                f"it lacks {', '.join(missing)}."
            )
        question = row_question(row)
        info = row["extra_info"]
        key = (str(info["template"]), str(info.get("template_sha256")), question.kind,
               question.answer or "")  # fmt: skip
        if key not in built:
            row_pair_prompt(row, "", "")
            built.add(key)


def check_args(args: Any) -> None:
    """The GRPO settings self-debate cannot run with, each refused in one sentence."""
    if args.num_generations < 2:
        raise TrainingError(
            f"self-debate needs num_generations of 2 or more (a group to pair within), got "
            f"{args.num_generations}."
        )
    if args.remove_unused_columns:
        raise TrainingError(
            "self-debate grades and pairs by the rows' reward_model and extra_info columns; set "
            "remove_unused_columns=False (GRPOConfig's default) to keep them."
        )
    if args.world_size > 1:
        raise TrainingError(
            f"SelfDebateGRPOTrainer runs in one process (each process would pair and sample a "
            f"different number of debate contexts); got a world size of {args.world_size}."
        )


class SelfDebateGRPOTrainer(GRPOTrainer):
    """GRPO over both SDRL turns: each generation step samples and grades the first turn,
    pairs it (`self_debate`), samples the debate turn per pair, and trains on both."""

    def __init__(
        self,
        model: Any,
        args: Any = None,
        train_dataset: Any = None,
        *,
        self_debate: SelfDebate | None = None,
        **grpo_kwargs: Any,
    ) -> None:
        given = [k for k in OWN_ARGUMENTS if grpo_kwargs.get(k) is not None]
        if given:
            raise TrainingError(
                f"SelfDebateGRPOTrainer samples and rewards both turns itself with mad-eval's "
                f"grader; do not pass {', '.join(given)}."
            )
        if args is not None:
            check_args(args)
        check_rows(train_dataset)
        self._turn: str | None = None  # "first" or "debate" while a training batch is sampled
        self._groups: list[Group] = []
        self._debate_rewards: list[float] = []
        super().__init__(model, reward_funcs=[self.sdrl_reward], args=args,
                         train_dataset=train_dataset, **grpo_kwargs)  # fmt: skip
        check_args(self.args)
        debate = self_debate if self_debate is not None else SelfDebate()
        if debate.max_length is None:  # a reply that reached the limit may be cut: not paired
            debate = dataclasses.replace(debate, max_length=self.max_completion_length - 1)
        self.self_debate = debate
        self._rng = debate.rng()
        self._watch = debate.watch()
        self._grade = make_grpo_reward(debate.overlong)

    def sdrl_reward(
        self,
        prompts: list[Any],
        completions: list[Any],
        completion_ids: list[list[int]],
        **columns: Any,
    ) -> list[float]:
        """The reward TRL calls. First turn: each prompt's group (num_generations
        consecutive completions) graded once and paired; else each completion graded."""
        if self._turn != "first":
            rewards = self._grade(completions, completion_ids=completion_ids, **columns)
            if self._turn == "debate":
                self._debate_rewards = list(rewards)
            return rewards
        size = self.num_generations
        texts = [c if isinstance(c, str) else str(c[-1]["content"]) for c in completions]
        self._groups = []
        for start in range(0, len(texts), size):
            if any(p != prompts[start] for p in prompts[start : start + size]):
                raise RuntimeError("a first-turn group of completions spans several prompts")
            row = {"prompt": prompts[start]}
            row.update({c: columns[c][start] for c in ROW_COLUMNS if c in columns})
            group = self.self_debate.step(
                row,
                texts[start : start + size],
                [len(ids) for ids in completion_ids[start : start + size]],
                self._rng,
            )
            self._groups.append(group)
        return [reward for group in self._groups for reward in group.rewards]

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        if not self.model.training:  # evaluation: the first turn only, graded as usual
            return super()._generate_and_score_completions(inputs)
        try:
            self._turn, self._groups = "first", []
            first = super()._generate_and_score_completions(inputs)
            debates = [row for group in self._groups for row in group.debates]
            self._log_first_turn(self._groups)
            warning = self._watch.step(self._groups)
            if warning:
                warnings.warn(warning, NoAnswers, stacklevel=2)
            if not debates:
                return first
            self._turn = "debate"
            repeated = [dict(row) for row in debates for _ in range(self.num_generations)]
            second = super()._generate_and_score_completions(repeated)
            self._log_metric_now("self_debate/debate_reward", _mean(self._debate_rewards))
        finally:
            self._turn = None
        pad_id = self._tokenizer.pad_token_id
        return join_turns(first, second, pad_id, self.args.steps_per_generation)

    def _log_first_turn(self, groups: Sequence[Group]) -> None:
        dropped = Counter(group.pairs.dropped for group in groups)
        self._log_metric_now("self_debate/prompts", len(groups))
        scored = [s for group in groups for s in group.scored]
        unparsed = sum(s.answer is None for s in scored) / len(scored) if scored else 0.0
        self._log_metric_now("self_debate/unparsed", unparsed)
        self._log_metric_now("self_debate/pairs", sum(len(group.debates) for group in groups))
        for reason in DROPPED:
            self._log_metric_now(f"self_debate/dropped_{reason}", dropped[reason])
        self._log_metric_now(
            "self_debate/first_reward", _mean([r for group in groups for r in group.rewards])
        )

    def _log_metric_now(self, name: str, value: float) -> None:
        self._metrics["train"][name].append(float(value))


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def join_turns(
    first: Mapping[str, Any], second: Mapping[str, Any], pad_id: int, multiple: int = 1
) -> dict[str, Any]:
    """One generation batch from the two turns' (as GRPOTrainer scores them): rows of the
    first, then the second, each tensor padded to a common width; token counts summed. Rows
    are then padded, fully masked, to a multiple of `multiple` (TRL splits the batch into that
    many equal slices and would drop a remainder)."""
    if set(first) != set(second):
        differ = sorted(set(first) ^ set(second))
        raise RuntimeError(f"the two turns' batches differ in keys: {differ}")
    joined: dict[str, Any] = {}
    for key, a in first.items():
        b = second[key]
        if key == "num_items_in_batch":
            joined[key] = a + b
        elif key in PER_ROW:
            joined[key] = torch.cat([a, b])
        elif key in LEFT_PADDED or key in RIGHT_PADDED:
            left = key in LEFT_PADDED
            value = (LEFT_PADDED if left else RIGHT_PADDED)[key]
            value = pad_id if value is None else value
            width = max(a.size(1), b.size(1))
            joined[key] = torch.cat([_widen(a, width, value, left), _widen(b, width, value, left)])
        else:
            raise TrainingError(
                f"SelfDebateGRPOTrainer trains text-only models without tools; this batch holds "
                f"`{key}`, which it cannot join across the two turns."
            )
    return _pad_rows(joined, multiple)


def _widen(t: torch.Tensor, width: int, value: float, left: bool) -> torch.Tensor:
    extra = width - t.size(1)
    return t if extra == 0 else F.pad(t, (extra, 0) if left else (0, extra), value=value)


def _pad_rows(batch: dict[str, Any], multiple: int) -> dict[str, Any]:
    """Copies of the last row, with no completion token counted and no advantage, so the
    batch splits evenly; they add nothing to a token-summed loss (TRL's dapo, the default)."""
    rows = batch["advantages"].size(0)
    extra = -rows % multiple
    if extra == 0:
        return batch
    for key, t in batch.items():
        if key == "num_items_in_batch":
            continue
        copies = t[-1:].repeat(extra, *([1] * (t.dim() - 1)))
        if key in ("completion_mask", "advantages"):
            copies = torch.zeros_like(copies)
        batch[key] = torch.cat([t, copies])
    return batch
