"""The choice kind (CommonsenseQA, HellaSwag, MMLU) and the preference kind (HH-RLHF): an
option letter, or the exact text of one option."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from mad_eval.answers import MAX_ANSWER_CHARS
from mad_eval.kinds import Kind
from mad_eval.records import Question

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
_WRAPPER = re.compile(r"\\(?:text|textbf|mathrm|mathbf)\s*\{([^{}]*)\}")
# "B", "(B)", "B.", "B) text", "Option B", "**Response (A)**": a capital letter standing alone.
# A bare letter must end there or be followed by punctuation: "B because ..." is not read.
_LETTER = re.compile(
    r"(?:(?:option|choice|response|answer)\s*:?\s*)?(?:\(([A-Z])\)|([A-Z])(?=[.:)]|$))[.:)]?(?:\s.*)?",
    re.IGNORECASE | re.DOTALL,
)


def _plain(text: str) -> str:
    return " ".join(text.casefold().split()).strip(" .*")


def read_letter(found: str, options: Sequence[str]) -> str | None:
    """The letter of the option `found` names: a letter standing alone, or the text of
    exactly one option. A letter beyond the options, or text matching no option or several,
    is unparsed."""
    if len(found) > MAX_ANSWER_CHARS:
        return None
    found = _WRAPPER.sub(r"\1", found).strip().strip("*$").strip()
    letters = LETTERS[: len(options)]
    match = _LETTER.fullmatch(found)
    letter = match and (match.group(1) or match.group(2))
    if letter and letter in LETTERS:  # a capital: IGNORECASE is for the words only
        return letter if letter in letters else None
    plain = _plain(found)
    hits = [LETTERS[i] for i, option in enumerate(options) if _plain(option) == plain]
    return hits[0] if len(hits) == 1 else None


def choice_gold(raw: str, options: Sequence[str]) -> str | None:
    """A gold option as its letter: a letter ("C"), or a 0-based index ("2", as HellaSwag and
    MMLU's hub copy store it)."""
    raw = raw.strip()
    if raw.isdigit():
        index = int(raw)
        return LETTERS[index] if index < len(options) else None
    return raw.upper() if len(raw) == 1 and raw.upper() in LETTERS[: len(options)] else None


@dataclass(frozen=True)
class ChoiceKind(Kind):
    """An option letter: from the found text, else (boxed) from the whole reply when it is
    nothing but a letter or an option."""

    def read(self, found: str | None, text: str | None, options: Sequence[str]) -> str | None:
        found = text if found is None else found
        return None if found is None else read_letter(found, options)

    def gold(self, raw: str, options: Sequence[str]) -> str | None:
        return choice_gold(raw, options)

    def candidates(self, question: Question, k: int) -> tuple[str, ...]:
        """Its option letters, the gold's first (k is ignored: the options are the answers)."""
        letters = LETTERS[: len(question.options)]
        return (question.gold, *(letter for letter in letters if letter != question.gold))


CHOICE = ChoiceKind("choice", "the letter of the one option you choose, and nothing else,")
PREFERENCE = ChoiceKind(
    "preference", "the letter of the better response, A or B, and nothing else,"
)
