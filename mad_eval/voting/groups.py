"""Answers grouped by equivalence: pair by pair where nothing else is known, by the classes
the engine recorded when it graded them (AnswerClasses) where it is."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar

from mad_eval.grading.grader import equivalent

Same = Callable[[str, str], bool]


class Graded(Protocol):
    """Anything graded: a turn, a training rollout (read only, so a rollout's `correct`
    may be a plain bool)."""

    @property
    def answer(self) -> str | None: ...

    @property
    def correct(self) -> bool | None: ...

    @property
    def grade_timed_out(self) -> bool: ...


class Cast(Graded, Protocol):
    """A graded answer of one agent: what a rule chooses among."""

    agent: int


G = TypeVar("G", bound=Graded)
C = TypeVar("C", bound=Cast)


def answer_groups(turns: Sequence[G], same: Same = equivalent) -> list[list[G]]:
    """Parsed answers grouped by equivalence (not by string), in order of first appearance.
    `same` is the benchmark kind's equivalence (grading.same_answer). Turns whose classes
    were recorded when they were graded (AnswerClasses) are grouped by class, with no
    comparison at all; turns recorded before classes existed are compared pair by pair."""
    classes = [getattr(t, "answer_class", None) for t in turns if t.answer is not None]
    if classes and None not in classes:
        by_class: dict[int, list[G]] = {}
        for turn in turns:
            if turn.answer is not None:
                by_class.setdefault(turn.answer_class, []).append(turn)  # type: ignore[attr-defined]
        return list(by_class.values())
    groups: list[list[G]] = []
    for turn in turns:
        if turn.answer is None:
            continue
        for group in groups:
            if same_graded(turn, group[0], same):
                group.append(turn)
                break
        else:
            groups.append([turn])
    return groups


def same_graded(a: Graded, b: Graded, same: Same) -> bool:
    """Two graded answers are equivalent when both equal the gold; one right and one wrong
    never are. Only two wrong answers need comparing, which saves most math-verify calls;
    one that math-verify could not decide against the gold is compared by its text alone."""
    if bool(a.correct) != bool(b.correct):
        return False
    if a.correct:
        return True
    if a.grade_timed_out or b.grade_timed_out:
        return " ".join(a.answer.split()) == " ".join(b.answer.split())  # type: ignore[union-attr]
    return same(a.answer, b.answer)  # type: ignore[arg-type]


def same_answer_as(a: Graded, b: Graded, same: Same) -> bool:
    """Whether two answers of one run and question (any rounds) are equivalent: by their
    recorded classes where both have one, else compared as answer_groups compares them."""
    if a.answer is None or b.answer is None:
        return False
    mine, theirs = getattr(a, "answer_class", None), getattr(b, "answer_class", None)
    if mine is not None and theirs is not None:
        return bool(mine == theirs)
    return same_graded(a, b, same)


class AnswerClasses:
    """The equivalence classes of one debate's answers (one run's turns of one question),
    numbered in the order they are assigned (the engine assigns a wave's turns in agent
    order, however its replies arrive): 0 for every right answer, 1, 2, ... for each
    distinct wrong one, None for no answer. Each wrong answer is compared with the first
    answer of each wrong class, in class order, by the rule answer_groups applies pair by
    pair (`same_graded`); the engine records the class on the turn, so votes and reports
    never compare answers again. math-verify's equivalence is not always transitive, so in a
    rare case these classes group differently from pairs taken in another order; the recorded
    classes are what is voted on from then on."""

    def __init__(self, same: Same):
        self.same = same
        self.first: dict[int, Graded] = {}  # each wrong class's first answer
        self.lock = asyncio.Lock()  # for callers that assign from several tasks

    def seen(self, turn: Graded, answer_class: int | None) -> None:
        """A turn recorded earlier (a resumed run): its class is known."""
        if answer_class is not None and answer_class > 0:
            self.first.setdefault(answer_class, turn)

    def assign(self, graded: Graded) -> int | None:
        """The class of a newly graded answer (math-verify may be asked)."""
        if graded.answer is None:
            return None
        if graded.correct:
            return 0
        for number in sorted(self.first):
            if same_graded(graded, self.first[number], self.same):
                return number
        number = max(self.first, default=0) + 1
        self.first[number] = graded
        return number
