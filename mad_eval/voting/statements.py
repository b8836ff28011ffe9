"""What a reply states besides its answer, where a decision or a stop rule needs it: a
confidence (ReConcile's weighted vote), the answers it approves of (approval voting), points
spread over answers (cumulative voting), a ranking (Borda), or a judge's verdict on whether the
debate ends. A rule names what it needs; the prompt asks for it in one sentence after the
answer format, and the rule reads it back from the reply's last lines. A statement that
cannot be read counts as the rule's documented fallback, never as an error.

Replies are hostile text: only the last TAIL characters are read, with patterns that cannot
backtrack without bound, and every value is checked (a confidence in [0, 1], at most MAX
answers and at most RANKS ranked, whole points that sum to exactly POINTS)."""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from typing import Any

from mad_eval.registry import Registry

TAIL = 2000  # characters of a reply's end that a statement is read from
MAX = 20  # answers an approval or a points statement may name
RANKS = 5  # answers a ranking may name (MALLM's ranked voting)
POINTS = 10  # what a cumulative vote spreads, exactly


class Statement(ABC):
    """One thing a reply may be asked to state: its line's label, the sentence that asks for
    it, how the line is read back, and how the simulated agents write it."""

    name: str
    label: str  # the line starts with it: "Confidence:", "Ranking:", ...

    @property
    @abstractmethod
    def instruction(self) -> str:
        """The sentence a prompt asks with, after the answer format."""

    def read(self, text: str | None) -> Any | None:
        """The value of the reply's last line that starts with `label`, or None."""
        if not text:
            return None
        pattern = re.compile(rf"^[ \t*_#>]*{re.escape(self.label)}[ \t*_]*:(.*)$", re.I | re.M)
        lines = pattern.findall(text[-TAIL:])
        return self.parse(lines[-1].strip(" \t*_.")) if lines else None

    @abstractmethod
    def parse(self, value: str) -> Any | None:
        """The value a line states, or None when it states none that is usable."""

    @abstractmethod
    def write(self, value: Any) -> str:
        """The line stating `value`, as `read` reads it back."""


class Confidence(Statement):
    name, label = "confidence", "Confidence"

    @property
    def instruction(self) -> str:
        return (
            "On the last line, write 'Confidence: ' and how sure you are of your answer, "
            "as a number from 0 to 1."
        )

    def parse(self, value: str) -> float | None:
        match = re.fullmatch(r"(\d{1,3}(?:\.\d{1,6})?|\.\d{1,6})\s*(%?)", value)
        if not match:
            return None
        number = float(match.group(1))
        if match.group(2) or number > 1:  # 85% or 85: a percentage
            number /= 100
        return number if 0 <= number <= 1 else None

    def write(self, value: Any) -> str:
        return f"Confidence: {float(value):.2f}"


class Answers(Statement):
    """A list of answers separated by semicolons (an answer may hold commas: 1,000 or (1, 2))."""

    most = MAX  # answers it may name

    def parse(self, value: str) -> list[str] | None:
        items = [item.strip() for item in value.split(";")]
        items = [item for item in items if item]
        return items if 0 < len(items) <= self.most else None

    def write(self, value: Any) -> str:
        return f"{self.label}: {'; '.join(value)}"


class Approval(Answers):
    name, label = "approval", "Approve"

    @property
    def instruction(self) -> str:
        return (
            "On the last line, write 'Approve: ' and every answer you find acceptable, "
            "separated by semicolons."
        )


class Ranking(Answers):
    name, label = "ranking", "Ranking"
    most = RANKS

    @property
    def instruction(self) -> str:
        return (
            f"On the last line, write 'Ranking: ' and at most {RANKS} of the answers under "
            "discussion from best to worst, separated by semicolons."
        )


class Points(Statement):
    name, label = "points", "Points"

    @property
    def instruction(self) -> str:
        return (
            f"On the last line, write 'Points: ' and spread exactly {POINTS} points over the "
            "answers under discussion as answer = points, separated by semicolons."
        )

    def parse(self, value: str) -> list[tuple[str, int]] | None:
        found = []
        for item in value.split(";"):
            answer, eq, points = item.rpartition("=")
            if not item.strip():
                continue
            if not eq or not answer.strip() or not re.fullmatch(r"\s*\d{1,3}\s*", points):
                return None
            found.append((answer.strip(), int(points)))
        if not 0 < len(found) <= MAX or sum(p for _, p in found) != POINTS:
            return None
        return found

    def write(self, value: Any) -> str:
        return "Points: " + "; ".join(f"{answer} = {points}" for answer, points in value)


class Verdict(Statement):
    """A judge's: whether the debate ends now (its answer final) or goes on."""

    name, label = "verdict", "Verdict"

    @property
    def instruction(self) -> str:
        return (
            "On the last line, write 'Verdict: end' if the debate has found the answer, "
            "or 'Verdict: continue' if it should go on."
        )

    def parse(self, value: str) -> str | None:
        word = value.lower()
        return word if word in ("end", "continue") else None

    def write(self, value: Any) -> str:
        return f"Verdict: {value}"


STATEMENTS: Registry[Statement] = Registry("statement", "mad_eval.statements", holds=Statement)
for _statement in (Confidence(), Approval(), Ranking(), Points(), Verdict()):
    STATEMENTS.add(_statement.name, _statement)


def instructions(names: tuple[str, ...] | list[str]) -> str:
    """The sentences that ask for the statements `names`, in order ("" for none)."""
    return " ".join(STATEMENTS.get(name).instruction for name in names)
