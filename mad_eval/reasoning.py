"""A reasoning model's reply in two parts: its reasoning and its final content.

A server with a reasoning parser (vLLM's `--reasoning-parser`) returns the reasoning in a
field of its own (`reasoning`, or `reasoning_content` on older servers); otherwise the
reasoning sits in `<think>...</think>` inside the text, and the same split is made here.
A reply that ran out of tokens before its reasoning ended has no final content: it is
*truncated in reasoning*, recorded as such, and never read for an answer.

What a peer reads of a reply is a choice (`--quote`): the final content alone, the
reasoning too, or the last N tokens of the reasoning with the final content.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import NamedTuple

_THINK = re.compile(r"<(/?)think>")
# Where reasoning is quoted, a think tag inside either part is escaped, so no reply can end
# its own quoted reasoning early and pass reasoning off as a final answer, or the reverse.
_ANY_THINK = re.compile(r"<(?=\s*/?\s*think\b)", re.IGNORECASE)
TAIL_MARKER = "[... the start of this reasoning was cut ...]\n"


class Scan(NamedTuple):
    """A text's `<think>` blocks taken apart: the text outside them, the text inside them,
    and whether the last block was never closed."""

    final: str
    reasoning: list[str]
    unclosed: bool


def scan(text: str, opened: bool = False) -> Scan:
    """Take `text` apart at its think tags: closed blocks and an unclosed block's rest are
    reasoning, and so is all before a lone `</think>` (a chat template that opens the block
    in the prompt leaves only the close in the reply). `opened`: the prompt itself ended
    inside a block, so the reply starts in reasoning."""
    pieces: list[tuple[str, bool]] = []  # (text, is reasoning), in order
    before = 0  # pieces[:before] are all reasoning: a lone close came after them
    start, inside = 0, opened
    for tag in _THINK.finditer(text):
        closing = bool(tag.group(1))
        if inside and not closing:
            continue  # an open inside a block: still the same block
        pieces.append((text[start : tag.start()], inside))
        if not inside and closing:  # a close with no open: everything so far was reasoning
            before = len(pieces)
        start, inside = tag.end(), not closing
    pieces.append((text[start:], inside))
    final = "".join(
        piece for i, (piece, thought) in enumerate(pieces) if i >= before and not thought
    )
    thought = [
        piece
        for i, (piece, is_thought) in enumerate(pieces)
        if (i < before or is_thought) and piece.strip()
    ]
    return Scan(final, thought, inside)


def drop_reasoning(text: str) -> str:
    """The reply without its reasoning, as every answer protocol reads it."""
    return scan(text).final


@dataclass(frozen=True)
class Split:
    """A reply as a turn records it."""

    text: str  # the final content
    reasoning: str | None  # None: the reply had none
    truncated: bool  # it stopped at the token limit before its final content


def split_reply(
    content: str | None,
    reasoning: str | None = None,
    finish_reason: str | None = None,
    opened: bool = False,
) -> Split:
    """The final content and the reasoning of a reply: `reasoning` is the server's own
    reasoning field, when it split the reply itself; think blocks left in the content are
    split off here either way. Truncated in reasoning: a reply that stopped at the token
    limit with no content (a server split it), or inside an unclosed think block."""
    found = scan(content or "", opened)
    parts = ([reasoning] if reasoning and reasoning.strip() else []) + found.reasoning
    truncated = found.unclosed or (finish_reason == "length" and not (content or "").strip())
    text = found.final.strip() if parts else found.final
    return Split(text, "\n\n".join(p.strip() for p in parts) or None, truncated)


def ends_in_reasoning(prompt: str) -> bool:
    """Whether a rendered prompt ends by opening a think block (DeepSeek-R1's template
    does), so the reply it is sent for starts inside its reasoning."""
    return prompt.rstrip().endswith("<think>")


def quoted(text: str, reasoning: str | None) -> str:
    """A reply as another agent or the judge reads it: the final content, after the
    reasoning in a think block when there is reasoning to show."""
    if not reasoning:
        return text
    inner, final = _ANY_THINK.sub("&lt;", reasoning), _ANY_THINK.sub("&lt;", text)
    return f"<think>\n{inner}\n</think>\n\n{final}"


@dataclass(frozen=True)
class Quoting:
    """What an agent reads of each reply it is shown: `final` (the final content), `full`
    (the reasoning too) or `tail` (the last `tokens` tokens of the reasoning too)."""

    how: str = "final"
    tokens: int = 0

    def __str__(self) -> str:
        return f"tail:{self.tokens}" if self.how == "tail" else self.how


FINAL = Quoting()  # the default: peers read each other's final content only
QUOTE_CHOICES = "final, full or tail:N"


def parse_quoting(text: str) -> Quoting:
    """`final`, `full` or `tail:N` (N >= 1 tokens); ValueError names what is accepted."""
    how, colon, count = text.strip().partition(":")
    if how in ("final", "full") and not colon:
        return Quoting(how)
    if how == "tail" and count.isdigit() and int(count) >= 1:
        return Quoting("tail", int(count))
    raise ValueError(
        f"quote must be {QUOTE_CHOICES} (N tokens of reasoning, at least 1), not {text!r}"
    )
