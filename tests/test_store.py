"""The run folder: one writer at a time, failed turns asked again in place, and damaged
files named in one sentence."""

from __future__ import annotations

import json
import signal
import sqlite3
import time

import pytest
from cli_helpers import mad_eval, small_run, start, turns_of, without_timing
from stub_server import StubServer

from mad_eval.backends.cache import APPLICATION_ID
from mad_eval.debate.engine import to_ask_again
from mad_eval.protocols import resolve
from mad_eval.records import Turn
from mad_eval.store.folder import Recorded, StoreError, read_debates, read_records


def keys(turns: list[dict]) -> set[tuple]:
    return {(t["run"], t["question"], t["round"], t["agent"]) for t in turns}


# --- one writer per folder ----------------------------------------------------------------


@pytest.mark.slow
def test_a_second_process_on_a_folder_in_use_is_refused_until_the_first_ends(tmp_path):
    args = ["run", "--model", "sim:delay=0.05", "--agents", "2", "--rounds", "1", "--limit", "40",
            "--concurrency", "1"]  # fmt: skip
    first = start([*args, "--out", "r"], tmp_path)
    lock = tmp_path / "r" / ".lock"
    deadline = time.monotonic() + 60
    while not (lock.exists() and lock.read_text().startswith("PID")):
        assert time.monotonic() < deadline and first.poll() is None
        time.sleep(0.02)
    try:
        for second in (
            [*args, "--out", "r"],
            ["judge", "r", "--judge", "sim-judge"],
        ):
            result = mad_eval(*second, cwd=tmp_path)
            assert result.returncode == 2
            assert result.stderr.startswith(
                f"error: r is in use by another mad-eval process (PID {first.pid}: mad-eval run "
                "--model sim:delay=0.05"
            ), result.stderr
            assert "wait for it to finish, or use another folder." in result.stderr
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
    # kill -9 released the lock: the command resumes the run (at full speed now).
    resumed = mad_eval(*args[:-2], "--out", "r", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert len(turns_of(tmp_path / "r")) == 40 * 2 * 2 == len(keys(turns_of(tmp_path / "r")))


# --- failed turns asked again in place ------------------------------------------------------


def turn(round_: int, agent: int, failed: bool = False, question: str = "q") -> Turn:
    return Turn(0, question, round_, agent, "m", 0, 1.0, 1.0, 8, "h", [], None, None, None,
                None, None, None, 0.0, error="HTTP 500" if failed else None)  # fmt: skip


def test_what_is_asked_again_follows_who_read_the_failed_turn():
    # Four agents on a ring (each reads itself and its two neighbours), three rounds;
    # agent 0 failed in round 1 of question q, nothing failed in question p.
    sparse = resolve("sparse:degree=2").protocol
    done = {
        t.key: t for t in [turn(r, a, failed=(r, a) == (1, 0)) for r in range(4) for a in range(4)]
    }
    done |= {t.key: t for t in [turn(r, a, question="p") for r in range(4) for a in range(4)]}
    again = to_ask_again(done, sparse, 4)
    assert again == {
        (0, "q", 1, 0),  # the failed turn
        (0, "q", 2, 0), (0, "q", 2, 1), (0, "q", 2, 3),  # its readers in round 2
        *((0, "q", 3, a) for a in range(4)),  # and theirs: everyone by round 3
    }  # fmt: skip
    # Decentralized: everyone read the failed turn.
    everyone = resolve("decentralized").protocol
    assert to_ask_again(done, everyone, 4) == {(0, "q", 1, 0)} | {
        (0, "q", r, a) for r in (2, 3) for a in range(4)
    }
    # Agents that read only themselves: only the failed agent's own later turns.
    alone = resolve("reflection").protocol
    assert to_ask_again(done, alone, 4) == {(0, "q", r, 0) for r in (1, 2, 3)}


@pytest.mark.slow
def test_retry_failed_turns_a_faulty_run_into_the_fault_free_one(tmp_path):
    args = ["--agents", "3", "--rounds", "2", "--limit", "6", "--retries", "0"]

    def run(url: str, out: str, *extra: str):
        return mad_eval("run", "--model", "openai:stub-model", "--base-url", url, *args,
                        "--out", out, *extra, cwd=tmp_path)  # fmt: skip

    with StubServer() as healthy:
        assert run(healthy.base_url, "clean").returncode == 0
    with StubServer(fail_if=lambda body: body["seed"] % 5 == 0) as faulty:
        first = run(faulty.base_url, "r")
    assert first.returncode == 0, first.stderr
    faulty_turns = turns_of(tmp_path / "r")
    failed = [t for t in faulty_turns if t["error"]]
    assert failed and len(faulty_turns) == 6 * 3 * 3
    assert (
        f"{len(failed)} requests failed (their errors are in turns.jsonl); run the same "
        "mad-eval run command with --retry-failed to ask again." in " ".join(first.stderr.split())
    )

    with StubServer() as healthy:
        resumed = run(healthy.base_url, "r")  # a plain resume asks nothing
        assert resumed.returncode == 0 and not healthy.requests
        retried = run(healthy.base_url, "r", "--retry-failed")
        asked = len(healthy.requests)
    assert retried.returncode == 0, retried.stderr
    assert f"Asking again {len(failed)} failed turns and" in retried.stdout
    clean = turns_of(tmp_path / "clean")
    # Only the server that answered differs (it moved to another port).
    assert without_timing(
        [{**t, "endpoint": None} for t in turns_of(tmp_path / "r")]
    ) == without_timing([{**t, "endpoint": None} for t in clean])
    # The replaced records are kept for audit: the failed turns and those built without them.
    superseded = turns_of(tmp_path / "r" / "superseded")
    assert len(superseded) == asked and keys(failed) <= keys(superseded)
    assert all(t["round"] > min(f["round"] for f in failed if f["question"] == t["question"])
               for t in superseded if not t["error"])  # fmt: skip
    metrics = [json.loads((tmp_path / d / "metrics.json").read_text()) for d in ("r", "clean")]
    assert metrics[0]["failed_turns"] == 0 and metrics[0]["debate"] == metrics[1]["debate"]


# --- damaged files: one sentence each -----------------------------------------------------


def test_a_truncated_manifest_is_named(tmp_path):
    small_run(tmp_path)
    manifest = tmp_path / "r" / "manifest.json"
    manifest.write_text(manifest.read_text()[:100])
    for args in (["report", "r"], ["run", "--agents", "2", "--rounds", "1", "--limit", "3",
                                   "--out", "r"]):  # fmt: skip
        result = mad_eval(*args, cwd=tmp_path)
        assert result.returncode == 2
        assert result.stderr.startswith("error: r/manifest.json is damaged (")
        assert "restore it from a copy, or start the run anew in another folder." in result.stderr


def test_invalid_utf8_in_the_records_is_named_by_line(tmp_path):
    small_run(tmp_path)
    turns_file = tmp_path / "r" / "turns.jsonl"
    lines = turns_file.read_bytes().splitlines(keepends=True)
    turns_file.write_bytes(
        b"".join(lines[:3]) + b'{"run": 0, "text": "\xff\xfe"}\n' + b"".join(lines[3:])
    )
    result = mad_eval("report", "r", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "error: r/turns.jsonl line 4 is not UTF-8 text; fix or remove that line."
    )


def test_another_programs_database_is_refused_as_a_cache(tmp_path):
    other = sqlite3.connect(tmp_path / "app.db")
    other.execute("CREATE TABLE users (name TEXT)")
    other.commit()
    other.close()
    result = mad_eval("run", "--limit", "1", "--cache", "app.db", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "error: app.db is a database of another program (it holds users), not a mad-eval "
        "request cache; pass a new file to --cache."
    )
    tables = sqlite3.connect(tmp_path / "app.db").execute("SELECT name FROM sqlite_master")
    assert [row[0] for row in tables] == ["users"]  # nothing of ours written into it


def test_a_cache_from_before_the_mark_is_still_ours(tmp_path):
    old = sqlite3.connect(tmp_path / "old.db")
    old.execute(
        "CREATE TABLE answers (key TEXT PRIMARY KEY, value TEXT NOT NULL, created REAL NOT NULL)"
    )
    old.commit()
    old.close()
    result = mad_eval("run", "--agents", "2", "--rounds", "1", "--limit", "2", "--cache", "old.db",
                      "--out", "r", cwd=tmp_path)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "0 answers reused, 8 new ones stored" in result.stdout
    (mark,) = sqlite3.connect(tmp_path / "old.db").execute("PRAGMA application_id").fetchone()
    assert mark == APPLICATION_ID  # marked as ours now


def _turn(run: int, question: str, round_: int, agent: int, answer: str) -> Turn:
    return Turn(run, question, round_, agent, "sim", 1, 1.0, 1.0, 8, "h", [], answer, answer,
                answer == "1", "stop", 1, 1, 0.0)  # fmt: skip


def test_debates_come_whole_and_as_soon_as_their_last_line_is_read(tmp_path):
    path = tmp_path / "turns.jsonl"
    odd = 'q "é\\\\'  # a question id the fast path cannot read: the line is read whole
    turns = [
        _turn(0, "a", 0, 0, "1"),
        _turn(0, odd, 0, 0, "2"),
        _turn(1, "a", 0, 0, "3"),
        _turn(0, "a", 0, 1, "4"),
        _turn(0, odd, 0, 1, "5"),
        _turn(0, "a", 0, 0, "6"),  # asked again: the later record of a key wins
    ]
    path.write_text("".join(t.to_json() + "\n" for t in turns) + '{"run": 0, "quest')
    debates = read_debates(path)
    assert (debates.runs, debates.questions, debates.count) == ([0, 1], ["a", odd], 3)
    read = [[t.answer for t in debate] for debate in debates.each]
    # (1, a) ends on line 3, (0, odd) on line 5, (0, a) on line 6; the partial line is no turn.
    assert read == [["3"], ["2", "5"], ["6", "4"]]
    # The same turns as reading the whole file at once.
    every = sorted((t.key, t.answer) for d in read_debates(path).each for t in d)
    whole = {t.key: t for t in read_records(path, Turn.from_json, "a turn record")}
    assert every == sorted((key, t.answer) for key, t in whole.items())


def test_recorded_turns_are_indexed_by_key_and_read_when_asked_for(tmp_path):
    path = tmp_path / "turns.jsonl"
    odd = 'q "é\\\\'
    turns = [_turn(0, "a", 0, 0, "1"), _turn(0, odd, 1, 2, "2"), _turn(0, "a", 0, 0, "3")]
    path.write_text("".join(t.to_json() + "\n" for t in turns) + '{"run": 0, "quest')
    done = Recorded.index(path)
    assert sorted(done, key=str) == sorted([(0, "a", 0, 0), (0, odd, 1, 2)], key=str)
    assert done[(0, "a", 0, 0)].answer == "3"  # a repeated key is its last record
    assert done[(0, odd, 1, 2)] == turns[1]
    assert (0, "a", 1, 0) not in done and len(done) == 2
    assert path.read_text().endswith("}\n")  # the partial last line is cut
    with path.open("ab") as f:  # a line that is no record is named when it is read
        f.write(b'{"run": 0, "question": "b", "round": 0, "agent": 0, "text": 1}\n')
    broken = Recorded.index(path)
    with pytest.raises(StoreError, match="line 4 is not a turn record"):
        broken[(0, "b", 0, 0)]
