"""A recorded turn's verdict held to its answer and its question's gold, as the run graded
them: a record that calls an answer right that grading calls wrong (or the reverse), that
counts no answer as right, or whose answer class disagrees with its verdict, is of no
grading, and every reader refuses it as it refuses a record of no turn of the run.

Where grading decides from the answer and the gold alone, purely and cheaply (equal text, two
integers, a letter, an exact fraction, dapo's strings), the verdict is decided again, once for
each distinct answer and gold; where it takes math-verify (two different LaTeX answers)
or the whole reply (the math-verify protocol's own verdict), the recorded one stands: asking
math-verify again would cost a report milliseconds a comparison."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from mad_eval.grading.grader import decider
from mad_eval.grading.kinds import get_kind
from mad_eval.records import Turn, shown

_UNKNOWN: Final = object()
CACHED = 65536  # distinct (answer, gold) verdicts kept; records come a debate at a time


class Grades:
    """The golds of a run's questions and how its answers were graded (`kind`, answer
    `protocol`): what a recorded verdict must agree with."""

    def __init__(self, golds: Mapping[str, str], kind: str, protocol: str | None):
        self.golds = golds
        self.decide = decider(kind, protocol)  # a ValueError names an unknown kind or protocol
        self.voted = get_kind(kind).voted  # a summary is scored, never right or wrong
        self.verdicts: dict[tuple[str, str | None], bool | None] = {}  # by (answer, gold)

    def admits(self, turn: Turn) -> bool:
        """Whether `turn`'s verdict is as grading gives it: problem()'s test at a fraction of
        its cost, as every record of a report passes it."""
        if turn.error is not None or not self.voted:  # a failed turn is counted nowhere
            return True
        answer, right, group = turn.answer, turn.correct is True, turn.answer_class
        if group is not None and (answer is None or (group == 0) is not right):
            return False
        if self.decide is None:  # the math-verify protocol's verdict: it read the whole reply
            return True
        if answer is None or (right and turn.grade_timed_out):
            return not right
        gold = self.golds.get(turn.question)
        expected = self.verdicts.get((answer, gold), _UNKNOWN)
        if expected is _UNKNOWN:
            expected = self._decide(answer, gold)
        return expected is None or expected == right

    def problem(self, turn: Turn) -> str | None:
        """Why `turn`'s verdict is not as grading gives it, or None."""
        if self.admits(turn):
            return None
        answer, right, group = turn.answer, turn.correct is True, turn.answer_class
        said = "right" if right else "wrong"
        if group is not None and answer is None:
            return f"it gives a reply with no answer the answer class {group}"
        if group is not None and (group == 0) != right:
            return f"its answer class {group} says the opposite of its verdict ({said})"
        if answer is None:
            return "it counts a reply with no answer as right"
        if right and turn.grade_timed_out:
            return "it counts an answer math-verify could not decide as right"
        gold = self.golds[turn.question]
        return f"it counts the answer {shown(answer)} {said} against the gold {shown(gold)}"

    def _decide(self, answer: str, gold: str | None) -> bool | None:
        found = None if gold is None or self.decide is None else self.decide(answer, gold)
        if len(self.verdicts) >= CACHED:
            self.verdicts.clear()
        self.verdicts[(answer, gold)] = found
        return found
