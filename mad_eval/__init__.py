"""mad-eval: multi-agent debate evaluation harness.

The library's calls (mad_eval.api) are available here: mad_eval.run(...), single, judge,
report, load_run, load_runs, table, plot, train_pairs, train_prompts, experiment, run_plan,
experiment_plan, experiment_tables, view. Each imports what it needs when called, so
`import mad_eval` (and the command line's start) stays light."""

from mad_eval.api import *  # noqa: F403
from mad_eval.api import __all__ as __all__

__version__ = "0.1.0"
