"""`mad-eval view`: run folders as a static site to read their debates in a browser."""

from __future__ import annotations

from pathlib import Path

from mad_eval import api
from mad_eval.cli import options
from mad_eval.cli.app import app
from mad_eval.cli.ui import console, fail, one_sentence

RUN_DIRS = options.argument(
    "run_dirs",
    list[Path],
    metavar="RUN",
    help="Run directories, one or more, or folders holding them (results/, an experiment's "
    "folder): every run folder below is shown.",
)
# The site's folder is the API's default; opening and serving are the command's own.
DEFAULTS = {**options.defaults_of(api.view), "open": False, "serve": None}


@options.command(app, ["out", "force", "open", "serve"], DEFAULTS, options.VIEW, [RUN_DIRS])
def view(
    run_dirs: list[Path], out: Path | None, force: bool, open: bool, serve: int | None
) -> None:
    """Write a static site to read the runs' debates in a browser: each run's Maj, Debate
    and Δ and its alerts, the debates in question order with filters (right → wrong, split
    votes, failed turns, ...) and previous/next through them, a round's replies side by
    side with LaTeX typeset, each reply's prompt and the judge's verdict, a vote a tie
    decided marked with its tie; two or more runs side by side, with their paired votes and
    McNemar's exact p.

    The site is plain files (KaTeX included): index.html opens from file:// with no server
    and no network. By default it goes to a folder named for the runs given, under
    results/view/; it replaces a site of other runs only with --force, and says what it
    replaced.
    """
    if serve is not None and not 1 <= serve <= 65535:
        raise fail(f"--serve must be a port from 1 to 65535, got {serve}.")
    with one_sentence():
        from mad_eval.viewer import build_site

        written = build_site(run_dirs, out, force)  # a folder of runs: each of them
        console.print(written.sentence())
        index = written.index
        if serve is None:
            if open:
                _open(index.resolve().as_uri())
            return
        from mad_eval.viewer import make_server

        server = make_server(index.parent, serve)
        url = server.url
        console.print(f"Serving {url} (Ctrl-C stops).")
        if open:
            _open(url)
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            server.server_close()


def _open(url: str) -> None:
    import webbrowser

    if not webbrowser.open(url):
        console.print(f"No browser could be opened here; open {url} yourself.")
