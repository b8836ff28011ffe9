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
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from trl import GRPOTrainer

from mad_eval.training.errors import TrainingError
from mad_eval.training.onpolicy import Group, NoAnswers, SelfDebate
from mad_eval.training.rewards import Scored, make_grpo_scorer
from mad_eval.training.rows import check_rows
from mad_eval.training.sdrl import keeps_debate_turn

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
        if train_dataset is not None and hasattr(train_dataset, "__len__"):
            # An iterable dataset is checked row by row as it is read.
            check_rows((f"train_dataset row {i}", row) for i, row in enumerate(train_dataset))
        self._turn: str | None = None  # "first" or "debate" while a training batch is sampled
        self._groups: list[Group] = []
        self._debate: list[Scored] = []  # the last debate turn's grades
        self._skipping = False  # this generation's updates are not made (no pair, authors)
        super().__init__(model, reward_funcs=[self.sdrl_reward], args=args,
                         train_dataset=train_dataset, **grpo_kwargs)  # fmt: skip
        check_args(self.args)
        debate = self_debate if self_debate is not None else SelfDebate()
        if debate.max_length is None:  # a reply that reached the limit may be cut: not paired
            debate = dataclasses.replace(debate, max_length=self.max_completion_length - 1)
        self.self_debate = debate
        self._rng = debate.rng()
        self._watch = debate.watch()
        self._grade = make_grpo_scorer(debate.overlong)

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
            scored = self._grade(completions, completion_ids=completion_ids, **columns)
            if self._turn == "debate":
                self._debate = scored
            return [s.reward for s in scored]
        size = self._group_size()
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
                validate=not self.model.training,
            )
            self._groups.append(group)
        return [reward for group in self._groups for reward in group.rewards]

    def _group_size(self) -> int:
        return self.num_generations if self.model.training else self.num_generations_eval

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        training, authors = self.model.training, self.self_debate.authors
        if not training and not authors:  # evaluation: the first turn only, graded as usual
            return super()._generate_and_score_completions(inputs)
        size = self._group_size()
        try:
            self._turn, self._groups = "first", []
            first = super()._generate_and_score_completions(inputs)
            groups = self._groups
            debates = [row for group in groups for row in group.debates]
            if training:
                self._log_first_turn(groups)
                warning = self._watch.step(groups)
                if warning:
                    warnings.warn(warning, NoAnswers, stacklevel=2)
            if authors and training:
                # their filter on accuracy; and a step with no pair is skipped, as they skip it
                self._skipping = not debates
                self._log_metric_now("self_debate/skipped", float(self._skipping))
                kept = [g.trained and not self._skipping for g in groups for _ in range(size)]
                first = keep_rows(first, kept)
            if not debates:
                return first
            self._turn = "debate"
            repeated = [dict(row) for row in debates for _ in range(size)]
            second = super()._generate_and_score_completions(repeated)
        finally:
            self._turn = None
        self._log_debate_turn(debates, self._debate, size)
        if not training:
            return first  # the debate turn was sampled for its metrics only
        if authors:  # a debate group whose rewards are all equal teaches nothing: dropped
            rewards = [s.reward for s in self._debate]
            kept = [keeps_debate_turn(rewards[i : i + size]) for i in range(0, len(rewards), size)]
            self._log_metric_now("self_debate/debate_groups_kept", sum(kept))
            second = keep_rows(second, [k for k in kept for _ in range(size)])
        pad_id = self._tokenizer.pad_token_id
        return join_turns(first, second, pad_id, self.args.steps_per_generation)

    def _log_debate_turn(self, debates: Sequence[Mapping[str, Any]], scored: Sequence[Scored],
                         size: int) -> None:  # fmt: skip
        """The debate turn's reward and accuracy, and what it did to each pair's answers: the
        share of its replies in each of the authors' confusion cells (own, partner and final
        correctness; they log counts, but TRL averages what is logged over the batches)."""
        final = [s.correct for s in scored]
        own = [row["extra_info"]["correct"][0] for row in debates for _ in range(size)]
        partner = [row["extra_info"]["correct"][1] for row in debates for _ in range(size)]
        prefix = "self_debate" if self.model.training else "self_debate/val"
        self._log_metric_now(f"{prefix}/debate_reward", _mean([s.reward for s in scored]))
        self._log_metric_now(f"{prefix}/debate_accuracy", _mean([float(c) for c in final]))
        self._log_metric_now(f"{prefix}/debate_initial_accuracy", _mean([float(c) for c in own]))
        for name, count in debate_confusion(own, partner, final).items():
            self._log_metric_now(f"{prefix}/debate_confusion/{name}", count / len(final))

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
        self._metrics["train" if self.model.training else "eval"][name].append(float(value))

    def create_optimizer(self, model: Any = None) -> Any:
        """TRL's optimizer, whose update a skipped step (`_skipping`) does not make."""
        optimizer = super().create_optimizer(model)
        optimizer.step = _unless(lambda: self._skipping, optimizer.step)
        return optimizer

    def create_scheduler(self, num_training_steps: int, optimizer: Any = None) -> Any:
        """TRL's learning-rate schedule, which a skipped step does not advance."""
        scheduler = super().create_scheduler(num_training_steps, optimizer)
        scheduler.step = _unless(lambda: self._skipping, scheduler.step)
        return scheduler


def _unless(skipping: Callable[[], bool], call: Callable[..., Any]) -> Callable[..., Any]:
    def guarded(*args: Any, **kwargs: Any) -> Any:
        return None if skipping() else call(*args, **kwargs)

    return guarded


def keep_rows(batch: dict[str, Any], kept: Sequence[bool]) -> dict[str, Any]:
    """`batch` (as GRPOTrainer scores it) with the rows not `kept` fully masked: no token of
    theirs counted in the loss or its normaliser, no advantage; the shape stays, so TRL
    still splits the batch evenly."""
    if all(kept):
        return batch
    keep = torch.tensor(kept, dtype=torch.bool, device=batch["advantages"].device)
    out = dict(batch)
    out["completion_mask"] = batch["completion_mask"] * keep.unsqueeze(1)
    out["advantages"] = batch["advantages"] * keep
    mask = out["completion_mask"]
    if "tool_mask" in batch:
        mask = mask * batch["tool_mask"]
    out["num_items_in_batch"] = mask.sum().to(batch["num_items_in_batch"].dtype)
    return out


def debate_confusion(own: Sequence[bool], partner: Sequence[bool], final: Sequence[bool]
                     ) -> dict[str, int]:  # fmt: skip
    """Debate replies counted by the correctness of the own answer, the partner's and the
    final one, named as the authors' trainer logs them (first_1_partner_0_final_1, ...)."""
    counts = Counter(zip(own, partner, final, strict=True))
    return {
        f"first_{int(a)}_partner_{int(b)}_final_{int(c)}": counts[(a, b, c)]
        for a, b in ((True, False), (False, True), (False, False), (True, True))
        for c in (True, False)
    }


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
