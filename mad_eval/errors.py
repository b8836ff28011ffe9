"""The base of every error a user can cause: a setting, file or server that cannot work.

Each module keeps its own error class (ConfigError, StoreError, ...), named for where the
problem is; all of them derive from UserError, so the command line catches one class and
shows its message, one sentence naming the problem and the fix, without importing every
module that could raise one.
"""

import signal


class UserError(Exception):
    """A problem the user can fix; its message says what and how, in one sentence."""


class Interrupted(KeyboardInterrupt):
    """Ctrl-C, SIGTERM or SIGHUP stopped the work: every finished record (a turn, a
    verdict: `what`) is kept in `records`, and the same call resumes."""

    def __init__(self, sig: signal.Signals, records: str = "its run folder", what: str = "turn"):
        super().__init__(f"stopped by {sig.name}")
        self.signal, self.records, self.what = sig, records, what
