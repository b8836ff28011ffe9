"""mad-eval view in a real browser: Debian's Chromium, headless, driven by Selenium over
file:// pages (no server, nothing downloaded). Skipped where /usr/bin/chromium is missing;
CI installs it (.ci/run), so there they always run."""

from __future__ import annotations

import json
import time
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


@pytest.mark.slow
def test_overview_shows_metrics_json(browser, runs) -> None:
    a, _, root = runs
    site = api.view([a], root / "site-a").parent
    open_page(browser, site)
    metrics = json.loads((a / "metrics.json").read_text())
    for name in ("maj", "debate", "delta"):
        cell = browser.find_element("css selector", f'#runs td[data-field="{name}"]')
        assert cell.text == f"{metrics[name]:.1f}"
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
    turns = [t for t in RunStore(a).read_turns() if t.question == row["question"]]
    open_page(browser, site, "#/q/" + row["file"])
    assert text_of(browser, "#gold") == row["gold"]
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
    assert text_of(browser, "#reply-raw") == pick.text
    assert pick.answer in browser.find_element("id", "reply-rendered").text
    assert "prompt it was sent" in text_of(browser, "#detail")


def _changed(turn: Turn, turns: list[Turn]) -> bool:
    before = next(t for t in turns if (t.agent, t.round) == (turn.agent, turn.round - 1))
    return before.answer_class != turn.answer_class


@pytest.mark.slow
def test_hostile_reply_is_text_and_runs_nothing(browser, tmp_path) -> None:
    run, turn = hostile_run(tmp_path / "run")
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
        assert browser.execute_script(shown, "reply-rendered", part), part
    browser.find_element("id", "reply-toggle").click()
    assert browser.find_element("id", "reply-raw").is_displayed()
    raw = "return JSON.stringify(document.getElementById('reply-raw').textContent)"
    assert json.loads(browser.execute_script(raw)) == HOSTILE  # every character, as recorded
    found = browser.execute_script(
        "return document.querySelectorAll("
        "'#detail img, #detail script, #detail a, #detail b').length"
    )
    assert found == 0
    for element in browser.find_elements("css selector", "#detail *"):
        element.location_once_scrolled_into_view  # noqa: B018 - hovering and showing it
    time.sleep(0.2)
    assert browser.execute_script("return window.__pwned === undefined")


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
