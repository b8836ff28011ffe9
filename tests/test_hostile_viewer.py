"""Hostile files, URLs and pages against `mad-eval view` and every command that writes a
file: the page loads only the data files its index lists (a route naming a path runs
nothing), the --serve server answers only its own host names and its own pages with files
under the site and its random token (another origin's page reads nothing, in Chromium), a
huge reply is left raw in bounded time, and no --out (or --cache) writes over a run's
records."""

from __future__ import annotations

import contextlib
import functools
import http.client
import http.server
import json
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_helpers import mad_eval
from factories import sim_run
from viewer_helpers import needs_chromium, read_data

from mad_eval import api
from mad_eval.backends.cache import RequestCache
from mad_eval.errors import UserError
from mad_eval.records import Turn
from mad_eval.store.files import refuse_records
from mad_eval.store.folder import RunStore
from mad_eval.training import write_rows
from mad_eval.viewer import make_server
from mad_eval.viewer.site import SiteServer

# Sets a flag and the page's title wherever a route makes the page load it as a script.
EVIL = "window.__evil = {where!r}; document.title = 'pwned';\n"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A site of a small sim run, with scripts that set a flag at every place an old route
    reached: beside the site, above it, in its data/ folder, and as a .txt file."""
    root = tmp_path_factory.mktemp("hostile-viewer")
    run = sim_run(root / "run", limit=4, agents=3, rounds=1)
    site = api.view([run], root / "site").parent
    for where in (
        root / "evil.js",
        root / "evil.txt",
        site / "evil.js",
        site / "data" / "evil.js",
        site / "data" / "0" / "evil.js",
    ):
        where.write_text(EVIL.format(where=str(where.relative_to(root))), encoding="utf-8")
    return site


def open_fresh(driver, site: Path, route: str) -> bool:
    """The page opened anew on `route`: whether it drew a view (app.js sets data-ready)
    within a generous bound."""
    driver.get("about:blank")
    driver.get((site / "index.html").resolve().as_uri() + route)
    end = time.monotonic() + 10
    while time.monotonic() < end:
        ready = "return document.body && document.body.getAttribute('data-ready')"
        if driver.execute_script(ready):
            return True
        time.sleep(0.02)
    return False


HOSTILE_ROUTES = [
    "#/c/../../evil",
    "#/c/../evil",
    "#/c/evil",
    "#/c/0/evil",
    "#/c/..%2F..%2Fevil",
    "#/c/%2E%2E%2F%2E%2E%2Fevil",
    "#/c/..%5C..%5Cevil",
    "#/c/..\\..\\evil",
    "#/c/..%2F..%2Fevil.txt%3F",
    "#/c/../../evil.txt%3F",
    "#/c/0/0,../../evil",
    "#/c/%2F%2Fexample.invalid%2Fevil",
    "#/c/javascript:window.__evil='js'",
    "#/c/index",
    "#/c/",
    "#/q/../../evil",
    "#/q/..%2F..%2Fevil/x",
    "#/q/0/evil",
    "#/q/0/..%2Fevil",
    "#/q/__proto__/constructor",
    "#/run/../../evil",
    "#/run/constructor",
    "#/run/1e0",
    "#/compare/../../evil",
    "#/c/%E0%A4%A",
    "#/nothing/here",
]


@pytest.mark.slow
@needs_chromium
@pytest.mark.parametrize("route", HOSTILE_ROUTES)
def test_a_route_naming_a_path_runs_nothing_and_is_not_found(browser, site, route) -> None:
    ready = open_fresh(browser, site, route)
    ran = browser.execute_script("return window.__evil === undefined ? null : window.__evil")
    assert ran is None, f"{route} ran {ran}"
    assert browser.title == "mad-eval view"
    assert ready, f"{route}: the page never drew a view"
    assert browser.find_elements("id", "not-found"), browser.find_element("id", "app").text
    sources = browser.execute_script(
        "return Array.from(document.scripts, (s) => s.getAttribute('src'))"
    )
    assert sorted(sources) == ["app.js", "data/index.js", "katex/katex.min.js"]


@pytest.mark.slow
@needs_chromium
def test_known_routes_still_draw_their_pages(browser, site) -> None:
    first = read_data(site, "index")["runs"][0]["debates"][0]["file"]
    for route in ("", "#/", "#/run/0", f"#/q/{first}", f"#/c/{first},{first}"):
        assert open_fresh(browser, site, route), route
        assert not browser.find_elements("id", "not-found"), route
        assert browser.execute_script("return window.__evil === undefined")
    assert browser.find_elements("id", "p0-grid") and browser.find_elements("id", "p1-grid")


# ---- mad-eval view --serve ----------------------------------------------------------------


@contextlib.contextmanager
def running(server: http.server.ThreadingHTTPServer) -> Iterator[int]:
    """`server` serving in a thread for the length of a block; yields its port."""
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=30)


@pytest.fixture
def server(site: Path) -> Iterator[SiteServer]:
    """The --serve server of the site on a free loopback port, in a thread; stopped after."""
    (site.parent / "secret.txt").write_text("not for the web", encoding="utf-8")
    server = make_server(site, 0)
    with running(server):
        yield server


def get(server: SiteServer, path: str, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    """GET `path` under the server's token (a path starting `//` is sent without it, less one
    slash) with `headers`, by default only its own Host."""
    port = server.server_address[1]
    url = path[1:] if path.startswith("//") else server.root + path
    headers = {"Host": f"localhost:{port}"} if headers is None else headers
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.putrequest("GET", url, skip_host=True, skip_accept_encoding=True)
        for name, value in headers.items():
            conn.putheader(name, value)
        conn.endheaders()
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def test_serve_binds_loopback_only(site) -> None:
    server = make_server(site, 0)
    try:
        assert server.server_address[0] == "127.0.0.1"
    finally:
        server.server_close()


@pytest.mark.slow
def test_serve_answers_only_its_own_host_names(server, site) -> None:
    page, port = (site / "index.html").read_bytes(), server.server_address[1]
    for name in ("localhost", "127.0.0.1", "[::1]", "LOCALHOST"):
        assert get(server, "/index.html", {"Host": f"{name}:{port}"}) == (200, page), name
    assert get(server, "/") == (200, page)
    for host in (
        f"attacker.example:{port}",
        "attacker.example",
        "localhost",  # the wrong port: another site's name
        f"localhost:{port + 1}",
        f"localhost:{port}.attacker.example",
        f"127.0.0.1.attacker.example:{port}",
        "",
        None,
    ):
        status, body = get(server, "/data/index.js", {} if host is None else {"Host": host})
        assert status == 421, host
        assert b"MADV" not in body


@pytest.mark.slow
def test_serve_gives_only_files_under_the_site(server) -> None:
    assert get(server, "/data/index.js")[0] == 200
    for path in (
        "/../secret.txt",
        "/%2e%2e/secret.txt",
        "/%2E%2E%2Fsecret.txt",
        "/data/..%2f..%2fsecret.txt",
        "/data/../../secret.txt",
        "//../secret.txt",
        "/..%5csecret.txt",
        "/data/",  # no folder listings either
    ):
        status, body = get(server, path)
        assert status == 404, path
        assert b"not for the web" not in body


@pytest.mark.slow
def test_serve_gives_nothing_outside_its_token(server, site) -> None:
    """The site lives under a random path drawn at each serve: the paths a page of another
    origin could guess name nothing."""
    assert server.url.endswith(server.root + "/") and len(server.root) > 20
    assert get(server, "/data/index.js")[0] == 200
    for path in ("//", "//index.html", "//data/index.js", "//data/0/0.js", "//x" + server.root):
        assert get(server, path) == (404, get(server, "//nothing")[1]), path
    other = make_server(site, 0)
    other.server_close()
    assert other.root != server.root  # drawn anew for each serve


@pytest.mark.slow
def test_serve_refuses_what_another_sites_page_asks(server) -> None:
    """What a browser says of a request: another site's page (even one on another local
    port, a `same-site` request) gets 403, the site's own pages and the address bar get the
    file, marked for its own origin only."""
    port = server.server_address[1]
    own = {"Host": f"localhost:{port}"}
    for headers in (
        {"Sec-Fetch-Site": "same-origin", "Referer": f"http://localhost:{port}{server.root}/"},
        {"Sec-Fetch-Site": "none"},
        {"Sec-Fetch-Site": "same-origin", "Origin": f"http://127.0.0.1:{port}"},
        {"Referer": f"http://[::1]:{port}{server.root}/katex/katex.min.css"},
        {},  # a client that says nothing of where it comes from: curl, an old browser
    ):
        assert get(server, "/data/index.js", own | headers)[0] == 200, headers
    for headers in (
        {"Sec-Fetch-Site": "cross-site"},
        {"Sec-Fetch-Site": "same-site"},  # http://localhost:OTHER-PORT/
        {"Sec-Fetch-Site": "whatever"},
        {"Sec-Fetch-Site": "same-origin", "Referer": f"http://localhost:{port + 1}/attack.html"},
        {"Origin": f"http://localhost:{port + 1}"},
        {"Origin": "null"},  # a sandboxed frame or a file:// page
        {"Origin": f"https://localhost:{port}"},
        {"Referer": f"http://attacker.example:{port}/"},
        {"Referer": f"http://localhost:{port}.attacker.example/"},
        {"Referer": "not a url ["},
    ):
        status, body = get(server, "/data/index.js", own | headers)
        assert status == 403 and b"MADV" not in body, headers
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("GET", server.root + "/data/index.js", headers=own)
        response = conn.getresponse()
        assert response.getheader("Cross-Origin-Resource-Policy") == "same-origin"
    finally:
        conn.close()


# A page of another origin that tries every way to read the viewer's data: the data
# scripts it names (with the token, as if leaked, and without), under MADV.loaded of its
# own, and fetch() of each; what it got lands in window.got.
ATTACK = """<!doctype html><meta charset="utf-8"><title>attack</title><script>
window.got = {loaded: [], read: [], finished: 0};
window.MADV = {loaded: (name, value) => window.got.loaded.push([name, JSON.stringify(value)])};
const targets = %s;
for (const src of targets) {
  const script = document.createElement("script");
  script.src = src;
  script.onload = script.onerror = () => { window.got.finished++; };
  document.head.appendChild(script);
  for (const mode of ["cors", "no-cors"]) {
    fetch(src, {mode}).then((r) => r.text()).then((t) => window.got.read.push(t), () => null)
      .finally(() => { window.got.finished++; });
  }
}
</script>"""


class QuietFiles(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.mark.slow
@needs_chromium
def test_a_page_of_another_origin_reads_no_data_in_chromium(browser, server, tmp_path) -> None:
    """The attack of issue 41 in Chromium: a page served from another local port loads the
    data scripts with its own MADV.loaded, and fetches them. It reads nothing (it read every
    question, gold and reply), while the viewer's own page still draws its data."""
    port = server.server_address[1]
    targets = [
        f"http://{host}:{port}{root}/{file}"
        for host in ("localhost", "127.0.0.1")
        for root in (server.root, "")
        for file in ("data/index.js", "data/0/0.js")
    ]
    (tmp_path / "attack.html").write_text(ATTACK % json.dumps(targets), encoding="utf-8")
    handler = functools.partial(QuietFiles, directory=str(tmp_path))
    with running(http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)) as other:
        browser.get(f"http://localhost:{other}/attack.html")
        end = time.monotonic() + 30
        while browser.execute_script("return window.got.finished") < 3 * len(targets):
            assert time.monotonic() < end, "the attack page never finished"
            time.sleep(0.05)
        got = browser.execute_script("return window.got")
    assert got["loaded"] == [] and not any("MADV" in text for text in got["read"])
    browser.get(server.url)
    end = time.monotonic() + 30
    while not browser.execute_script("return document.body.getAttribute('data-ready')"):
        assert time.monotonic() < end, browser.find_element("id", "app").text
        time.sleep(0.05)
    assert not browser.find_elements("id", "not-found")
    assert browser.find_element("id", "app").text.count("arith-") >= 4  # its debates listed


# ---- no output writes over a run's records -----------------------------------------------


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return sim_run(tmp_path_factory.mktemp("records") / "run", limit=4, agents=3, rounds=1)


def snapshot(folder: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


def test_refuse_records_names_each_kind_of_record(run_dir, tmp_path) -> None:
    (run_dir / "superseded").mkdir(exist_ok=True)
    link = tmp_path / "innocent.jsonl"
    link.symlink_to(run_dir / "turns.jsonl")
    for out, said in (
        (run_dir / "turns.jsonl", "a record of the run folder"),
        (run_dir / "manifest.json", "a record of the run folder"),
        (run_dir / "judge.jsonl", "a record of the run folder"),  # not written yet: still its
        (run_dir / ".lock", "a record of the run folder"),
        (run_dir / "x" / ".." / "metrics.json", "a record of the run folder"),
        (link, "a record of the run folder"),
        (run_dir, "is a run folder"),
        (run_dir / "superseded", "the replaced records of a run"),
        (run_dir / "superseded" / "turns.jsonl", "the replaced records of a run"),
    ):
        with pytest.raises(UserError, match=said) as caught:
            refuse_records(out)
        assert str(caught.value).count(". ") == 0 and str(out) in str(caught.value)
    # What replaces nothing is allowed: other names inside a run, record names elsewhere.
    for out in (run_dir / "pairs.jsonl", run_dir / "view", tmp_path / "turns.jsonl", tmp_path):
        refuse_records(out)
    refuse_records(run_dir, run_folder=True)  # run's --out: the run folder is its own


def test_api_outputs_leave_the_records_byte_identical(run_dir, tmp_path) -> None:
    before = snapshot(run_dir)
    rows = [{"prompt": [{"role": "user", "content": "1+1?"}]}]
    for out in (run_dir / "turns.jsonl", run_dir / "questions.jsonl", run_dir / "judge.jsonl"):
        with pytest.raises(UserError, match="a record of the run folder"):
            write_rows(rows, out)
    for out in (run_dir, run_dir / "superseded" / "site"):
        with pytest.raises(UserError):
            api.view([run_dir], out)
    with pytest.raises(UserError, match="--cache"):
        RequestCache(run_dir / "judge.jsonl")
    for out in (run_dir / "judge.jsonl", run_dir / "superseded" / "run"):  # a run's own out
        with pytest.raises(UserError):
            mad_eval_api_run(out)
    experiment = tmp_path / "exp.toml"
    experiment.write_text(
        f'[experiment]\nname = "e"\nout = "{run_dir}"\n\n[settings]\nlimit = 2\n\n'
        '[models]\nsim = "sim"\n\n[grids.main]\nbenchmarks = ["arith"]\nagents = [3]\n',
        encoding="utf-8",
    )
    with pytest.raises(UserError, match="is a run folder"):
        api.experiment(experiment)
    assert snapshot(run_dir) == before


def mad_eval_api_run(out: Path) -> None:
    api.run(model="sim", benchmark="arith", limit=2, agents=3, rounds=1, out=out)


CLI_OUTS = [
    ("train", "pairs", "{run}", "--out", "{run}/turns.jsonl"),
    ("train", "prompts", "arith", "--out", "{run}/questions.jsonl"),
    ("table", "{run}", "--out", "{run}/manifest.json"),
    ("table", "{run}", "--out", "{run}"),
    ("plot", "{run}", "--out", "{run}"),
    ("view", "{run}", "--out", "{run}"),
    ("run", "--model", "sim", "--benchmark", "arith", "--limit", "4", "--agents", "3",
     "--rounds", "1", "--out", "{run}", "--cache", "{run}/judge.jsonl"),
]  # fmt: skip


@pytest.mark.parametrize("args", CLI_OUTS, ids=lambda a: " ".join(a[:2]))
def test_cli_out_on_a_run_is_one_sentence_and_writes_nothing(run_dir, tmp_path, args) -> None:
    before = snapshot(run_dir)
    done = mad_eval(*(a.format(run=run_dir) for a in args), cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    message = " ".join(done.stderr.split())  # as one line, however the terminal wrapped it
    assert message.startswith("error: ") and str(run_dir) in message
    assert "a record of the run folder" in message or "is a run folder" in message
    assert snapshot(run_dir) == before


@pytest.mark.slow
@pytest.mark.parametrize(
    "text",
    [
        "\\boxed{x " * 20_000,  # a thousand boxes none closes
        "\\[ x " * 20_000,
        "\\( x " * 20_000,
        "costs $5 and " * 15_000,  # dollars, not formulas
        "\\boxed{" * 10_000 + "}" * 10_000,  # nested to the end, all closed
    ],
)
def test_unclosed_formulas_are_read_in_one_pass(text: str) -> None:
    """Each formula's closer is found once per text, not once per opener: quadratic work
    on these would take minutes per reply (no clock is read here)."""
    from mad_eval.viewer.markup import render_markdown, text_html

    plain = text_html(text)
    assert plain is not None and len(plain) >= len(text) // 2
    rendered = render_markdown(text)
    if text.endswith("}"):  # the outer box holds the rest: one formula
        assert plain.count('<span class="math') == 1
    else:
        assert '<span class="math' not in plain and '<span class="math' not in rendered


@contextlib.contextmanager
def hang_guard(seconds: float) -> Iterator[None]:
    """Fail, rather than hang, when the block runs past `seconds`: a guard against a hang,
    never a speed figure (the work guarded takes a small part of it)."""

    def stop(signum: int, frame: object) -> None:
        raise AssertionError(f"still running after {seconds:g} s")

    before = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, before)


# Formula openers, none closed, as a hostile model repeats them.
OPENERS = ["\\boxed{", "\\[", "$", "$$", "\\(", "\\begin{"]


@pytest.mark.slow
@pytest.mark.parametrize("opener", OPENERS)
def test_equal_huge_replies_are_left_raw_in_bounded_time(opener: str) -> None:
    """Four equal 7 MB replies of an opener: markdown-it alone spends tens of seconds on
    each, and a closer cache shared by equal texts compared whole texts once per opener (an
    hour); past MARKUP_CHARS a text is left to the page as raw text."""
    from mad_eval.viewer.markup import MARKUP_CHARS, render_markdown, text_html

    replies = [opener * (7_000_000 // len(opener)) for _ in range(4)]
    assert len(replies[0]) > MARKUP_CHARS and replies[0] == replies[1]
    with hang_guard(60):
        rendered = [(render_markdown(reply), text_html(reply)) for reply in replies]
    assert rendered == [(None, None)] * 4  # the page shows each as its raw text
    text = (opener + " x ") * (MARKUP_CHARS // (len(opener) + 3))  # the longest rendered
    text += "x" * (MARKUP_CHARS - len(text))
    with hang_guard(60):
        for copy in (text, "".join(text)):  # two equal texts, each read in one pass
            assert text_html(copy) is not None and render_markdown(copy) is not None


@pytest.mark.slow
def test_a_run_of_four_equal_huge_replies_is_written_in_bounded_time(tmp_path) -> None:
    """The issue's run: four agents whose last replies are the same 7 MB of `\\boxed{` (not
    done in 15 minutes before); each is on its page whole, as raw text."""
    run = sim_run(tmp_path / "run", limit=1, agents=4, rounds=1)
    spam = "\\boxed{" * 1_000_000
    path = RunStore(run).turns_path
    turns = [Turn.from_json(line) for line in path.read_text(encoding="utf-8").splitlines()]
    for turn in turns:
        if turn.round == 1:
            turn.text = spam
    path.write_text("".join(turn.to_json() + "\n" for turn in turns), encoding="utf-8")
    with hang_guard(120):
        site = api.view([run], tmp_path / "site").parent
    last = [t for t in read_data(site, "0/0")["turns"] if t["round"] == 1]
    assert [(t["text"], t["text_html"]) for t in last] == [(spam, None)] * 4
