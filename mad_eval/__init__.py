"""mad-eval: multi-agent debate evaluation harness.

The library's calls (mad_eval.api) are available here: mad_eval.run(...), single, judge,
report, load_run, load_runs, experiment, experiment_tables. They load on first use, so
`import mad_eval` (and the command line's start) stays light."""

from typing import Any

__version__ = "0.1.0"

_API = (
    "Listener",
    "experiment",
    "experiment_tables",
    "judge",
    "load_run",
    "load_runs",
    "report",
    "run",
    "single",
)


def __getattr__(name: str) -> Any:
    if name in _API:
        from mad_eval import api

        return getattr(api, name)
    raise AttributeError(f"module 'mad_eval' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_API])
