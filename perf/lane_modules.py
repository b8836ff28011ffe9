"""A pytest plugin that says which modules of mad_eval a test selection never imported, so
the fast lane's claim to touch every module can be checked:

    PYTHONPATH=.:perf pytest -p lane_modules -m "not slow and not vllm"
"""

from __future__ import annotations

import pkgutil
import sys

import pytest


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    imported = set(sys.modules)  # before the walk below imports the packages it enters
    import mad_eval

    names = {m.name for m in pkgutil.walk_packages(mad_eval.__path__, "mad_eval.")}
    missing = sorted(names - imported)
    terminalreporter.write_line(
        f"mad_eval modules imported: {len(names) - len(missing)} of {len(names)}"
        + (f"; never: {', '.join(missing)}" if missing else "")
    )
