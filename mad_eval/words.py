"""Words as a sentence says them: counts ("1 round", "3 rounds") and the nearest name to a
mistyped one."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """`n` and the noun, singular for one (plural: the noun + "s" unless given)."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


def did_you_mean(name: str, known: Iterable[str], cutoff: float = 0.6) -> str:
    """The hint " (did you mean 'x'?)" for the known name nearest a mistyped one (difflib's
    ratio at least `cutoff`), else nothing."""
    near = difflib.get_close_matches(name, list(known), n=1, cutoff=cutoff)
    return f" (did you mean '{near[0]}'?)" if near else ""
