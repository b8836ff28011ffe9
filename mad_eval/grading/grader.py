"""Grading a reply: its answer protocol (mad_eval.grading.answers) finds where the final answer is
written, its benchmark kind (mad_eval.grading.kinds) reads, compares and scores it.

- math: a LaTeX answer, compared with math-verify.
- number: one number, compared exactly as a fraction.
- choice, preference: an option letter (or the exact text of one option).
- summary: a few sentences, scored with ROUGE against the reference.

By default an answer is the last `\\boxed{}` (else the answer cue that comes last) and a
summary the text after the last "Summary:" line; a benchmark may name another protocol
(DAPO's `Answer: X` line, Math-Verify's own search, `{final answer: X}`).

Model text is hostile input: extraction is a linear scan, and math-verify (sympy) runs in
worker processes (mad_eval.grading.verifier) whose every call is bounded in time, so no answer can
hang a run. The workers are plain subprocesses: a script that grades needs no main guard,
and they die with the process that started them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from mad_eval.grading.answers import MAX_ANSWER_CHARS, get_answer_protocol, protocol_name
from mad_eval.grading.kinds import KINDS, Grade, Kind, get_kind
from mad_eval.grading.kinds.choice import LETTERS, choice_gold
from mad_eval.grading.kinds.math import compare_math, equivalent
from mad_eval.grading.kinds.number import number_gold, number_key
from mad_eval.grading.kinds.summary import MAX_SUMMARY_CHARS, ROUGE, consensus, rouge
from mad_eval.grading.reasoning import drop_reasoning
from mad_eval.grading.verifier import NeedsWorker, inline

__all__ = [
    "KINDS",
    "LETTERS",
    "MAX_ANSWER_CHARS",
    "MAX_SUMMARY_CHARS",
    "ROUGE",
    "Grade",
    "NeedsWorker",
    "check_answer_protocol",
    "choice_gold",
    "compare_math",
    "consensus",
    "decider",
    "equivalent",
    "extract",
    "extract_answer",
    "extract_choice",
    "extract_number",
    "extract_summary",
    "get_kind",
    "grade",
    "grade_inline",
    "inline",
    "number_gold",
    "number_key",
    "rouge",
    "same_answer",
]


def check_answer_protocol(kind: str, answer: str | None = None) -> str:
    """The answer protocol a question of `kind` is read with: `answer`, or the kind's default
    when None; a protocol the kind does not accept is refused in one sentence."""
    found = get_kind(kind)
    if answer is None:
        return found.default_answer
    get_answer_protocol(answer)  # an unknown name or setting gets its own sentence
    if protocol_name(answer) not in found.answers:
        raise ValueError(
            f"the {kind} kind cannot be read with the {answer} answer protocol; "
            f"it accepts: {', '.join(found.answers)}."
        )
    return answer


def _read(
    text: str | None, kind: Kind, answer: str, options: Sequence[str], split: bool = True
) -> tuple[str | None, bool]:
    """(the kind's canonical answer, whether math-verify ran out of time finding it)."""
    if not text:
        return None, False
    protocol = get_answer_protocol(answer)
    found = protocol.find(text, split)
    reply = found.reply if protocol.fallback else None
    return kind.read(found.answer, reply, options), found.timed_out


def extract(
    text: str, kind: str, options: Sequence[str] = (), answer: str | None = None
) -> str | None:
    """The final answer of a reply, found with the answer protocol (None: the kind's default)
    and read as the kind reads it; None when it cannot be read."""
    protocol = check_answer_protocol(kind, answer)
    return _read(text, get_kind(kind), protocol, options)[0]


def grade(
    text: str | None,
    gold: str,
    kind: str,
    options: Sequence[str] = (),
    answer: str | None = None,
    split: bool = True,
) -> Grade:
    """Extract the final answer from text with the answer protocol (None: the kind's default)
    and check it against gold (a summary is scored against the reference instead). `split`
    False: `text` is a turn's final content, whose reasoning is apart already, so no tag
    left in it is read as a reasoning format a second time. A protocol with a judge compares
    too (math-verify: verl's own verdict; dapo: verl's DAPO reward, on the whole reply)."""
    protocol = check_answer_protocol(kind, answer)
    found = get_kind(kind)
    judging = get_answer_protocol(protocol)
    judge = judging.judge
    if judge is not None:  # the protocol compares too (math-verify: verl's own verdict)
        drop = split and not judging.whole
        reply = (drop_reasoning(text) if drop else text) if text else ""
        if not reply.strip():
            return Grade(None, False)
        verdict = judge(reply, gold)
        return Grade(verdict.answer, verdict.correct, timed_out=verdict.timed_out)
    read, timed_out = _read(text, found, protocol, options, split)
    graded = found.grade(read, gold)
    return Grade(read, graded.correct, graded.rouge, True) if timed_out else graded


def decider(kind: str, protocol: str | None = None) -> Callable[[str, str], bool | None] | None:
    """What says whether a found answer is right against a gold, as grade() said, where that
    follows from the two alone, purely and cheaply: the kind's comparison (it answers None
    where only math-verify could say), or a judge's that reads nothing more (dapo's). None
    where the judge's verdict reads the whole reply (the math-verify protocol's)."""
    judging = get_answer_protocol(check_answer_protocol(kind, protocol))
    return get_kind(kind).decide if judging.judge is None else judging.verdict


# Replies up to this long are graded on the event loop when no math-verify worker is needed:
# finding an answer is a linear scan, tens of microseconds here, less than a thread's hop.
INLINE_CHARS = 20_000


def grade_inline(
    text: str | None,
    gold: str,
    kind: str,
    options: Sequence[str] = (),
    answer: str | None = None,
    split: bool = True,
) -> Grade | None:
    """grade(), when it is quick: a voted kind's reply of at most INLINE_CHARS whose answer
    needs no math-verify (equal text, equal integers, a letter); None when it would need a
    worker or more time, for the caller to grade it in a thread."""
    if len(text or "") > INLINE_CHARS or not get_kind(kind).voted:
        return None
    with inline():
        try:
            return grade(text, gold, kind, options, answer, split)
        except NeedsWorker:
            return None


def same_answer(kind: str, answer: str | None = None) -> Callable[[str, str], bool]:
    """Whether two extracted answers are the same answer: math-verify for math; the other
    kinds extract a canonical form (a letter, an exact fraction), so equal text; under a
    protocol whose judge compares strings (`answer`: dapo), equal text."""
    if answer is not None and get_answer_protocol(answer).equal_text:
        return str.__eq__
    return get_kind(kind).same


# ---- the default protocol's readers, by kind ----------------------------------------------


def extract_answer(text: str) -> str | None:
    """A math answer: the last boxed answer, else the text after the answer cue that comes
    last; None if there is neither."""
    return extract(text, "math")


def extract_number(text: str) -> str | None:
    """The one number of the final answer: the last box, else an answer cue, else `####`."""
    return extract(text, "number")


def extract_choice(text: str, options: Sequence[str]) -> str | None:
    """The letter of the option chosen: from the last box, else an answer cue, else the whole
    reply when it is nothing but a letter or an option."""
    return extract(text, "choice", options)


def extract_summary(text: str) -> str | None:
    """The text after the last line that opens with "Summary:", to the end of the reply."""
    return extract(text, "summary")
