"""Counts as a sentence says them: "1 round", "3 rounds"."""

from __future__ import annotations


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """`n` and the noun, singular for one (plural: the noun + "s" unless given)."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"
