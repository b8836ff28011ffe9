"""A reasoning model's reply in two parts: its reasoning and its final content.

A server with a reasoning parser (vLLM's `--reasoning-parser`) returns the reasoning in a
field of its own (`reasoning`, or `reasoning_content` on older servers); otherwise the
reasoning sits in a `<think>...</think>` block that opens the text (or only its close, where
the chat template opened the block), and the same split is made here; a tag anywhere else
is part of the answer.
A reply that ran out of tokens before its reasoning ended has no final content: it is
*truncated in reasoning*, recorded as such, and never read for an answer.

What a peer reads of a reply is a choice (`--quote`): the final content alone, the
reasoning too, the last N tokens of the reasoning with the final content, or the reply
verbatim, exactly as the model wrote it (as Debate-or-Vote quotes replies).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import NamedTuple

from mad_eval.records import shown

OPEN, CLOSE = "<think>", "</think>"
# Where reasoning is quoted, a think tag inside either part is escaped, so no reply can end
# its own quoted reasoning early and pass reasoning off as a final answer, or the reverse.
_ANY_THINK = re.compile(r"<(?=\s*/?\s*think\b)", re.IGNORECASE)
TAIL_MARKER = "[... the start of this reasoning was cut ...]\n"


def tag_pattern(*names: str) -> re.Pattern[str]:
    """The "<" that opens or closes one of these tags, however spaced or cased."""
    return re.compile(r"<(?=\s*/?\s*(?:{})\b)".format("|".join(names)), re.IGNORECASE)


# Every tag prompts quote model text between (the debate's responses, the judge's context and
# reply): a reply holding one has it escaped wherever it is quoted (debate.prompts.quotable).
_QUOTING_TAGS = tag_pattern("response", "context", "reply")


def holds_quoting_tags(text: str | None) -> bool:
    """Whether a reply wrote (by design or by chance) a tag that prompts quote with."""
    return text is not None and _QUOTING_TAGS.search(text) is not None


class Scan(NamedTuple):
    """A text's reasoning taken apart: the final content, the reasoning (one piece at most),
    and whether the reasoning was never closed."""

    final: str
    reasoning: list[str]
    unclosed: bool


def scan(text: str, opened: bool = False) -> Scan:
    """Take `text` apart where a reasoning model's format puts its reasoning, and nowhere
    else: a leading block (the text opens, after whitespace, with `<think>`), or the text
    up to a `</think>` with no `<think>` before it (a chat template opened the block in the
    prompt; `opened`: the prompt we rendered did). The first close ends the reasoning; all
    after it is the final content as written, tags included, so a tag the answer mentions
    or a stray close after it never takes the answer away."""
    body = text.lstrip()
    if body.startswith(OPEN):
        body, opened = body[len(OPEN) :], True
    elif opened:
        body = text
    end = body.find(CLOSE)
    if not opened and (end < 0 or OPEN in body[:end]):
        return Scan(text, [], False)  # no reasoning format: all of it is the answer
    if end < 0:
        return Scan("", [body] if body.strip() else [], True)
    thought = body[:end]
    return Scan(body[end + len(CLOSE) :], [thought] if thought.strip() else [], False)


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
    reasoning field, when it split the reply itself (its content is then all answer);
    otherwise the content is split here (scan). Truncated in reasoning: a reply that
    stopped at the token limit with no content (a server split it), or inside an unclosed
    think block."""
    parts = [reasoning] if reasoning and reasoning.strip() else []
    found = Scan(content or "", [], False) if parts else scan(content or "", opened)
    parts += found.reasoning
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


def verbatim(text: str | None, reasoning: str | None, reply: str | None) -> str:
    """A reply as the model wrote it: `reply` when the turn recorded it (its content as
    received, where splitting changed it); else the final content, after the reasoning in a
    think block where a server returned the reasoning apart (its spacing then assumed)."""
    if reply is not None:
        return reply
    if not reasoning:
        return text or ""
    return f"{OPEN}\n{reasoning}\n{CLOSE}\n\n{text or ''}"


@dataclass(frozen=True)
class Quoting:
    """What an agent reads of each reply it is shown: `final` (the final content), `full`
    (the reasoning too), `tail` (the last `tokens` tokens of the reasoning too) or
    `verbatim` (the reply exactly as written, reasoning and tags included, nothing escaped)."""

    how: str = "final"
    tokens: int = 0

    def __str__(self) -> str:
        return f"tail:{self.tokens}" if self.how == "tail" else self.how


FINAL = Quoting()  # the default: peers read each other's final content only
VERBATIM = Quoting("verbatim")
QUOTE_CHOICES = "final, full, tail:N or verbatim"


def parse_quoting(text: str) -> Quoting:
    """`final`, `full`, `tail:N` (N >= 1 tokens) or `verbatim`; ValueError names what is
    accepted."""
    how, colon, count = text.strip().partition(":")
    if how in ("final", "full", "verbatim") and not colon:
        return Quoting(how)
    if how == "tail" and count.isdigit() and int(count) >= 1:
        return Quoting("tail", int(count))
    raise ValueError(
        f"quote must be {QUOTE_CHOICES} (N tokens of reasoning, at least 1), not {shown(text)}"
    )
