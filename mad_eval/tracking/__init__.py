"""Sending finished run folders to the trackers researchers already use (Weights & Biases,
MLflow, or a plug-in's under the entry-point group mad_eval.trackers): `--log` on run, single,
judge and experiment run, and `mad-eval log` for folders made before. Logging reads the
records after the work and never fails it (docs/how-to/track-runs.md)."""

from mad_eval.tracking.base import TRACKERS, Group, Target, Tracker, TrackerFailed, TrackingError
from mad_eval.tracking.log import Logged, Tracked, targets, track

__all__ = [
    "TRACKERS",
    "Group",
    "Logged",
    "Target",
    "Tracked",
    "Tracker",
    "TrackerFailed",
    "TrackingError",
    "targets",
    "track",
]
