"""The viewer's static site: run folders read into RunViews, those turned into files (a
pure function), the files written next to the page's assets, and an optional local server.

The page loads its data from file:// by <script> tags (Chromium refuses fetch() there):
every data file is one call `MADV.loaded(name, value)`, its JSON escaped so no text a
model wrote can end the string or the script."""

from __future__ import annotations

import functools
import hashlib
import http.server
import json
import os
import re
import secrets
import shutil
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from mad_eval.errors import UserError
from mad_eval.store.files import make_folder, refuse_link, refuse_records, write_atomically
from mad_eval.viewer.data import (
    TAGS,
    RunView,
    alerts_of,
    debate_row,
    debates_of,
    paired_votes,
    question_order,
    summary,
)
from mad_eval.viewer.markup import render_markdown, text_html
from mad_eval.words import counted

MARKER = ".mad-eval-view"  # an --out folder holding it was written by this command
ASSETS = ("index.html", "app.js", "style.css")
KATEX = "katex"  # its folder of assets, copied whole (assets/katex/README.md)
THEN = "give another --out folder."
VIEWS = Path("results") / "view"  # where sites go by default, each in a folder named for its runs
NAME_CHARS = 80  # the longest default site folder name
SAFE = re.compile(r"[^A-Za-z0-9._+=-]+")  # what else a folder name is made of becomes "_"


class ViewError(UserError):
    """A run or an --out folder the viewer cannot use; the message says which and why."""


def as_script(name: str, value: Any) -> str:
    """`value` as a script that hands it to the page: valid JavaScript whatever its text
    holds (ASCII only, so U+2028, NUL and lone surrogates are escapes; `<`, `>` and `&`
    escaped too, so `</script>` never appears even if the file is inlined)."""
    text = json.dumps([name, value], ensure_ascii=True, allow_nan=False)
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return f"MADV.loaded.apply(null, {text});\n"


def load_view(root: Path) -> RunView:
    """A run folder read for the viewer: its results (as `mad-eval report` computes them),
    its questions and a replay of its prompts where those can be had."""
    from mad_eval.data.benchmarks import DataMissingError
    from mad_eval.debate.replay import Replay, run_questions
    from mad_eval.reporting.results import load_run
    from mad_eval.store.files import StoreError

    root = Path(root)
    if not root.is_dir():
        raise ViewError(f"{root} is not a folder; give a run folder (one holding manifest.json).")
    run = load_run(root)
    questions, missing, replay = None, None, None
    try:
        questions = run_questions(root, run.manifest)
    except (StoreError, OSError, ValueError) as exc:
        if isinstance(exc, DataMissingError):  # `view` has no data_dir: name what works
            exc = exc.advised("env")
        missing = f"The run's questions cannot be read ({exc})"
    if questions is not None:
        replay = Replay(run.manifest, questions)
    return RunView(run, questions, missing, replay)


def site_files(views: list[RunView]) -> Iterator[tuple[str, str]]:
    """Every data file of the site, as (path under the site, text): each debate's page,
    then one index of every run's numbers and per-debate rows (what filters read), of each
    two voted runs' paired votes on the debates every run has (`paired_votes`, "i,j" with
    i < j), and of the data files
    by name: the page loads those files only, never a path read from its URL."""
    runs: list[dict[str, Any]] = []
    files: dict[str, str] = {}
    names = [Path(view.run.root).name for view in views]
    for i, view in enumerate(views):
        verdicts = {v.key: v for v in view.run.verdicts}
        rows = []
        for n, turns in enumerate(debates_of(view)):
            if not turns:
                continue
            name = f"{i}/{n}"
            row, page = debate_row(view, turns, verdicts, name)
            row["done"] = n
            snippet = text_html(row["text"])
            if snippet and "<span" in snippet:  # only where it has a formula to typeset
                row["text_html"] = snippet
            page["question"]["text_html"] = text_html(page["question"]["text"])
            for turn in page["turns"]:
                turn["text_html"] = render_markdown(turn["text"])
                turn["reasoning_html"] = render_markdown(turn["reasoning"])
            rows.append(row)
            files[name] = f"data/{name}.js"
            yield files[name], as_script(name, page)
        manifest = view.run.manifest
        rows.sort(key=lambda row: (question_order(row["question"]), row["seed_run"]))
        runs.append(
            {
                # The folder's name, or its whole path where two folders share a name.
                "label": names[i] if names.count(names[i]) == 1 else str(view.run.root),
                "method": " ".join(view.run.describe().values()),
                "folder": str(view.run.root),
                "benchmark": view.run.benchmark,
                "kind": view.run.kind,
                "voted": view.run.voted,
                "rule": view.run.score,
                "agents": view.run.config.agents,
                "rounds": view.rounds,
                "protocol": view.run.config.protocol,
                "models": sorted({seat.model for seat in manifest.team}) or [view.run.config.model],
                "summary": summary(view),
                "alerts": alerts_of(view.run),
                "judged": bool(view.run.verdicts),
                "questions_note": view.missing,
                "debates": rows,
            }
        )
    # The debates every run has: those the side-by-side page lists.
    keys = [{row["key"] for row in run["debates"]} for run in runs]
    shared = set.intersection(*keys) if keys else set()
    pairs = {
        f"{i},{j}": paired_votes(runs[i]["debates"], runs[j]["debates"], shared)
        for i in range(len(runs))
        for j in range(i + 1, len(runs))
        if runs[i]["voted"] and runs[j]["voted"]
    }
    index = {"runs": runs, "tags": TAGS, "files": files, "pairs": pairs}
    yield "data/index.js", as_script("index", index)


@dataclass(frozen=True)
class Written:
    """A site written: its index.html, how many runs it shows and what it replaced (a
    phrase; None where the folder held no site)."""

    index: Path
    runs: int
    replaced: str | None

    def sentence(self) -> str:
        """What `view` says it did: where it wrote and what it replaced there."""
        said = f"Wrote {self.index} ({counted(self.runs, 'run')})"
        return f"{said}; it replaced {self.replaced}." if self.replaced else f"{said}."


def default_out(run_dirs: Iterable[Path]) -> Path:
    """The folder a site goes to when no --out is given: one named for its inputs, under
    results/view/ ("results/view/decentralized+reflection"), so sites of other runs never
    replace each other. A name too long (or two names alike in other places: the refusal in
    `write_site` stays the guard) ends in a hash of the inputs' whole paths."""
    given = [Path(d) for d in run_dirs]
    names = [Path(os.path.abspath(d)).name or "root" for d in given]
    name = SAFE.sub("_", "+".join(names)).strip("._") or "site"
    if len(name) > NAME_CHARS:
        whole = "\n".join(os.path.abspath(d) for d in given).encode("utf-8", "surrogateescape")
        name = f"{name[: NAME_CHARS - 9]}-{hashlib.sha256(whole).hexdigest()[:8]}"
    return VIEWS / name


def build_site(given: list[Path], out: Path | None, force: bool = False) -> Written:
    """`mad-eval view`'s site of the run folders `given` (or the runs below them), written
    into `out` (by default `default_out(given)`)."""
    from mad_eval.reporting.paper import run_folders

    roots = run_folders(given)
    where = default_out(given) if out is None else out
    return write_site([load_view(root) for root in roots], where, force)


def write_site(views: list[RunView], out: Path, force: bool = False) -> Written:
    """Write the site into `out` (made, or a site of the same runs written before, whose data
    is replaced; a site of other runs is replaced only with `force`)."""
    out = Path(out)
    refuse_records(out)
    if out.exists() and not out.is_dir():
        raise ViewError(f"--out {out} is a file; give a folder for the site.")
    if out.is_dir() and any(out.iterdir()) and not (out / MARKER).exists():
        raise ViewError(
            f"--out {out} holds files not written by mad-eval view; give an empty or new folder."
        )
    for name in (MARKER, "data", KATEX, *ASSETS):  # the site's own names: links planted
        refuse_link(out / name)
    runs = [str(Path(view.run.root).resolve()) for view in views]
    replaced = _replacing(out, runs, force)
    try:
        out.mkdir(parents=True, exist_ok=True)
        _write(out / MARKER, json.dumps({"written_by": "mad-eval view", "runs": runs}).encode())
        shutil.rmtree(out / "data", ignore_errors=True)
        assets = resources.files("mad_eval.viewer") / "assets"
        for asset in ASSETS:
            _write(out / asset, (assets / asset).read_bytes())
        _copy_tree(assets / KATEX, out / KATEX, out)
        _write_all(site_files(views), out)
    except OSError as exc:
        raise ViewError(
            f"cannot write the site into {out} ({exc.strerror or exc}); give another --out folder."
        ) from None
    return Written(out / "index.html", len(views), replaced)


def _site_runs(out: Path) -> list[str] | None:
    """The run folders the site in `out` was written from, as its marker names them; None
    where it names none (a site written before sites named their runs) or cannot be read."""
    try:
        found = json.loads((out / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    runs = found.get("runs") if isinstance(found, dict) else None
    return runs if isinstance(runs, list) and all(isinstance(r, str) for r in runs) else None


def _replacing(out: Path, runs: list[str], force: bool) -> str | None:
    """What writing a site of `runs` into `out` replaces (a phrase; None: no site there);
    a site of other runs (or of runs it does not name) is refused without `force`."""
    if not (out / MARKER).exists():
        return None
    before = _site_runs(out)
    if before is not None and sorted(before) == sorted(runs):
        return f"the site of the same {counted(len(runs), 'run')} written there before"
    if not force:
        held = "other runs" if before is None else _named(before)
        raise ViewError(
            f"--out {out} holds a site of {held}; give another --out folder, or --force to "
            "replace it."
        )
    return "a site of " + ("runs it does not name" if before is None else _named(before))


def _named(runs: list[str]) -> str:
    """Run folders as a sentence names them: their folder names, the first three."""
    names = [Path(r).name for r in runs]
    more = f" and {len(names) - 3} more" if len(names) > 3 else ""
    return f"{counted(len(runs), 'run')} ({', '.join(names[:3])}{more})"


def _write(path: Path, data: bytes) -> None:
    """A file of the site, never written through a link (each is made again every time)."""
    write_atomically(path, data, THEN, durable=False)


def _copy_tree(source: Any, target: Path, out: Path) -> None:
    """A folder of the package's assets (an importlib Traversable) copied under `target`."""
    make_folder(target, THEN, below=out)
    for item in source.iterdir():
        if item.is_dir():
            _copy_tree(item, target / item.name, out)
        elif not item.name.startswith("."):
            _write(target / item.name, item.read_bytes())


def _write_all(files: Iterable[tuple[str, str]], out: Path) -> None:
    made: set[Path] = set()
    for name, text in files:
        path = out / name
        if path.parent not in made:
            make_folder(path.parent, THEN, below=out)
            made.add(path.parent)
        _write(path, text.encode("ascii"))


LOCAL_NAMES = ("localhost", "127.0.0.1", "[::1]")
# What a browser says (Sec-Fetch-Site) of a request from the site's own pages (same-origin)
# or from the address bar (none); a page of another site, even one served on another local
# port (same-site), says otherwise.
OWN_FETCH_SITES = ("same-origin", "none")


class SiteServer(http.server.ThreadingHTTPServer):
    """The site on 127.0.0.1, under a path made of a random token drawn for this serve: a
    page of another origin cannot name the data files, even where a browser sends no
    Sec-Fetch-Site."""

    def __init__(self, out: Path, port: int):
        self.root = "/" + secrets.token_urlsafe(16)
        super().__init__(("127.0.0.1", port), functools.partial(_SiteHandler, directory=str(out)))

    @property
    def url(self) -> str:
        """The site's address, token included: the one to open."""
        return f"http://127.0.0.1:{self.server_address[1]}{self.root}/"


class _SiteHandler(http.server.SimpleHTTPRequestHandler):
    """The site's files under the server's token, to requests that name this server as
    `Host` (a page of another name that resolves here, DNS rebinding, gets 421) and come
    from its own pages or the address bar (another page's <script> or fetch() gets 403, its
    reply marked same-origin only); no folder listings; quiet."""

    server: SiteServer

    def _own_host(self) -> bool:
        port = self.server.server_address[1]
        host = (self.headers.get("Host") or "").strip().lower()
        names = {f"{name}:{port}" for name in LOCAL_NAMES}
        return host in (names | set(LOCAL_NAMES) if port == 80 else names)

    def _own_origin(self, url: str) -> bool:
        """Whether `url` (an Origin or a Referer) is a page of this server."""
        try:
            parts = urlsplit(url.strip())
            port = parts.port or 80
        except ValueError:
            return False
        host = f"[{parts.hostname}]" if ":" in (parts.hostname or "") else parts.hostname
        own = self.server.server_address[1]
        return parts.scheme == "http" and host in LOCAL_NAMES and port == own

    def _from_own_page(self) -> bool:
        """Whether the browser says the request comes from this site's pages or the address
        bar: its Sec-Fetch-Site, and its Origin and Referer wherever it sends them."""
        site = self.headers.get("Sec-Fetch-Site")
        if site is not None and site.strip().lower() not in OWN_FETCH_SITES:
            return False
        return all(
            self._own_origin(value)
            for value in (self.headers.get("Origin"), self.headers.get("Referer"))
            if value is not None
        )

    def send_head(self) -> Any:
        if not self._own_host():
            self.send_error(421, "Misdirected Request", "This server answers only localhost.")
            return None
        if not self._from_own_page():
            self.send_error(403, "Forbidden", "This server answers only its own pages.")
            return None
        path = self.path.split("?", 1)[0].split("#", 1)[0]
        if path != self.server.root and not path.startswith(self.server.root + "/"):
            self.send_error(404, "Not Found", "Open the address mad-eval view printed.")
            return None
        return super().send_head()

    def translate_path(self, path: str) -> str:
        return super().translate_path(path[len(self.server.root) :])  # under the token only

    def list_directory(self, path: Any) -> None:
        self.send_error(404, "Not Found")
        return None

    def end_headers(self) -> None:
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Cross-Origin-Resource-Policy", "same-origin")
        super().end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


def make_server(out: Path, port: int) -> SiteServer:
    """A server of the site on 127.0.0.1 only (never another interface), at `url`, under a
    random token, answering only requests addressed to localhost, 127.0.0.1 or [::1] at its
    port from its own pages, with files under `out` (the standard handler drops `..` from
    paths)."""
    try:
        return SiteServer(out, port)
    except OSError as exc:
        raise ViewError(
            f"cannot serve on 127.0.0.1:{port} ({exc.strerror or exc}); "
            "give another --serve port, or leave it out and open index.html."
        ) from None
