"""Runs for the viewer's tests: simulated debates, one with a hostile reply, the data files
the site wrote read back, and the sets of debates the run's tallies say a filter holds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from factories import sim_run

import mad_eval
from mad_eval.measure.counts import tally
from mad_eval.measure.scoring import Scoring
from mad_eval.records import Question, Turn
from mad_eval.store.folder import RunStore

CHROMIUM, CHROMEDRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")
needs_chromium = pytest.mark.skipif(
    not (CHROMIUM.exists() and CHROMEDRIVER.exists()),
    reason="needs Debian's chromium and chromium-driver in /usr/bin "
    "(apt-get install chromium chromium-driver; .ci/run installs them)",
)


def chromium(profile: Path, window: str = "1400,1000"):  # -> selenium WebDriver
    """Debian's Chromium, headless, driven by its own chromedriver (nothing downloaded),
    with a fresh profile and without the background requests this closed network refuses
    (shared/notes/browser.md). The browser tests, perf/viewer.py and the docs'
    screenshots all start it here."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-extensions",
        "--disable-sync",
        "--disable-default-apps",
        "--no-first-run",
        f"--window-size={window}",
        f"--user-data-dir={profile}",
    ):
        options.add_argument(flag)
    return webdriver.Chrome(options=options, service=Service(str(CHROMEDRIVER)))


# Everything a reply could do to a page that inserts it carelessly; each payload sets a flag.
HOSTILE = (
    "Let me check. <img src=x onerror=\"window.__pwned = 'img'\"> "
    "<script>window.__pwned = 'script'</script></div></script></pre> "
    "[see here](javascript:window.__pwned='link') <b onmouseover=\"window.__pwned='b'\">bold</b> "
    "\u2028 \u2029 \x00 \ud800 & &amp; ]]> \\boxed{7} "
    + r"$\href{javascript:window.__pwned='href'}{x}$ \(\url{javascript:window.__pwned='url'}\) "
    + r"$\htmlClass{pwned}{y} \htmlId{pwned}{z}$ \[\htmlStyle{color:red}{w}\htmlData{a=1}{v}\] "
    + r"$\includegraphics{x.png}$ $$<img src=x onerror=\"window.__pwned='math'\">$$"
)
# A question's text: formulas of every kind of delimiter, next to markup that must stay text.
LATEX = (
    r"Let $f(x) = \frac{14}{3}x^2$ and \(g\) be given; find \[\sum_{k=1}^{n} \{k\}\]"
    "\nThis costs $5 and $6. <b>bold?</b> "
    r"$\href{javascript:window.__pwned='question'}{click}$ $$x \\ y$$"
)


def hostile_run(out: Path, question: bool = False) -> tuple[Path, Turn]:
    """A small run whose last-round reply of agent 0 on its first question is HOSTILE (a
    last-round reply is read by no one, so every prompt still rebuilds); with `question`,
    that question's text is LATEX (its prompts then no longer rebuild)."""
    sim_run(out, limit=3, agents=3, rounds=1)
    if question:
        set_question_text(out, LATEX)
    path = RunStore(out).turns_path
    lines = path.read_text(encoding="utf-8").splitlines()
    first = Turn.from_json(lines[0]).question
    for i, line in enumerate(lines):
        turn = Turn.from_json(line)
        if (turn.question, turn.round, turn.agent) == (first, 1, 0):
            turn.text = HOSTILE
            record = {name: getattr(turn, name) for name in Turn.__dataclass_fields__}
            lines[i] = json.dumps(record, ensure_ascii=True)  # the lone surrogate as an escape
            path.write_text("\n".join(lines) + "\n", encoding="utf-8")
            mad_eval.report(out)
            return out, turn
    raise AssertionError("no last-round turn of agent 0")


def set_question_text(run: Path, text: str) -> None:
    """Give the run's first recorded question another text (its hash made to match)."""
    path = run / "questions.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines()
    record = json.loads(lines[0])
    record["text"] = text
    record["sha256"] = Question.from_dict(record).sha256
    lines[0] = json.dumps(record)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def read_data(site: Path, name: str) -> object:
    """A data file the site wrote (`MADV.loaded.apply(null, [name, value]);`), its value."""
    text = (site / "data" / f"{name}.js").read_text(encoding="ascii")
    prefix, suffix = "MADV.loaded.apply(null, ", ");\n"
    assert text.startswith(prefix) and text.endswith(suffix)
    loaded, value = json.loads(text[len(prefix) : -len(suffix)])
    assert loaded == name
    return value


def run_tallies(run_dir: Path):
    """The run's tallies from turns.jsonl through tally.tally, the counting every report
    uses; and its rounds of debate."""
    store = RunStore(run_dir)
    manifest = store.manifest()
    scoring = Scoring.from_manifest(manifest)
    return tally(store.turns(), scoring), scoring.rounds


def votes_after_debate(run_dir: Path) -> dict[str, bool | None]:
    """Whether each debate's last vote was right ("run/question" keys; None: no vote)."""
    tallies, rounds = run_tallies(run_dir)
    num, den = tallies.num[f"vote{rounds}"], tallies.den[f"vote{rounds}"]
    return {
        f"{run}/{qid}": bool(num[i, j]) if den[i, j] else None
        for i, run in enumerate(tallies.runs)
        for j, qid in enumerate(tallies.questions)
    }


def expected_sets(run_dir: Path) -> dict[str, set[str]]:
    """Debate keys ("run/question") per filter, from the run's tallies (run_tallies)."""
    tallies, rounds = run_tallies(run_dir)
    sets: dict[str, set[str]] = {
        "w2r": set(),
        "r2w": set(),
        "unanimous_wrong": set(),
        "split": set(),
    }
    for i, run in enumerate(tallies.runs):
        for j, qid in enumerate(tallies.questions):
            key = f"{run}/{qid}"
            first = tallies.num["vote0"][i, j], tallies.den["vote0"][i, j]
            last = tallies.num[f"vote{rounds}"][i, j], tallies.den[f"vote{rounds}"][i, j]
            same = tallies.num[f"unanimous{rounds}"][i, j], tallies.den[f"unanimous{rounds}"][i, j]
            if first[1] and last[1]:
                if not first[0] and last[0]:
                    sets["w2r"].add(key)
                if first[0] and not last[0]:
                    sets["r2w"].add(key)
            if same[1] and same[0] and last[1] and not last[0]:
                sets["unanimous_wrong"].add(key)
            if same[1] and not same[0]:
                sets["split"].add(key)
    return sets
