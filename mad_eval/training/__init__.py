"""Self-debate RL (SDRL) data and rewards from the evaluation's own prompt builders and grader:
rollouts in, debate pairs and first-turn prompts out as verl data, plus reward functions for
verl and TRL. Imports neither."""

from mad_eval.training.export import pair_rows, prompt_rows, write_rows
from mad_eval.training.pairs import PAIRINGS, Pair, Summary, build_pairs, pairing_rule
from mad_eval.training.rewards import compute_score, grpo_reward
from mad_eval.training.rollouts import Rollout, Rollouts, read_rollouts

__all__ = [
    "PAIRINGS",
    "Pair",
    "Rollout",
    "Rollouts",
    "Summary",
    "build_pairs",
    "compute_score",
    "grpo_reward",
    "pair_rows",
    "pairing_rule",
    "prompt_rows",
    "read_rollouts",
    "write_rows",
]
