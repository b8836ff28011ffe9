"""metrics.json read back: what a run folder's last report recorded besides its numbers (its
alerts, the single run it was paired with). Every number is recomputed from the records, so
a metrics.json that cannot be read is as none."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mad_eval.foreign import read_json

METRICS_FILE = "metrics.json"


def read_metrics(root: Path) -> dict[str, Any] | None:
    """A run folder's metrics.json as written, or None where it has none, or none that reads
    as one (no regular file, larger than any report writes, no JSON object)."""
    try:
        found = read_json(Path(root) / METRICS_FILE)
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) else None
