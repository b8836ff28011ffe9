"""mad-eval view in a real browser: Debian's Chromium, headless, driven by Selenium over
file:// pages (no server, nothing downloaded). Skipped where /usr/bin/chromium is missing;
CI installs it (.ci/run), so there they always run."""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from pathlib import Path

import pytest
from factories import sim_run
from viewer_helpers import (
    HOSTILE,
    expected_sets,
    hostile_run,
    needs_chromium,
    read_data,
    votes_after_debate,
)

from mad_eval import api
from mad_eval.records import Turn
from mad_eval.store.folder import RunStore

pytestmark = needs_chromium


def wait_ready(driver, timeout: float = 10.0) -> None:
    """Until the page has drawn the route it was opened on (app.js sets data-ready)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if driver.execute_script("return document.body.getAttribute('data-ready')"):
            return
        time.sleep(0.02)
    raise AssertionError(f"the page never got ready: {driver.find_element('id', 'app').text!r}")


def open_page(driver, site: Path, route: str = "#/") -> None:
    driver.get((site / "index.html").resolve().as_uri() + route)
    wait_ready(driver)


def go(driver, route: str) -> None:
    driver.execute_script(
        "document.body.removeAttribute('data-ready'); location.hash = arguments[0];", route
    )
    wait_ready(driver)


def text_of(driver, css: str) -> str:
    return driver.find_element("css selector", css).get_attribute("textContent")


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("viewer-browser")
    a = sim_run(root / "a", model="sim:p0=0.45,skill=0.1", limit=30, agents=5, rounds=2)
    b = sim_run(root / "b", model="sim:p0=0.55,skill=0.7", limit=30, agents=5, rounds=2)
    return a, b, root


@pytest.fixture(scope="module")
def more_runs(runs):
    """Two more runs of the same questions: a sparse one (each agent reads its neighbours)
    and one under a long name, for four runs side by side."""
    _, _, root = runs
    c = sim_run(root / "c", limit=30, agents=5, rounds=2, protocol="sparse")
    d = sim_run(
        root / ("a-run-whose-folder-name-is-very-long-" * 3 + "d"),
        model="sim:p0=0.5,skill=0.4",
        limit=30,
        agents=5,
        rounds=2,
    )
    return c, d


def no_sideways_scroll(driver) -> bool:
    return driver.execute_script(
        "return document.documentElement.scrollWidth <= document.documentElement.clientWidth"
    )


@pytest.mark.slow
def test_overview_shows_metrics_json(browser, runs) -> None:
    a, _, root = runs
    site = api.view([a], root / "site-a").parent
    open_page(browser, site)
    metrics = json.loads((a / "metrics.json").read_text())
    for name in ("maj", "debate", "delta"):
        cell = browser.find_element("css selector", f'#runs td[data-field="{name}"]')
        sign = "+" if name == "delta" and metrics[name] > 0 else ""
        assert text_of(browser, f'#runs td[data-field="{name}"] .value') == (
            f"{sign}{metrics[name]:.1f}"  # one seeded run: no ± over runs
        )
        low, high = read_data(site, "index")["runs"][0]["summary"][f"{name}_ci"]
        assert text_of(browser, f'#runs td[data-field="{name}"] .ci') == f"[{low:.1f}, {high:.1f}]"
        assert float(cell.get_attribute("data-value")) == metrics[name]


@pytest.mark.slow
def test_right_to_wrong_filter_lists_the_tallied_questions(browser, runs) -> None:
    a, _, root = runs
    site = api.view([a], root / "site-a").parent
    open_page(browser, site)
    expected = expected_sets(a)["r2w"]
    assert expected
    browser.find_element("id", "filter-r2w").click()
    rows = browser.find_elements("css selector", "#rows tr")
    assert {row.get_attribute("data-key") for row in rows} == expected
    browser.find_element("id", "filter-r2w").click()  # off again: every debate
    assert len(browser.find_elements("css selector", "#rows tr")) == 30


@pytest.mark.slow
def test_question_page_grid_colors_and_reply(browser, runs) -> None:
    a, _, root = runs
    site = api.view([a], root / "site-a").parent
    index = read_data(site, "index")["runs"][0]["debates"]
    # A debate whose vote changed, checked against its turns as recorded.
    row = next(r for r in index if "r2w" in r["tags"] or "w2r" in r["tags"])
    turns = [t for t in RunStore(a).turns() if t.question == row["question"]]
    open_page(browser, site, "#/q/" + row["file"])
    assert text_of(browser, "#gold annotation") == row["gold"]  # typeset; its TeX kept
    for turn in turns:
        cell = browser.find_element("id", f"cell-{turn.agent}-{turn.round}")
        want = "failed" if turn.failed else "unparsed" if turn.answer is None else None
        want = want or ("right" if turn.correct else "wrong")
        assert cell.get_attribute("data-class") == want
        assert want in cell.get_attribute("class").split()
        color = cell.value_of_css_property("background-color")
        assert color == {"right": "rgba(212, 244, 220, 1)", "wrong": "rgba(251, 213, 213, 1)"}[want]
    changed = [t for t in turns if t.round > 0 and _changed(t, turns)]
    for turn in changed:
        assert "changed" in browser.find_element(
            "id", f"cell-{turn.agent}-{turn.round}"
        ).get_attribute("class")
    pick = max(turns, key=lambda t: t.round)
    browser.find_element("id", f"cell-{pick.agent}-{pick.round}").click()
    # The picked round's replies side by side, one card per agent, the picked one marked.
    cards = browser.find_elements("css selector", "#round-view .card")
    assert [c.get_attribute("data-agent") for c in cards] == [str(a) for a in range(5)]
    assert {c.get_attribute("data-round") for c in cards} == {str(pick.round)}
    assert "picked" in browser.find_element("id", f"card-{pick.agent}").get_attribute("class")
    assert len({c.location["y"] for c in cards}) == 1  # side by side, in one row
    from selenium.webdriver.support.ui import Select

    Select(browser.find_element("id", "columns")).select_by_value("1")
    cards = browser.find_elements("css selector", "#round-view .card")
    assert len({c.location["x"] for c in cards}) == 1  # one below the other, for long replies
    Select(browser.find_element("id", "columns")).select_by_value("all")
    assert text_of(browser, f"#a{pick.agent}-reply-raw") == pick.text
    rendered = browser.find_element("id", f"a{pick.agent}-reply-rendered")
    assert rendered.find_elements("css selector", ".math.boxed .katex")  # \boxed{...} typeset
    browser.find_element("css selector", f"#card-{pick.agent} details.more summary").click()
    details = text_of(browser, f"#a{pick.agent}-details")
    said = re.search(r"The prompt it was sent \((\d+) (messages?),", details)
    assert said and (said[2] == "message") == (said[1] == "1")  # counted, "1 message"
    # Answers apart from the round's most common one are marked, in the grid and the cards.
    by_round: dict[int, list[Turn]] = {}
    for turn in turns:
        by_round.setdefault(turn.round, []).append(turn)
    for r, them in by_round.items():
        counts = Counter(t.answer_class for t in them if t.answer is not None)
        top = counts.most_common()
        common = top[0][0] if len(top) == 1 or top[0][1] > top[1][1] else None
        apart = {
            t.agent
            for t in them
            if common is not None and t.answer is not None and t.answer_class != common
        }
        marked = {
            int(c.get_attribute("data-agent"))
            for c in browser.find_elements("css selector", f'.cell.minority[data-round="{r}"]')
        }
        assert marked == apart, r
    minority = browser.find_elements("css selector", "#round-view .card.minority")
    assert {int(c.get_attribute("data-agent")) for c in minority} == {
        int(c.get_attribute("data-agent"))
        for c in browser.find_elements("css selector", f'.cell.minority[data-round="{pick.round}"]')
    }


def _changed(turn: Turn, turns: list[Turn]) -> bool:
    before = next(t for t in turns if (t.agent, t.round) == (turn.agent, turn.round - 1))
    return before.answer_class != turn.answer_class


@pytest.mark.slow
def test_hostile_reply_is_text_and_runs_nothing(browser, tmp_path) -> None:
    run, turn = hostile_run(tmp_path / "run", question=True)
    site = api.view([run], tmp_path / "site").parent
    row = next(
        r for r in read_data(site, "index")["runs"][0]["debates"] if r["question"] == turn.question
    )
    open_page(browser, site, "#/q/" + row["file"])
    browser.find_element("id", "cell-0-1").click()
    # Read in the page: the reply's lone surrogate cannot cross the driver's JSON.
    shown = "return document.getElementById(arguments[0]).textContent.includes(arguments[1])"
    for part in (
        "<img src=x onerror=",
        "<script>window.__pwned = 'script'</script>",
        "javascript:",
    ):
        assert browser.execute_script(shown, "a0-reply-rendered", part), part
    # Its formulas are typeset, and \href, \url, \htmlClass, ... make no link or attribute.
    rendered = browser.find_element("id", "a0-reply-rendered")
    assert len(rendered.find_elements("css selector", ".katex")) >= 6
    browser.find_element("id", "a0-reply-toggle").click()
    assert browser.find_element("id", "a0-reply-raw").is_displayed()
    raw = "return JSON.stringify(document.getElementById('a0-reply-raw').textContent)"
    assert json.loads(browser.execute_script(raw)) == HOSTILE  # every character, as recorded
    page = "#card-0, #question-text"
    found = browser.execute_script(
        "return document.querySelectorAll(arguments[0].split(', ').flatMap((root) => "
        "['img', 'script', 'a', 'b', '.pwned', '#pwned', '[data-a]', '[style*=\"red\"]']"
        ".map((bad) => root + ' ' + bad)).join(', ')).length",
        page,
    )
    assert found == 0
    for element in browser.find_elements("css selector", "#card-0 *, #question-text *"):
        element.location_once_scrolled_into_view  # noqa: B018 - hovering and showing it
    time.sleep(0.2)
    assert browser.execute_script("return window.__pwned === undefined")
    # The question's LaTeX: each formula typeset, the rest of its text as written.
    question = browser.find_element("id", "question-text")
    assert len(question.find_elements("css selector", ".katex")) == 5
    assert len(question.find_elements("css selector", ".katex-display")) == 2
    assert len(question.find_elements("css selector", "span.math:not(.typeset)")) == 0
    assert "This costs $5 and $6. <b>bold?</b>" in question.get_attribute("textContent")
    loaded = browser.execute_async_script(
        "const done = arguments[0]; document.fonts.ready.then(() => done(Array.from("
        "document.fonts, (f) => f.status === 'loaded' ? f.family : '').filter(Boolean)))"
    )
    assert {"KaTeX_Main", "KaTeX_Math"} <= {name.strip("\"'") for name in loaded}  # from file://


@pytest.mark.slow
def test_runs_side_by_side_list_where_they_differ(browser, runs) -> None:
    a, b, root = runs
    site = api.view([a, b], root / "site-ab").parent
    open_page(browser, site, "#/compare")
    last = {"a": votes_after_debate(a), "b": votes_after_debate(b)}
    differ = {k for k in last["a"] if last["a"][k] != last["b"][k]}
    assert differ
    listed = {
        r.get_attribute("data-key")
        for r in browser.find_elements("css selector", "#compare-rows tr")
    }
    assert listed == differ
    from selenium.webdriver.support.ui import Select

    Select(browser.find_element("id", "compare-filter")).select_by_value("a_wrong_b_right")
    listed = {
        r.get_attribute("data-key")
        for r in browser.find_elements("css selector", "#compare-rows tr")
    }
    assert listed == {k for k in differ if last["a"][k] is False and last["b"][k] is True}
    first = browser.find_element("css selector", "#compare-rows tr a")
    first.click()
    wait_ready(browser)
    assert browser.find_elements("id", "p0-grid") and browser.find_elements("id", "p1-grid")


@pytest.mark.slow
def test_previous_and_next_walk_the_filtered_list_in_question_order(browser, runs) -> None:
    from selenium.webdriver.common.keys import Keys

    a, _, root = runs
    site = api.view([a], root / "site-a").parent
    open_page(browser, site)
    browser.find_element("id", "filter-split").click()
    keys = [r.get_attribute("data-key") for r in browser.find_elements("css selector", "#rows tr")]
    assert set(keys) == expected_sets(a)["split"] and len(keys) > 2
    numbers = [int(k.split("-")[-1]) for k in keys]
    assert numbers == sorted(numbers)  # arith-2 before arith-10, not completion order

    def step(how) -> None:
        browser.execute_script("document.body.removeAttribute('data-ready')")
        how()
        wait_ready(browser)

    step(lambda: browser.find_element("css selector", "#rows tr a").click())
    seen = []
    for i in range(len(keys)):
        seen.append(text_of(browser, ".question h2"))
        position = text_of(browser, "#position").split()
        assert position == [str(i + 1), "of", str(len(keys)), "filtered", "debates"]
        if i == len(keys) - 1:
            break
        if i % 2:  # the button, then the key
            step(lambda: browser.find_element("id", "next-debate").click())
        else:
            step(lambda: browser.find_element("tag name", "body").send_keys(Keys.ARROW_RIGHT))
    assert seen == [f"Question {k.split('/')[1]}" for k in keys]
    assert browser.find_elements("css selector", "span#next-debate.off")  # the list's end
    step(lambda: browser.find_element("tag name", "body").send_keys(Keys.ARROW_LEFT))
    assert text_of(browser, ".question h2") == seen[-2]
    step(lambda: browser.find_element("id", "back").click())
    assert browser.find_element("id", "filter-split").is_selected()  # the filter is kept


@pytest.mark.slow
def test_four_runs_side_by_side_never_scroll_the_page_sideways(browser, runs, more_runs) -> None:
    a, b, root = runs
    site = api.view([a, b, *more_runs], root / "site-abcd").parent
    browser.set_window_size(1100, 900)
    try:
        open_page(browser, site)
        assert no_sideways_scroll(browser)
        go(browser, "#/compare")
        from selenium.webdriver.support.ui import Select

        Select(browser.find_element("id", "compare-filter")).select_by_value("all")
        assert no_sideways_scroll(browser)
        assert len(browser.find_elements("css selector", "#compare-rows tr")) == 30
        step_to = browser.find_element("css selector", "#compare-rows tr a").get_attribute("href")
        go(browser, "#" + step_to.split("#", 1)[1])
        for i in range(4):
            assert browser.find_elements("id", f"p{i}-grid")
            browser.find_element("id", f"p{i}-cell-2-2").click()
            assert browser.find_element("id", f"p{i}-card-2").is_displayed()
        assert no_sideways_scroll(browser)
    finally:
        browser.set_window_size(1400, 1000)


@pytest.mark.slow
def test_reads_are_said_once_a_round_when_all_read_all_else_in_each_cell(
    browser, runs, more_runs
) -> None:
    a, _, root = runs
    sparse = more_runs[0]
    site = api.view([a, sparse], root / "site-reads").parent
    index = read_data(site, "index")["runs"]
    open_page(browser, site, "#/q/" + index[0]["debates"][0]["file"])
    for r in (1, 2):
        assert text_of(browser, f"#reads-{r}") == "each read all 5"
    assert not browser.find_elements("css selector", ".cell .sees")
    go(browser, "#/q/" + index[1]["debates"][0]["file"])
    assert not browser.find_elements("css selector", "[id^=reads-]")  # no line for a round
    page = read_data(site, index[1]["debates"][0]["file"])
    later = [t for t in page["turns"] if t["round"] > 0]
    assert any(len(t["sees"]) < 5 for t in later)  # sparse: the test means something
    for t in later:
        said = text_of(browser, f"#cell-{t['agent']}-{t['round']} .sees")
        whom = sorted(t["sees"])
        assert said == "read " + ("agent " if len(whom) == 1 else "agents ") + ", ".join(
            map(str, whom)
        )
    browser.find_element("id", "round-2").click()  # the round's line says each agent's too
    line = text_of(browser, "#round-line")
    for t in (t for t in later if t["round"] == 2):
        assert f"agent {t['agent']} read agents " in line


@pytest.mark.slow
def test_a_tied_vote_is_marked_with_its_tie(browser, runs) -> None:
    a, _, root = runs
    site = api.view([a], root / "site-a").parent
    rows = read_data(site, "index")["runs"][0]["debates"]
    row = next(r for r in rows if r["ties"][0] is not None and None in r["ties"])
    open_page(browser, site, "#/q/" + row["file"])
    for r, tie in enumerate(row["ties"]):
        marks = browser.find_elements("css selector", f"#vote-{r} .tie-mark")
        if tie is None:
            assert not marks and not browser.find_element("id", f"vote-{r}").get_attribute("title")
            continue
        assert tie.startswith("tie 2×") and tie.endswith(" by seeded draw")
        assert marks[0].is_displayed() and marks[0].text.strip() == "⚖ tie"
        assert marks[0].get_attribute("title") == tie
    assert f"⚖ {row['ties'][0]}." in text_of(browser, "#round-line")  # round 0's line
    assert "a tie the seeded draw broke" in text_of(browser, "#legend summary")
    go(browser, "#/")  # the list marks it too, its tie in the vote's title
    vote = browser.find_elements("css selector", f'#rows tr[data-key="{row["key"]}"] .vote')[0]
    assert "tied" in vote.get_attribute("class").split()
    assert vote.get_attribute("title").endswith(f"({row['ties'][0]})")


@pytest.mark.slow
def test_runs_side_by_side_show_their_paired_votes_and_mcnemars_p(browser, runs) -> None:
    from mad_eval.measure.mcnemar import mcnemar_p

    a, b, root = runs
    site = api.view([a, b], root / "site-ab").parent
    open_page(browser, site, "#/compare")
    last = {"a": votes_after_debate(a), "b": votes_after_debate(b)}
    keys = [k for k in last["a"] if last["a"][k] is not None and last["b"][k] is not None]
    want = {
        "both_right": {k for k in keys if last["a"][k] and last["b"][k]},
        "a_right_b_wrong": {k for k in keys if last["a"][k] and not last["b"][k]},
        "a_wrong_b_right": {k for k in keys if not last["a"][k] and last["b"][k]},
        "both_wrong": {k for k in keys if not last["a"][k] and not last["b"][k]},
    }
    table = "#paired-debate"
    for cell, debates in want.items():
        assert text_of(browser, f'{table} td[data-cell="{cell}"]') == str(len(debates))
    p = mcnemar_p(len(want["a_right_b_wrong"]), len(want["a_wrong_b_right"]))
    said = "< 0.001" if p < 0.001 else f"= {p:.3f}"
    assert text_of(browser, f"{table} .mcnemar") == f"30 debates; McNemar's exact p {said}"
    assert browser.find_elements("css selector", "#paired-maj .mcnemar")
    browser.find_element("css selector", f'{table} td[data-cell="a_right_b_wrong"] a').click()
    listed = browser.find_elements("css selector", "#compare-rows tr")
    assert {r.get_attribute("data-key") for r in listed} == want["a_right_b_wrong"]
    from selenium.webdriver.support.ui import Select

    Select(browser.find_element("id", "run-a")).select_by_value("1")  # B against A: swapped
    Select(browser.find_element("id", "run-b")).select_by_value("0")
    assert text_of(browser, f'{table} td[data-cell="a_right_b_wrong"]') == str(
        len(want["a_wrong_b_right"])
    )


@pytest.mark.slow
def test_a_runs_alerts_are_shown_on_its_page(browser, runs, tmp_path) -> None:
    import shutil

    a, _, _ = runs
    loud, old = tmp_path / "loud", tmp_path / "old"
    shutil.copytree(a, loud)
    shutil.copytree(a, old)
    metrics = json.loads((a / "metrics.json").read_text())
    metrics.pop("alerts", None)
    (old / "metrics.json").write_text(json.dumps(metrics))  # as written before alerts
    alerts = [
        "Most answers (80%) are unparsed: the model does not write the answer protocol.",
        "<b>Half</b> the turns were cut off at the token limit.",
    ]
    (loud / "metrics.json").write_text(json.dumps({**metrics, "alerts": alerts}))
    site = api.view([loud, old], tmp_path / "site").parent
    open_page(browser, site, "#/run/0")
    shown = browser.find_elements("css selector", "#alerts li")
    assert [li.get_attribute("textContent") for li in shown] == alerts
    assert browser.find_element("id", "alerts").is_displayed()
    assert not browser.find_elements("css selector", "#alerts b")
    assert "⚠ 2" in browser.find_element("css selector", '#runs tr[data-run="0"]').text
    go(browser, "#/run/1")
    assert not browser.find_elements("id", "alerts")  # an old folder: nothing, no error
    assert browser.find_elements("css selector", "#rows tr")


@pytest.mark.slow
def test_a_judged_debate_shows_roles_order_verdicts_and_where_it_ended(browser, tmp_path) -> None:
    run = sim_run(tmp_path / "judged", limit=20, agents=3, rounds=3, protocol="judged")
    site = api.view([run], tmp_path / "site").parent
    stops = RunStore(run).stops()
    rows = read_data(site, "index")["runs"][0]["debates"]
    row = next(r for r in rows if (r["seed_run"], r["question"]) in stops)
    assert "stopped" in row["tags"]
    stop = stops[(row["seed_run"], row["question"])]
    open_page(browser, site, "#/q/" + row["file"])
    grid = browser.find_element("id", "grid").text
    for name in ("affirmative", "negative", "judge"):
        assert name in grid
    assert text_of(browser, "#stop") == (
        f"Ended after round {stop.round}: {stop.why}. "
        f"Later rounds count round {stop.round}'s answers."
    )
    ended = browser.find_elements("css selector", "td.cell.ended")
    assert len(ended) == 3 * (3 - stop.round)  # every agent, every round after the stop
    browser.find_element("id", f"cell-2-{stop.round}").click()
    card = browser.find_element("id", "card-2").text
    assert "verdict: end" in card and "judge" in card
    line = text_of(browser, "#round-line")
    assert "Spoke in order: 0 → 1 → 2." in line
