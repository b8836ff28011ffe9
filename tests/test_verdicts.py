"""The verdict cache: what math-verify decided is kept in memory and, beside a run's request
cache, on disk; a re-run sharing that cache asks math-verify nothing, a grader of another
version finds none of it, and a file that cannot serve never stops grading."""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

import mad_eval
from mad_eval.grading import verdicts, verifier
from mad_eval.grading.grader import compare_math
from mad_eval.grading.verdicts import VERDICTS
from mad_eval.grading.verifier import NeedsWorker, grader_pids, inline, stop_graders
from mad_eval.grading.verify_worker import Comparison
from mad_eval.store.verdict_file import beside, keep_verdicts_beside

# Golds no plain number equals: every wrong answer of the simulated agents (numbers) is
# compared by math-verify.
GOLDS = [r"\sqrt{2}", r"\frac{\pi}{3}", r"2\sqrt{5}", r"\sqrt{7}"]


@pytest.fixture(autouse=True)
def fresh() -> Iterator[None]:
    stop_graders()
    VERDICTS.forget()
    yield
    VERDICTS.forget()
    stop_graders()


def as_a_new_process(cache: Path) -> None:
    """Nothing in memory, no worker running, the file beside `cache` opened afresh."""
    stop_graders()
    VERDICTS.forget()
    keep_verdicts_beside(cache)


def asks_a_worker(answer: str, gold: str) -> bool:
    with inline():
        try:
            compare_math(answer, gold)
        except NeedsWorker:
            return True
    return False


@pytest.mark.slow
def test_a_rerun_sharing_the_request_cache_asks_math_verify_nothing(tmp_path: Path) -> None:
    benchmark = tmp_path / "roots.jsonl"
    rows = [{"id": f"r{i}", "question": f"Question {i}?", "answer": g} for i, g in enumerate(GOLDS)]
    benchmark.write_text("".join(json.dumps(row) + "\n" for row in rows))
    cache = tmp_path / "requests.sqlite"
    settings = {"benchmark": str(benchmark), "agents": 3, "rounds": 1, "cache": str(cache)}
    mad_eval.run(**settings, out=tmp_path / "first")
    asked = VERDICTS.asked
    assert asked > 0 and beside(cache).is_file()
    stop_graders()
    VERDICTS.forget()  # as a new process: nothing in memory, no worker

    mad_eval.run(**settings, out=tmp_path / "again")
    assert VERDICTS.asked == asked and grader_pids() == []

    def graded(folder: str) -> list[tuple]:
        lines = (tmp_path / folder / "turns.jsonl").read_text().splitlines()
        return [
            (t["question"], t["round"], t["agent"], t["answer"], t["correct"], t["answer_class"])
            for t in map(json.loads, lines)
        ]

    assert sorted(graded("first")) == sorted(graded("again"))


@pytest.mark.slow
def test_kept_verdicts_are_math_verifys_and_a_grader_change_finds_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "requests.sqlite"
    keep_verdicts_beside(cache)
    assert compare_math(r"\sqrt{4}", "2") == Comparison(True, False)
    assert compare_math("3", r"\sqrt{2}") == Comparison(False, False)
    as_a_new_process(cache)
    assert not asks_a_worker(r"\sqrt{4}", "2") and not asks_a_worker("3", r"\sqrt{2}")
    assert compare_math(r"\sqrt{4}", "2") == Comparison(True, False)
    assert asks_a_worker("2", r"\sqrt{4}")  # another pair (the gold's side matters)
    monkeypatch.setattr(verdicts, "grader", lambda: "mad-eval 2; math-verify 9.9")
    assert asks_a_worker(r"\sqrt{4}", "2")


def test_a_verdict_reached_by_running_out_of_time_is_not_kept_on_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "requests.sqlite"
    keep_verdicts_beside(cache)
    monkeypatch.setattr(verifier, "_ask_twice", lambda *_: Comparison(False, True))
    assert compare_math("x^{9^9}", "1") == Comparison(False, True)
    assert not asks_a_worker("x^{9^9}", "1")  # this process remembers it ...
    as_a_new_process(cache)
    assert asks_a_worker("x^{9^9}", "1")  # ... the next one asks again


def test_five_threads_asking_one_comparison_make_one_request(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import threading
    from concurrent.futures import ThreadPoolExecutor

    asked: list[str] = []
    release = threading.Event()

    def slow(call, timed_out, request, what, parses=()):
        asked.append(request)
        release.wait(timeout=60)
        return Comparison(True, False)

    monkeypatch.setattr(verifier, "_ask_twice", slow)
    with ThreadPoolExecutor(5) as pool:
        futures = [pool.submit(compare_math, "2^{1/2}", r"\sqrt{2}") for _ in range(5)]
        while not asked:
            release.wait(timeout=0.01)
        release.set()
        assert [f.result() for f in futures] == [Comparison(True, False)] * 5
    assert asked == ["a comparison"]


@pytest.mark.parametrize("how", ["foreign", "link", "folder"])
def test_a_file_that_cannot_serve_is_given_up_with_one_warning(
    tmp_path: Path, how: str, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "requests.sqlite"
    path = beside(cache)
    if how == "foreign":
        with sqlite3.connect(path) as db:
            db.execute("CREATE TABLE notes (text TEXT)")
    elif how == "link":
        (tmp_path / "elsewhere").write_text("not ours\n")
        path.symlink_to(tmp_path / "elsewhere")
    else:  # no file can be made there
        path.mkdir()
    with caplog.at_level(logging.WARNING):
        keep_verdicts_beside(cache)
        monkeypatch.setattr(verifier, "_ask_twice", lambda *_: Comparison(True, False))
        assert compare_math("2^{1/2}", r"\sqrt{2}") == Comparison(True, False)
        assert compare_math("2^{1/2}", r"\sqrt{2}") == Comparison(True, False)
    warned = [r for r in caplog.records if "verdict cache" in r.getMessage()]
    assert len(warned) == 1 and "grading goes on" in warned[0].getMessage()
    if how == "foreign":
        with sqlite3.connect(path) as db:
            tables = [row[0] for row in db.execute("SELECT name FROM sqlite_master")]
        assert tables == ["notes"]
    if how == "link":
        assert (tmp_path / "elsewhere").read_text() == "not ours\n"


def test_a_verdict_file_edited_by_someone_else_is_data_never_a_crash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rows of the wrong shape, not JSON or too long are no verdicts: the pair is asked again."""
    cache = tmp_path / "requests.sqlite"
    keep_verdicts_beside(cache)
    pairs = [("2^{1/2}", r"\sqrt{2}"), ("3", r"\sqrt{2}"), ("4", r"\sqrt{2}"), ("5", r"\sqrt{2}")]
    monkeypatch.setattr(verifier, "_ask_twice", lambda *_: Comparison(False, False))
    for answer, gold in pairs:
        compare_math(answer, gold)
    VERDICTS.shelve(None)  # closes the file for this test to edit
    forged = ['[true, false, "x"]', "not json", '["yes", false]', "[" + "true," * 5000 + "true]"]
    with sqlite3.connect(beside(cache)) as db:
        keys = [row[0] for row in db.execute("SELECT key FROM verdicts ORDER BY created")]
        for row_key, value in zip(keys, forged, strict=True):
            db.execute("UPDATE verdicts SET value = ? WHERE key = ?", (value, row_key))
    as_a_new_process(cache)
    assert all(asks_a_worker(answer, gold) for answer, gold in pairs)
