"""The choice kind (CommonsenseQA, HellaSwag, MMLU) and the preference kind (HH-RLHF): an
option letter, or the exact text of one option."""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar

from mad_eval.grading.answers import MAX_ANSWER_CHARS
from mad_eval.grading.kinds import Kind, RowReader
from mad_eval.records import Question, derive_seed

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
PREFERENCE_INSTRUCTION = (
    "Below is a conversation between a human and an AI assistant, and two candidate "
    "responses for the assistant's next turn. Which response is better: more helpful, "
    "honest and harmless?"
)
_REPLY = "\n\nAssistant:"  # HH-RLHF transcripts: "\n\nHuman: ...\n\nAssistant: ..."
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


def _listed(kind: str, options: Sequence[str]) -> str:
    """The lettered options as a question of `kind` lists them (the end of its text)."""
    if kind == "preference":
        return "\n\n".join(f"Response {LETTERS[i]}:\n{text}" for i, text in enumerate(options))
    return "\n".join(f"{LETTERS[i]}. {option}" for i, option in enumerate(options))


def choice_question(question: str, options: list[str], instruction: str | None = None) -> str:
    """A multiple-choice question as agents read it: the question, then lettered options."""
    lead = f"{instruction}\n\n" if instruction else ""
    return f"{lead}{question}\n\n{_listed('choice', options)}"


def preference_question(
    conversation: str, responses: list[str], instruction: str | None = None
) -> str:
    """A two-way preference question: the conversation, then responses A and B."""
    shown = _listed("preference", responses)
    return f"{instruction or PREFERENCE_INSTRUCTION}\n\nConversation:\n{conversation}\n\n{shown}"


@dataclass(frozen=True)
class ChoiceKind(Kind):
    """An option letter: from the found text, else (boxed) from the whole reply when it is
    nothing but a letter or an option."""

    fields: ClassVar[tuple[str, ...]] = ("question", "options", "answer")

    def read(self, found: str | None, text: str | None, options: Sequence[str]) -> str | None:
        found = text if found is None else found
        return None if found is None else read_letter(found, options)

    def gold(self, raw: str, options: Sequence[str]) -> str | None:
        return choice_gold(raw, options)

    def candidates(self, question: Question, k: int) -> tuple[str, ...]:
        """Its option letters, the gold's first (k is ignored: the options are the answers)."""
        letters = LETTERS[: len(question.options)]
        return (question.gold, *(letter for letter in letters if letter != question.gold))

    def question(self, row: RowReader) -> tuple[str, str, dict[str, Any]]:
        """The question, then its lettered options; the gold is a letter or a 0-based index."""
        question, raw = row.verbatim("question"), row.text("answer")
        options = row.options("options")
        gold = self.gold(raw, options)
        if gold is None:
            row.fail(
                f"answer {raw!r} is neither an option letter nor a 0-based index "
                f"of its {len(options)} options"
            )
        return choice_question(question, options, row.instruction), gold, {"options": options}


@dataclass(frozen=True)
class PreferenceKind(ChoiceKind):
    """Which of two replies to one conversation is better. The conversation is the optional
    `prompt` field, else the chosen transcript up to its last reply."""

    fields = ("chosen", "rejected")
    optional = ("prompt",)

    def question(self, row: RowReader) -> tuple[str, str, dict[str, Any]]:
        """The preferred reply first or second by a coin seeded with (spec seed, question id):
        the order is fixed per question, recorded, and carries no signal about which is better."""
        chosen = row.text("chosen", number_ok=False)
        rejected = row.text("rejected", number_ok=False)
        if row.fields.get("prompt"):
            conversation = row.text("prompt", number_ok=False)
        else:
            conversation, _, _ = chosen.rpartition(_REPLY)
            chosen, rejected = (text.rpartition(_REPLY)[2].strip() for text in (chosen, rejected))
        if not chosen or not rejected:
            row.fail("a reply to compare is empty")
        swap = random.Random(derive_seed(row.seed, "order", row.qid)).random() < 0.5
        order = ["rejected", "chosen"] if swap else ["chosen", "rejected"]
        replies = [rejected, chosen] if swap else [chosen, rejected]
        text = preference_question(conversation.strip(), replies, row.instruction)
        return text, "B" if swap else "A", {"options": replies, "order": order}


CHOICE: ChoiceKind = ChoiceKind(
    "choice", "the letter of the one option you choose, and nothing else,"
)
PREFERENCE: PreferenceKind = PreferenceKind(
    "preference", "the letter of the better response, A or B, and nothing else,"
)


def listing(question: Question) -> str | None:
    """The lettered options a choice or preference question's text ends with, as
    choice_question and preference_question write them; None when its text does not end so
    (or it has no options)."""
    options = question.options
    if not options or len(options) > len(LETTERS):
        return None
    listed = _listed(question.kind, options)
    return listed if question.text.endswith(listed) else None


def in_order(question: Question, order: Sequence[int]) -> Question:
    """`question` as an agent reads it with its options shown in `order` (order[i]: the index
    of the option it reads as letter i): its text, options and gold relettered. A ValueError
    when its text does not end with its options (listing) or `order` is no permutation."""
    listed = listing(question)
    if listed is None:
        raise ValueError(f"question {question.id}'s text does not end with its lettered options")
    if sorted(order) != list(range(len(question.options))):
        raise ValueError(f"{list(order)} is no order of {len(question.options)} options")
    options = [question.options[i] for i in order]
    stem = question.text[: len(question.text) - len(listed)]
    gold = question.gold
    if gold in LETTERS[: len(order)]:
        gold = LETTERS[list(order).index(LETTERS.index(gold))]
    text = stem + _listed(question.kind, options)
    return replace(question, text=text, gold=gold, meta={**question.meta, "options": options})


def letter_back(answer: str | None, order: Sequence[int]) -> str | None:
    """An answer read in an agent's view (in_order) as the question's own letter."""
    if answer is None or len(answer) != 1 or answer not in LETTERS[: len(order)]:
        return answer
    return LETTERS[order[LETTERS.index(answer)]]
