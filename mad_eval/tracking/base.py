"""What every tracker is: a named service (`wandb`, `mlflow`) that takes a run folder's
numbers, config, tables and files as one tracked run, configured by `NAME:key=value,...`."""

from __future__ import annotations

import importlib.util
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from mad_eval.errors import UserError
from mad_eval.records import shown
from mad_eval.registry import Registry
from mad_eval.words import did_you_mean

if TYPE_CHECKING:
    from mad_eval.tracking.payload import Payload


class TrackingError(UserError, ValueError):
    """A `--log` target that cannot be: an unknown tracker or key, or a tracker whose package
    is not installed."""


class TrackerFailed(Exception):
    """The tracking service refused or could not be reached; the records stay the truth."""


@dataclass(frozen=True)
class Group:
    """Runs tracked together (an experiment's cells): the group's name, and the file or folder
    that stands for it."""

    name: str
    source: str


@dataclass(frozen=True)
class Target:
    """A tracker and its settings as `--log` gave them: `wandb:project=p,group=g`."""

    tracker: str
    options: dict[str, str] = field(default_factory=dict)
    given: str = ""  # as written, for messages

    def __str__(self) -> str:
        return self.given or self.tracker


class Tracker(ABC):
    """One tracking service. `keys` are the settings `--log NAME:key=value` takes, each with a
    line of help; `package` the module it needs (the pip extra mad-eval[NAME] installs it).
    A tracker is made once per command and logs each run folder with `log`; `close` ends what
    it opened for a group."""

    name: ClassVar[str]
    keys: ClassVar[dict[str, str]]
    package: ClassVar[str]  # the module it imports to log, from the pip extra of its name

    def __init__(self, options: dict[str, str]) -> None:
        self.options = options

    @abstractmethod
    def where(self) -> str:
        """Where runs go, in words, with no secret in them (the marker keeps it)."""

    @abstractmethod
    def log(self, payload: Payload, files: Path, group: Group | None) -> str:
        """Create or update the tracked run of `payload` (the one whose key it holds), with
        the folder `files` (a private copy of the run folder's files and its site) as an
        artifact; return its id. Raises TrackerFailed when the service fails."""

    def close(self) -> None:
        """End whatever the tracker opened (a group's parent run)."""


def parse_target(given: str, option: str = "--log") -> Target:
    """`NAME[:key=value,...]`, its tracker known and its keys the tracker's, refused in one
    sentence naming what is wrong and what would be accepted."""
    if not isinstance(given, str) or not given.strip():
        known = ", ".join(TRACKERS)
        raise TrackingError(f"{option} needs a tracker ({known}), got {shown(given, 80)}.")
    name, _, rest = given.strip().partition(":")
    if name not in TRACKERS:
        raise TrackingError(f"{option} {shown(given, 80)}: {TRACKERS.unknown(name)}")
    tracker = TRACKERS.get(name)
    if importlib.util.find_spec(tracker.package) is None:  # looked for, not imported
        raise TrackingError(
            f"{option} {name} needs the {tracker.package} package, which is not installed: "
            f"pip install 'mad-eval[{name}]'."
        )
    keys = tracker.keys
    options: dict[str, str] = {}
    for part in rest.split(",") if rest else []:
        key, equals, value = part.partition("=")
        key = key.strip()
        if not equals or not key:
            raise TrackingError(
                f"{option} {shown(given, 80)}: {shown(part, 40)} is no key=value; write "
                f"{name}:key=value,... with keys {', '.join(keys)}."
            )
        if key not in keys:
            raise TrackingError(
                f"{option} {shown(given, 80)}: {name} takes no key {shown(key, 40)}"
                f"{did_you_mean(key, keys)}; it takes {', '.join(keys)}."
            )
        if key in options:
            raise TrackingError(f"{option} {shown(given, 80)}: {key} is given twice.")
        options[key] = value.strip()
    return Target(name, options, given.strip())


def _check(name: str, tracker: type[Tracker]) -> None:
    if not (isinstance(tracker, type) and issubclass(tracker, Tracker)):
        raise TrackingError(f"the tracker '{name}' is no mad_eval.tracking.Tracker class.")


# Plug-ins add trackers under the entry-point group mad_eval.trackers; a built-in's module
# imports nothing of its service until it logs.
TRACKERS: Registry[type[Tracker]] = Registry(
    "tracker", "mad_eval.trackers", error=TrackingError, check=_check
)
TRACKERS.add("wandb", "mad_eval.tracking.wandb_tracker:WandbTracker")
TRACKERS.add("mlflow", "mad_eval.tracking.mlflow_tracker:MlflowTracker")
