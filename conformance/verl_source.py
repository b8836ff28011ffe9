"""A verl file's text at a pinned commit, for the generators that run verl's own code
(dapo/generate.py, verl_maj/generate.py): from a working tree, whose HEAD must be that
commit, or from a bare clone."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def reference_source(verl: Path, commit: str, path: str) -> str:
    """`path`'s text in the verl checkout or bare clone `verl` at `commit`."""
    head = subprocess.run(
        ["git", "-C", str(verl), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    if (verl / path).is_file():
        if not head.startswith(commit):
            sys.exit(f"{verl} is at {head}, not {commit}: check the commit out first.")
        return (verl / path).read_text()
    return subprocess.run(
        ["git", "-C", str(verl), "show", f"{commit}:{path}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
