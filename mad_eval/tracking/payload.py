"""What a tracker is given of a run folder, read from its records alone: the config its manifest
records (redacted again, for safety), metrics.json's numbers with their intervals, the
per-round numbers as a step series, the paper tables that suit the run, and its files."""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mad_eval.sanitize import redact

if TYPE_CHECKING:
    import pandas as pd

    from mad_eval.reporting.results import Run
    from mad_eval.tracking.base import Group

# metrics.json's lists of per-round rows, logged as step series (step = round or after_round).
SERIES = {"rounds": "round", "cost_by_round": "round", "stopping": "after_round"}
# The manifest's parts that make a tracked run's config: what the run asked, not when.
CONFIG_PARTS = ("config", "operational", "benchmark", "protocol", "prompt", "serving", "team",
                "versions", "git_commit")  # fmt: skip


@dataclass
class Payload:
    """One run folder as trackers take it."""

    root: Path
    name: str  # the folder's name: the tracked run is named like it
    key: str  # stable for the folder's life: the tracked run's id
    config: dict[str, Any]
    metrics: dict[str, float]
    series: dict[str, list[tuple[int, float]]]  # name -> (step, value), in step order
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)

    def fingerprint(self, group: Group | None = None) -> str:
        """What is sent, and in which group, hashed: the same records send nothing new."""
        grouped = [group.name, group.source] if group else None
        sent = [self.name, grouped, self.config, self.metrics, self.series]
        text = json.dumps(sent, sort_keys=True)
        tables = [frame.to_csv(index=False) for _, frame in sorted(self.tables.items())]
        return hashlib.sha256("\n".join([text, *tables]).encode()).hexdigest()


def payload(run: Run) -> Payload:
    """`run`'s payload, its config from its manifest as manifest.json holds it."""
    manifest = run.manifest.to_dict()
    created = str(manifest.get("created") or "")
    key = hashlib.sha256(f"{created}\n{run.root.name}".encode()).hexdigest()[:16]
    config = redact({part: manifest[part] for part in CONFIG_PARTS if part in manifest})
    for template in (config.get("prompt") or {}).get("prompt_templates", {}).values():
        if isinstance(template, dict):  # the file and its hash say it; the artifact holds it
            template.pop("text", None)
            template.pop("data", None)
    return Payload(
        run.root,
        run.root.name,
        key,
        config,
        numbers(run),
        series(run.metrics),
        tables(run),
    )


def numbers(run: Run) -> dict[str, float]:
    """metrics.json's numbers by flat name: its top-level numbers, a section's numbers as
    section/name, each transition's as transitions/0-1/name, an interval's ends as name_ci_low
    and name_ci_high, and the headline's intervals and paired p-value (the console's)."""
    found: dict[str, float] = {}
    for key, value in run.metrics.items():
        if _number(value):
            found[key] = float(value)
        elif isinstance(value, dict):
            found |= {f"{key}/{k}": float(v) for k, v in value.items() if _number(v)}
        elif key.endswith("_ci") and isinstance(value, list) and len(value) == 2:
            pair = zip(("low", "high"), value, strict=True)
            found |= {f"{key}_{end}": float(v) for end, v in pair if _number(v)}
    for row in run.metrics.get("transitions") or []:
        where = f"transitions/{row.get('from_round')}-{row.get('to_round')}"
        found |= {
            f"{where}/{k}": float(v) for k, v in row.items() if _number(v) and "round" not in k
        }
    for key, interval in run.intervals().items():
        ends = {"ci_low": interval.low, "ci_high": interval.high, "p": interval.p}
        found |= {
            f"{key}_{end}": float(v) for end, v in ends.items() if v is not None and _number(v)
        }
    return found


def series(metrics: dict[str, Any]) -> dict[str, list[tuple[int, float]]]:
    """The per-round rows as series: rounds/vote_accuracy, stopping/accuracy, ... by step."""
    found: dict[str, list[tuple[int, float]]] = {}
    for section, step in SERIES.items():
        for row in metrics.get(section) or []:
            if not isinstance(row, dict) or not isinstance(row.get(step), int):
                continue
            for name, value in row.items():
                if name != step and _number(value):
                    found.setdefault(f"{section}/{name}", []).append((row[step], float(value)))
    return found


def layouts_for(run: Run) -> list[str]:
    """The paper tables one run fills: its headline, then per round, transitions and cost,
    and the judge's scores once it is judged."""
    if not run.voted:
        return ["rouge", "cost"]
    if run.rounds == 0:
        return ["single", "cost"]
    judged = ["critique"] if run.verdicts else []
    return ["debate", "rounds", "transitions", "cost", *judged]


def tables(run: Run) -> dict[str, pd.DataFrame]:
    """`layouts_for(run)`'s tidy frames (as `mad-eval table --format csv` has them), by layout."""
    from mad_eval.reporting.tables import tidy_all

    names = layouts_for(run)
    found = {}
    for name, frame in zip(names, tidy_all([run], names), strict=True):
        if "run_dir" in frame.columns:  # the folder by name: however the path was spelled
            frame["run_dir"] = run.root.name
        if not frame.empty:
            found[name] = frame
    return found


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
