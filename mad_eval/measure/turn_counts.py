"""The turns family: metrics.json's plain counts of how the turns went (unparsed, failed,
cut off, retried, cached, refused, ...) and the share of prompt tokens a prefix cache can
skip. Sums over turns, with no formula over tallies."""

from __future__ import annotations

from mad_eval.grading.reasoning import holds_quoting_tags
from mad_eval.measure.base import Count, Family, Share
from mad_eval.records import Turn


def _live(t: Turn) -> bool:
    return not t.failed


def _shared(t: Turn) -> bool:
    """A turn whose prompt's shared prefix is known (prefix_share counts it)."""
    return bool(t.context_tokens) and t.prefix_tokens is not None


SUMS: tuple[Count | Share, ...] = (
    Count("turns", lambda t: 1),
    Count("unparsed", lambda t: _live(t) and t.answer is None),
    Share("unparsed_pct", "unparsed", "live", percent=True),
    # Cut off by the token limit before the reasoning ended: unparsed, never voted.
    Count("truncated_in_reasoning", lambda t: t.truncated_in_reasoning),
    Count("failed_turns", lambda t: t.failed),
    Count("length_stops", lambda t: _live(t) and t.finish_reason == "length"),
    Count("reasoning_turns", lambda t: _live(t) and bool(t.reasoning)),
    Count("context_cut_turns", lambda t: bool(t.cut_tokens)),
    Count("context_cut_tokens", lambda t: t.cut_tokens),
    # Serving: answers that needed retries, requests sent in all, answers from the cache.
    Count("retried_turns", lambda t: t.attempts > 1),
    Count("requests_sent", lambda t: t.attempts),
    Count("cached_turns", lambda t: t.cached),
    # Replies that wrote a tag prompts quote with: escaped wherever they were quoted.
    Count(
        "replies_with_quoting_tags",
        lambda t: holds_quoting_tags(t.text) or holds_quoting_tags(t.reasoning),
    ),
    # Answers the model declined to give (unparsed, in every denominator), and answers whose
    # usage held no token counts (recorded unknown).
    Count("refusals", lambda t: bool(t.refusal)),
    Count("usage_invalid", lambda t: bool(t.usage_invalid)),
    # The fraction of prompt tokens that repeat a prefix another agent already sent for the
    # same question and round: what vLLM's prefix cache can skip.
    Share("prefix_share", "shared_tokens", "context_tokens"),
    Count("live", _live, shown=False),
    # Failed turns whose request was sent (not a prompt too long to send): worth asking again.
    Count("failed_sent", lambda t: t.failed and t.attempts > 0, shown=False),
    Count("shared_tokens", lambda t: (t.prefix_tokens or 0) if _shared(t) else 0, shown=False),
    Count("context_tokens", lambda t: (t.context_tokens or 0) if _shared(t) else 0, shown=False),
)

FAMILY = Family(
    name="turns",
    console=("footer",),
    formulas=lambda context: {},
    sums=SUMS,
    per_run=("turns", "unparsed", "truncated_in_reasoning", "failed_turns"),
    by_round=("prefix_share", "truncated_in_reasoning"),
)
