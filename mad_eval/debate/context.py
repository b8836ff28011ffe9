"""Fitting debate prompts into the model's context window, and measuring prefix sharing.

A debate prompt quotes several agents' previous responses; when they do not fit
(max model length minus max tokens), the quoted reasoning goes first, each losing its start;
then each quoted response loses its start, so its end, with the final \\boxed{} answer,
survives.
"""

from __future__ import annotations

import logging
import math
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from mad_eval.data import hub as online
from mad_eval.errors import UserError
from mad_eval.records import Messages, shown
from mad_eval.sanitize import valid_text

Encoded = np.ndarray
# Real BPE tokenizers reach ~4 characters per token on prose but only 2.2-2.7 on LaTeX-dense
# math (MATH500 solutions), so 3 would under-count there; 2 over-counts, the safe side.
CHARS_PER_TOKEN = 2
PROMPT_MARGIN = 32  # tokens a guessed rendering may miss (a template's default system prompt)
CUT_MARKER = "[... the start of this response was cut to fit the context ...]\n"
REASONING_CUT_MARKER = "[... the start of this reasoning was cut to fit the context ...]\n"

_THINK_BLOCK = re.compile(r"<think>.*?</think>", re.DOTALL)
_HUB_ID = re.compile(r"[\w.-]+/[\w.-]+")


class ContextError(UserError, ValueError):
    """A prompt cannot fit its budget even with every quoted response cut away."""


def strip_think(text: str) -> str:
    """The response without its reasoning blocks, which peers need not read."""
    text = _THINK_BLOCK.sub("", text)
    # Templates that put <think> in the prompt leave only the closing tag in the response.
    if "</think>" in text:
        text = text.split("</think>", 1)[1]
    return text.strip()


def _common_prefix(a: np.ndarray, b: np.ndarray) -> int:
    """Length of the longest common prefix of two arrays, compared without a Python loop."""
    n = min(len(a), len(b))
    differ = np.flatnonzero(a[:n] != b[:n])
    return int(differ[0]) if differ.size else n


def raw_render(messages: Messages) -> str:
    """The raw template for base checkpoints: each message's text, then a blank line."""
    return "".join(m["content"] + "\n\n" for m in messages)


def bare_render(messages: Messages) -> str:
    """The bare template: the messages' texts as they are, nothing added, so a prompt
    template owns every separator (Debate-or-Vote sends its prompts so)."""
    return "".join(m["content"] for m in messages)


RAW_TEMPLATE = "raw: each message's text followed by a blank line"
BARE_TEMPLATE = "bare: the messages' texts as they are, nothing added"
# The renderings that need no chat template, by --template name.
TEXT_RENDERINGS = {"raw": (raw_render, RAW_TEMPLATE), "bare": (bare_render, BARE_TEMPLATE)}


def _plain_render(messages: Messages) -> str:
    """A template-like rendering: role headers stand in for a real template's tokens."""
    parts = [f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages]
    return "".join(parts) + "<|im_start|>assistant\n"


class TokenCounter(ABC):
    """Counts prompt tokens the way the server will, or over-estimates them."""

    name: str
    exact: bool
    template: str = "chat"  # chat: the tokenizer's chat template; raw, bare: TEXT_RENDERINGS

    @abstractmethod
    def encode_messages(self, messages: Messages) -> Encoded: ...

    @abstractmethod
    def render(self, messages: Messages, template_kwargs: Mapping[str, Any] | None = None) -> str:
        """The prompt text a text-prompt backend sends, the chat template given the switches
        `template_kwargs` (None: the counter's own); ContextError if it cannot be made."""

    @property
    def template_source(self) -> str | None:
        """The template as the manifest records it."""
        found = TEXT_RENDERINGS.get(self.template)
        return found[1] if found else None

    def with_template_kwargs(self, kwargs: Mapping[str, Any]) -> TokenCounter:
        """This counter, rendering with the chat template's switches `kwargs`."""
        return self

    @abstractmethod
    def count(self, encoded: Encoded) -> int: ...

    @abstractmethod
    def count_text(self, text: str) -> int: ...

    @abstractmethod
    def tail(self, text: str, n_tokens: int) -> str: ...

    @abstractmethod
    def shared_prefix(self, a: Encoded, b: Encoded) -> int: ...


class HFCounter(TokenCounter):
    """A transformers tokenizer, rendering prompts as vLLM's chat endpoint does."""

    def __init__(
        self,
        tokenizer: Any,
        name: str,
        template: str = "chat",
        template_kwargs: Mapping[str, Any] | None = None,
    ) -> None:
        self.tokenizer = tokenizer
        self.name = f"hf:{name}"
        self.template = template
        # The chat template's switches (chat_template_kwargs: enable_thinking, ...), as the
        # server applies them.
        self.template_kwargs = dict(template_kwargs or {})
        self.has_chat_template = getattr(tokenizer, "chat_template", None) is not None
        self.exact = template in TEXT_RENDERINGS or self.has_chat_template

    def with_template_kwargs(self, kwargs: Mapping[str, Any]) -> TokenCounter:
        if not kwargs:
            return self
        return HFCounter(self.tokenizer, self.name.removeprefix("hf:"), self.template, kwargs)

    def _ids(self, text: str) -> np.ndarray:
        # A recorded turn may hold a lone surrogate, which a tokenizer refuses.
        ids = self.tokenizer.encode(valid_text(text), add_special_tokens=False)
        return np.asarray(ids, dtype=np.int64)

    def render(self, messages: Messages, template_kwargs: Mapping[str, Any] | None = None) -> str:
        if self.template in TEXT_RENDERINGS:
            return TEXT_RENDERINGS[self.template][0](messages)
        if not self.has_chat_template:
            raise ContextError(
                f"tokenizer {shown(self.name.removeprefix('hf:'), 80)} has no chat template to "
                "render prompts with; pass --tokenizer with one, or --template raw for a base "
                "model."
            )
        switches = self.template_kwargs if template_kwargs is None else template_kwargs
        return self.tokenizer.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=True, **switches
        )

    @property
    def template_source(self) -> str | None:
        if self.template == "chat" and self.has_chat_template:
            return str(self.tokenizer.chat_template)
        return super().template_source

    def encode_messages(self, messages: Messages) -> Encoded:
        return self._ids(self.render(messages) if self.exact else _plain_render(messages))

    def count(self, encoded: Encoded) -> int:
        return len(encoded) + (0 if self.exact else PROMPT_MARGIN)

    def count_text(self, text: str) -> int:
        return len(self._ids(text))

    def tail(self, text: str, n_tokens: int) -> str:
        if n_tokens <= 0:
            return ""
        ids = self._ids(text)[-n_tokens:].tolist()
        piece = self.tokenizer.decode(
            ids, skip_special_tokens=False, clean_up_tokenization_spaces=False
        )
        # A cut inside a multi-byte character decodes to a replacement character.
        return piece if text.endswith(piece) else piece.lstrip("\ufffd")

    def shared_prefix(self, a: Encoded, b: Encoded) -> int:
        if len(a) == len(b) and _common_prefix(a, b) == len(a):
            return self.count(a)  # an identical prompt repeats all of it, margin included
        return _common_prefix(a, b)


class EstimateCounter(TokenCounter):
    """No tokenizer: characters / CHARS_PER_TOKEN, rounded up, plus a margin per prompt."""

    name = "estimate"
    exact = False

    def __init__(self, template: str = "chat") -> None:
        self.template = template

    def render(self, messages: Messages, template_kwargs: Mapping[str, Any] | None = None) -> str:
        if self.template in TEXT_RENDERINGS:
            return TEXT_RENDERINGS[self.template][0](messages)
        raise ContextError(
            "rendering prompts with the model's chat template needs its tokenizer; "
            "pass --tokenizer, or --template raw for a base model."
        )

    def encode_messages(self, messages: Messages) -> Encoded:
        # Code points, so prefixes compare in numpy like token ids do.
        return np.frombuffer(
            _plain_render(messages).encode("utf-32-le", "surrogatepass"), dtype=np.uint32
        )

    def count(self, encoded: Encoded) -> int:
        return math.ceil(len(encoded) / CHARS_PER_TOKEN) + PROMPT_MARGIN

    def count_text(self, text: str) -> int:
        return math.ceil(len(text) / CHARS_PER_TOKEN)

    def tail(self, text: str, n_tokens: int) -> str:
        return text[-n_tokens * CHARS_PER_TOKEN :] if n_tokens > 0 else ""

    def shared_prefix(self, a: Encoded, b: Encoded) -> int:
        if len(a) == len(b) and _common_prefix(a, b) == len(a):
            return self.count(a)  # an identical prompt repeats all of it, margin included
        return _common_prefix(a, b) // CHARS_PER_TOKEN


@contextmanager
def _no_torch_notice() -> Iterator[None]:
    """Hide transformers' "PyTorch was not found" notice: we only need its tokenizers."""

    def keep(record: logging.LogRecord) -> bool:
        return "PyTorch was not found" not in record.getMessage()

    logger = logging.getLogger("transformers")
    logger.addFilter(keep)
    try:
        yield
    finally:
        logger.removeFilter(keep)


def _load_hf(name: str, template: str) -> HFCounter:
    return HFCounter(_tokenizer(name), name, template)


@cache
def _tokenizer(name: str) -> Any:
    with _no_torch_notice():
        from transformers import AutoTokenizer

    # The local cache first: offline, a hub lookup spends tens of seconds on retries.
    try:
        tokenizer = AutoTokenizer.from_pretrained(name, local_files_only=True)
    except Exception:
        if not Path(name).is_dir() and not online.hub_reachable():
            raise
        tokenizer = AutoTokenizer.from_pretrained(name)
    return tokenizer


# Cached too, so a hub id that cannot be reached is tried once, not once per agent.
@cache
def load_counter(
    tokenizer: str | None, model: str | None, template: str = "chat"
) -> tuple[TokenCounter, str | None]:
    """The counter for a model (None: no model whose tokenizer to look for, as simulated
    agents), and a warning to show the user (None when exact). `template` says how
    text-prompt backends render messages: chat (the tokenizer's chat template) or raw
    (raw_render) or bare (bare_render); the counter counts that rendering."""
    if tokenizer is not None:
        try:
            counter = _load_hf(tokenizer, template)
        except Exception as error:
            raise ContextError(
                f"cannot load tokenizer {shown(tokenizer, 80)} ({error.__class__.__name__}); "
                "give a local tokenizer folder or a hub id that can be reached."
            ) from error
        return counter, _template_warning(counter)
    if model is None:
        return EstimateCounter(template), None
    name = model.partition(":")[2] or model
    if Path(name).is_dir() or _HUB_ID.fullmatch(name):
        try:
            counter = _load_hf(name, template)
        except Exception:
            pass
        else:
            return counter, _template_warning(counter)
    return EstimateCounter(template), (
        f"no tokenizer found for model {shown(model, 80)}, so prompt lengths are estimated "
        f"at {CHARS_PER_TOKEN} characters per token; pass --tokenizer for exact counts."
    )


def _template_warning(counter: HFCounter) -> str | None:
    if counter.exact:
        return None
    return (
        f"tokenizer {shown(counter.name.removeprefix('hf:'), 80)} has no chat template, so prompt "
        f"lengths are counted on a plain rendering plus {PROMPT_MARGIN} tokens."
    )


@dataclass(frozen=True, eq=False)  # eq would compare id arrays elementwise and fail
class Fitted:
    """A prompt as it will be sent, with its token count and what fitting cut."""

    messages: Messages
    encoded: Encoded
    tokens: int  # prompt tokens as counted by the counter
    cut: int  # tokens removed from quoted responses to fit the budget (0 = nothing cut)


def _water_level(lengths: list[int], room: int, marker: int) -> int:
    """The largest cap L with sum(n if n <= L else L + marker) <= room; 0 if none fits
    (the caller then finds out by counting the prompt).

    The sum is not monotone in L (crossing a length adds a marker), so each range of L in
    which the same k longest responses are cut is solved on its own, highest range first.
    """
    order = sorted(lengths, reverse=True)
    for k in range(1, len(order) + 1):
        low = order[k] if k < len(order) else 0
        high = order[k - 1] - 1
        level = (room - sum(order[k:])) // k - marker
        if low <= high and level >= low:
            return min(level, high)
    return 0


@dataclass(frozen=True)
class Reply:
    """A quoted reply as the fitter cuts it: its final content, and the part of its
    reasoning the reader is shown ("" for none)."""

    text: str
    reasoning: str = ""


class Fitter:
    """Shortens the quoted replies of a prompt until it fits its budget: their reasoning
    first (longest first), and only when no reasoning is left, their final content."""

    def __init__(self, counter: TokenCounter, strip_think: bool = False) -> None:
        self.counter = counter
        self.strip_think = strip_think  # for runs recorded before reasoning was split off
        # The same N responses are quoted in N agents' prompts each round.
        self._count_text = lru_cache(maxsize=256)(counter.count_text)
        self._tail = lru_cache(maxsize=256)(counter.tail)

    def tail(self, text: str, n_tokens: int) -> str:
        """The last `n_tokens` tokens of `text`."""
        return self._tail(text, n_tokens)

    def count_text(self, text: str) -> int:
        return self._count_text(text)

    def _encode(self, messages: Messages) -> tuple[Encoded, int]:
        encoded = self.counter.encode_messages(messages)
        return encoded, self.counter.count(encoded)

    def fit(
        self, build: Callable[[list[Reply]], Messages], replies: list[Reply], budget: int | None
    ) -> Fitted:
        """The prompt build(shortened) makes, where shortened are `replies` cut to fit
        `budget` (no limit when None); build must quote one reply per item, in order."""
        if self.strip_think:
            replies = [Reply(strip_think(r.text), r.reasoning) for r in replies]
        messages = build(replies)
        encoded, tokens = self._encode(messages)
        if budget is None or tokens <= budget:
            return Fitted(messages, encoded, tokens, 0)
        if not replies:
            raise ContextError(
                f"the question prompt needs {tokens} tokens, but the budget is {budget} tokens "
                "(max model length minus max tokens)."
            )
        dropped = 0  # reasoning tokens cut away whole
        if any(r.reasoning for r in replies):
            whole = replies

            def reasoning_cut(cut: list[str]) -> Messages:
                return build([Reply(r.text, c) for r, c in zip(whole, cut, strict=True)])

            try:
                return self._shorten(
                    reasoning_cut,
                    [r.reasoning for r in replies],
                    budget,
                    tokens,
                    REASONING_CUT_MARKER,
                )
            except ContextError:
                dropped = sum(self._count_text(r.reasoning) for r in replies)
                replies = [Reply(r.text) for r in replies]
                messages = build(replies)
                encoded, tokens = self._encode(messages)
                if tokens <= budget:
                    return Fitted(messages, encoded, tokens, dropped)
        fitted = self._shorten(
            lambda cut: build([Reply(c) for c in cut]),
            [r.text for r in replies],
            budget,
            tokens,
            CUT_MARKER,
        )
        return Fitted(fitted.messages, fitted.encoded, fitted.tokens, fitted.cut + dropped)

    def _shorten(
        self,
        build: Callable[[list[str]], Messages],
        texts: list[str],
        budget: int,
        tokens: int,
        marker_text: str,
    ) -> Fitted:
        """Cut the starts of `texts`, longest first, until build(texts) fits `budget`
        (`tokens`: the prompt's count with them whole); ContextError if even cutting each
        to its marker is not enough."""
        lengths = [self._count_text(t) for t in texts]
        marker = self._count_text(marker_text)
        # Pieces' counts are not exactly additive, so the room is corrected after each try.
        room = budget - (tokens - sum(lengths))
        cap = _water_level(lengths, room, marker)
        while True:
            cut_texts = [
                t if n <= cap else marker_text + self._tail(t, cap)
                for t, n in zip(texts, lengths, strict=True)
            ]
            messages = build(cut_texts)
            encoded, tokens = self._encode(messages)
            if tokens <= budget:
                cut = sum(n - cap for n in lengths if n > cap)
                return Fitted(messages, encoded, tokens, cut)
            if cap == 0:
                break
            room -= tokens - budget
            cap = min(cap - 1, _water_level(lengths, room, marker))

        # `tokens` is now the prompt with every quoted text cut down to its marker.
        raise ContextError(
            f"the prompt needs {tokens} tokens even with every quoted response cut away, but "
            f"the budget is {budget} tokens (max model length minus max tokens)."
        )


def prefix_tokens(prompts: list[Fitted], counter: TokenCounter) -> list[int]:
    """For each prompt, the longest prefix in tokens it shares with an earlier prompt
    (what a prefix cache can reuse if the prompts are sent in this order)."""
    return [
        max((counter.shared_prefix(p.encoded, q.encoded) for q in prompts[:i]), default=0)
        for i, p in enumerate(prompts)
    ]
