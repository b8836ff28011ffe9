"""The one error class of mad_eval.training: a trainer's call that cannot work (no gold, a group
of one, sequences of different lengths, a bad setting), said in one sentence before any step."""

from mad_eval.errors import UserError


class TrainingError(UserError, ValueError):
    """A reward, grading or pairing call given something it cannot use."""
