"""A run folder's side of tracking: tracked.json (what was sent to which tracker, so a folder
is sent once), and a private copy of the folder's own files for a tracker to upload."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from mad_eval.foreign import open_regular, read_json
from mad_eval.store.files import StoreError, write_json
from mad_eval.store.names import LOCK_FILE, TRACKED_FILE

NOT_SENT = {TRACKED_FILE, LOCK_FILE}  # bookkeeping, not records: never uploaded
_MOST = 1 << 20  # tracked.json is a few lines a tracker


def read_tracked(root: Path) -> dict[str, dict[str, Any]]:
    """tracked.json's entries by target; a missing, damaged or linked file is none (the
    folder is then sent again, to the same tracked runs)."""
    try:
        found = read_json(root / TRACKED_FILE, _MOST)
    except (OSError, ValueError, StoreError):
        return {}
    logged = found.get("logged") if isinstance(found, dict) else None
    if not isinstance(logged, dict):
        return {}
    return {key: entry for key, entry in logged.items() if isinstance(entry, dict)}


def write_tracked(root: Path, logged: dict[str, dict[str, Any]]) -> None:
    """tracked.json written whole (never through a link); StoreError when it cannot be."""
    write_json(
        root / TRACKED_FILE, {"logged": logged}, "free space; the tracked run is up to date."
    )


def copy_own_files(root: Path, into: Path) -> list[str]:
    """The folder's own regular files (not below it, not its bookkeeping) copied into `into`,
    each opened without following a link: a link or anything else planted there is left
    out. The names copied."""
    copied = []
    for path in sorted(root.iterdir()):
        if path.name in NOT_SENT or path.is_symlink() or not path.is_file():
            continue
        try:
            with open_regular(path) as source, open(into / path.name, "xb") as kept:
                shutil.copyfileobj(source, kept)
        except OSError:  # not a regular file after all, or gone: not sent
            (into / path.name).unlink(missing_ok=True)
            continue
        copied.append(path.name)
    return copied
