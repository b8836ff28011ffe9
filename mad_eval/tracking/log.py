"""Logging finished run folders to trackers, once: each folder keeps in tracked.json what it
sent where (a fingerprint of it: store.tracked), so running the same command again sends
nothing it sent before and a changed folder updates its tracked run, never a second one. A tracker
that fails is given up for the rest of the command with one warning; the records stay the
truth, and `mad-eval log` sends them later."""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from mad_eval.progress import Listener
from mad_eval.records import shown
from mad_eval.sanitize import outward
from mad_eval.store.files import StoreError
from mad_eval.store.tracked import copy_own_files, read_tracked, write_tracked
from mad_eval.tracking.base import TRACKERS, Group, Target, Tracker, TrackerFailed, TrackingError
from mad_eval.tracking.payload import Payload, payload

if TYPE_CHECKING:
    from mad_eval.reporting.results import Run


@dataclass
class Tracked:
    """What a command sent: each folder and target, and the targets given up on."""

    logged: list[Logged]
    failed: list[str]


@dataclass(frozen=True)
class Logged:
    """One run folder sent to one tracker: where, and the tracked run's id (None: it was
    sent before and nothing changed, so nothing was sent)."""

    folder: Path
    target: str
    id: str | None


def targets(given: str | Sequence[str] | None, option: str = "--log") -> list[Target]:
    """`--log` (or `option`) values checked: an unknown tracker or key, or a tracker whose
    package is missing, is refused before any work."""
    from mad_eval.tracking.base import parse_target

    if given is None:
        return []
    listed = [given] if isinstance(given, str) else list(given)
    return [parse_target(value, option) for value in listed]


def track(
    runs: Iterable[Run],
    given: Sequence[Target],
    listener: Listener,
    group: Group | None = None,
    folders: Sequence[Path] | None = None,
) -> Tracked:
    """Send each run to each target (a group's runs under one W&B group or MLflow parent run),
    the runs read one at a time (`folders`: all of theirs, for a failure's message; by default
    those read so far). Nothing here fails the caller: a target whose tracker cannot be
    loaded, or that fails on any run, is warned about once and given up."""
    done = Tracked([], [])
    live: list[tuple[Target, Tracker]] = []
    seen: list[Path] = []

    def give_up(target: Target, tracker: Tracker | None, exc: Exception) -> None:
        done.failed.append(str(target))
        named = list(folders) if folders is not None else seen
        listener.warn("tracking", _failure(target, tracker, named, group is not None, exc))

    for target in given:
        try:
            live.append((target, TRACKERS.get(target.tracker)(dict(target.options))))
        except Exception as exc:
            give_up(target, None, exc)
    try:
        for run in runs:
            seen.append(run.root)
            _send(run, live, group, listener, done.logged, give_up)
    finally:
        for _, tracker in live:
            with contextlib.suppress(Exception):
                tracker.close()
    return done


def _send(
    run: Run,
    live: list[tuple[Target, Tracker]],
    group: Group | None,
    listener: Listener,
    logged: list[Logged],
    give_up: Callable[[Target, Tracker, Exception], None],
) -> None:
    """One run to every live target: its payload worked out and its files staged once, and
    only for a target that has not had these records (in this group) yet; a target that
    fails leaves `live`."""
    sent: Payload | None = None
    with contextlib.ExitStack() as stack:
        files: Path | None = None
        for target, tracker in list(live):
            try:
                if sent is None:
                    sent = payload(run)
                place = f"{target.tracker} {tracker.where()}"
                slot = hashlib.sha256(place.encode()).hexdigest()[:16]
                fingerprint = sent.fingerprint(group)
                if read_tracked(run.root).get(slot, {}).get("fingerprint") == fingerprint:
                    logged.append(Logged(run.root, place, None))
                    continue
                if files is None:
                    files = stack.enter_context(staged(run.root))
                tracked = tracker.log(sent, files, group)
            except Exception as exc:  # a service's, or our reading of a damaged folder
                live.remove((target, tracker))
                give_up(target, tracker, exc)
                continue
            entry = {"tracker": target.tracker, "where": tracker.where(), "id": tracked}
            try:
                write_tracked(
                    run.root, {**read_tracked(run.root), slot: entry | {"fingerprint": fingerprint}}
                )
            except StoreError as exc:
                listener.warn("tracking", str(exc))
            listener.say(f"{run.root.name}: logged to {place} as {tracked}.")
            logged.append(Logged(run.root, place, tracked))


def _failure(
    target: Target, tracker: Tracker | None, folders: list[Path], together: bool, exc: Exception
) -> str:
    """The one sentence a failed target gets: what failed, and how to send the records later."""
    if isinstance(exc, TrackingError):  # the tracker's package is not installed
        return outward(f"{exc} Nothing was logged; the records are unchanged.")
    why = str(exc) if isinstance(exc, TrackerFailed) else f"{type(exc).__name__}: {exc}"
    why = outward((why.strip().splitlines() or ["no reason given"])[0])[:300]
    where = f" ({tracker.where()})" if tracker is not None else ""
    roots = [str(folder) for folder in folders]
    # A group's folders (an experiment's cells): the folder holding them, which log reads.
    named = os.path.commonpath(roots) if together and len(roots) > 1 else " ".join(roots)
    return outward(  # a tracking URI may hold a password: every listener gets it hidden
        f"could not log to {target.tracker}{where}: {why}; the records are "
        f"unchanged: send them later with mad-eval log {named} --to {shown(str(target), 200)}"
    )


@contextlib.contextmanager
def staged(root: Path) -> Iterator[Path]:
    """What a tracker uploads: a private copy of the run folder's own files (store.tracked),
    so a link planted in the folder never sends what it points at, and the site `mad-eval
    view` makes of it, under site/."""
    with tempfile.TemporaryDirectory(prefix="mad-eval-tracked-") as scratch:
        copy = Path(scratch) / root.name
        copy.mkdir()
        copy_own_files(root, copy)
        _site(root, copy / "site")
        yield copy


def _site(root: Path, out: Path) -> None:
    from mad_eval.viewer.site import build_site

    build_site([root], out)
