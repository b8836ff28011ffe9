"""Self-debate RL (SDRL) data and rewards from the evaluation's own prompt builders and grader:
rollouts in, debate pairs and first-turn prompts out as verl data, plus the on-policy step a
trainer calls per prompt (SelfDebate) and reward functions for verl and TRL. Imports neither:
the trainers' hooks live in training.trl_grpo and training.verl_loop, imported by their users."""

from mad_eval.training.errors import TrainingError
from mad_eval.training.export import pair_rows, prompt_rows, write_rows
from mad_eval.training.onpolicy import Group, SelfDebate, debate_row
from mad_eval.training.pairs import (
    PAIRINGS,
    Pair,
    Pairs,
    Summary,
    build_pairs,
    debate_pairs,
    pairing_rule,
)
from mad_eval.training.rewards import (
    NO_ANSWER,
    Overlong,
    Scored,
    compute_score,
    grade_group,
    grading_info,
    grpo_reward,
    make_grpo_reward,
)
from mad_eval.training.rollouts import Rollout, Rollouts, answer_protocol, read_rollouts
from mad_eval.training.rows import Lengths, Rows, row_pair_prompt, row_question, row_template

__all__ = [
    "NO_ANSWER",
    "PAIRINGS",
    "Group",
    "Lengths",
    "Overlong",
    "Pair",
    "Pairs",
    "Rollout",
    "Rollouts",
    "Rows",
    "Scored",
    "SelfDebate",
    "Summary",
    "TrainingError",
    "answer_protocol",
    "build_pairs",
    "compute_score",
    "debate_pairs",
    "debate_row",
    "grade_group",
    "grading_info",
    "grpo_reward",
    "make_grpo_reward",
    "pair_rows",
    "pairing_rule",
    "prompt_rows",
    "read_rollouts",
    "row_pair_prompt",
    "row_question",
    "row_template",
    "write_rows",
]
