"""Benchmark kinds: WHAT a final answer is (a math expression, a number, an option letter, a
summary), how it reads the text an answer protocol (mad_eval.grading.answers) found, and how it is
compared, graded, asked from a benchmark's row and simulated.

One module per kind; the KINDS registry holds them all, so a new kind is a module and a line
here (or a `mad_eval.kinds` entry point of another package): the benchmark reader
(mad_eval.data.benchmarks) asks the kind which row fields it needs and what question a row
makes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, NoReturn, Protocol

from mad_eval.errors import UserError
from mad_eval.records import Question
from mad_eval.registry import Registry


@dataclass(frozen=True)
class Grade:
    """One graded text; an unparsed answer (None) is never correct. A summary is neither
    right nor wrong (`correct` None): its `rouge` F1 scores against the reference count."""

    answer: str | None  # extracted final answer; None when nothing could be extracted
    correct: bool | None  # False when unparsed; None for a summary
    rouge: dict[str, float] | None = None
    # math-verify could not decide within its bound: the answer counts as wrong
    timed_out: bool = False


class RowReader(Protocol):
    """One benchmark row as a kind reads it (mad_eval.data.benchmarks makes them, so kinds do no
    I/O): fields by the kind's names, and every problem one sentence naming the row."""

    fields: Mapping[str, Any]  # the kind's field names -> the row's keys (the spec's table)
    where: str  # "math500.jsonl line 7"
    instruction: str | None  # the spec's, put before each question
    seed: int  # the spec's
    qid: str  # the question's id

    def text(self, field: str, number_ok: bool = True) -> str:
        """The field's text, stripped; with number_ok, a number as text ("27.0" -> "27")."""
        ...

    def verbatim(self, field: str) -> str:
        """The field's text as the source wrote it (a question the agents read)."""
        ...

    def options(self, field: str) -> list[str]:
        """A list of 2 to 26 option texts; the field may be a path ("choices.text")."""
        ...

    def fail(self, problem: str) -> NoReturn:
        """Refuse the row: `problem` is one sentence, the reader says where the row is."""
        ...


def after_instruction(instruction: str | None, question: str) -> str:
    """The question as agents read it: after the spec's instruction, when it has one."""
    return f"{instruction}\n\n{question}" if instruction else question


@dataclass(frozen=True)
class Kind:
    """What one benchmark kind's answers are; subclasses read, compare and simulate them."""

    # The row fields question() reads, named as a spec's [hub] and [local] tables map them to
    # the row's keys: each is required there; `optional` ones (and `id`) may be mapped.
    fields: ClassVar[tuple[str, ...]] = ("question", "answer")
    optional: ClassVar[tuple[str, ...]] = ()

    name: str
    what: str  # the answer as the prompt's answer-format sentence names it
    default_answer: str = "boxed"  # the answer protocol used unless a benchmark names one
    # The answer protocols it can be read with (the one place that says which pairs work).
    answers: tuple[str, ...] = ("boxed", "answer-line", "braces")
    voted: bool = True  # False: scored (ROUGE), never right or wrong, so never voted on
    rule: str = "plurality"  # the default rule that turns the agents' answers into one

    def read(self, found: str | None, text: str | None, options: Sequence[str]) -> str | None:
        """The canonical answer from the text a protocol found; `text` is the whole reply
        (reasoning dropped) when the protocol lets the kind fall back on its own reading
        when nothing was found, else None."""
        raise NotImplementedError

    def same(self, a: str, b: str) -> bool:
        """Whether two read answers are the same answer: read answers are canonical (a
        letter, an exact fraction), so equal text."""
        return a == b

    def grade(self, answer: str | None, gold: str) -> Grade:
        """A read answer checked against the gold; None is never right."""
        return Grade(answer, answer is not None and self.same(answer, gold))

    def decide(self, answer: str, gold: str) -> bool | None:
        """grade()'s verdict on a read answer where it is pure and cheap (a recorded one is
        checked against it); None where only a slower comparison (math-verify) decides."""
        return self.same(answer, gold)

    def gold(self, raw: str, options: Sequence[str]) -> str | None:
        """A benchmark's gold as this kind's canonical answer; None when it cannot be one."""
        return raw

    def question(self, row: RowReader) -> tuple[str, str, dict[str, Any]]:
        """(text the agents read, gold, what the question records besides) of one row: here
        the question after the spec's instruction, and the answer as the gold."""
        text = after_instruction(row.instruction, row.verbatim("question"))
        return text, row.text("answer"), {}

    def candidates(self, question: Question, k: int) -> tuple[str, ...]:
        """The simulated agents' answers to a question: the gold first, then k-1 others (or
        as many as the kind has)."""
        raise NotImplementedError


def stable_int(text: str) -> int:
    """A seed from text that is the same in every process (hash() is salted per process)."""
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")


# The kinds register below the base they subclass.
from mad_eval.grading.kinds.choice import CHOICE, PREFERENCE  # noqa: E402
from mad_eval.grading.kinds.math import MATH  # noqa: E402
from mad_eval.grading.kinds.number import NUMBER  # noqa: E402
from mad_eval.grading.kinds.summary import SUMMARY  # noqa: E402


class KindError(UserError, ValueError):
    """A benchmark kind that is unknown or cannot serve."""


KINDS: Registry[Kind] = Registry("benchmark kind", "mad_eval.kinds", error=KindError, holds=Kind)
for _kind in (MATH, NUMBER, CHOICE, PREFERENCE, SUMMARY):
    KINDS.add(_kind.name, _kind)


def get_kind(name: str) -> Kind:
    """The kind of that name; an unknown one is refused in one sentence."""
    return KINDS.get(name)
