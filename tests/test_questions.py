"""A run folder holds its questions: later commands work with neither the benchmark nor the
network, a benchmark edited under a run stops its resume, and folders recorded before
questions.jsonl existed still report, judge and resume."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
from cli_helpers import mad_eval, small_run, start, turns_of

from mad_eval.data.benchmarks import load_questions
from mad_eval.records import Question
from mad_eval.store.folder import StoreError
from mad_eval.store.questions import QUESTIONS_FILE, read_questions, write_questions

# Nothing may be read from the benchmark's source: no data folder, no hub.
OFFLINE: dict[str, str | None] = {"MAD_EVAL_DATA": None, "HF_HUB_OFFLINE": "1"}


def lines_of(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_run_records_the_questions_it_asked(tmp_path):
    small_run(tmp_path)
    recorded = lines_of(tmp_path / "r" / QUESTIONS_FILE)
    _, asked = load_questions("arith", limit=3)
    assert [line["id"] for line in recorded] == [q.id for q in asked]
    assert [(line["text"], line["gold"]) for line in recorded] == [(q.text, q.gold) for q in asked]
    assert {(line["kind"], line["answer"]) for line in recorded} == {("math", "boxed")}
    assert [line["sha256"] for line in recorded] == [q.sha256 for q in asked]
    manifest = json.loads((tmp_path / "r" / "manifest.json").read_text())
    assert [line["id"] for line in recorded] == manifest["benchmark"]["questions"]


def test_questions_read_back_as_they_were_written(tmp_path):
    choice = Question(
        "c1",
        "Which? \udc80 A) x B) y ✓",  # non-ASCII text survives; a lone surrogate (in a
        # file from before benchmarks made it U+FFFD) reads as the benchmark now gives it
        "B",
        {"options": ["x", "y"], "count": np.int64(3), "scores": np.array([1.5, 2.0])},
        "choice",
        "answer-line",
    )
    plain = Question("m1", "What is 1 + 1?", "2")
    write_questions(tmp_path, [choice, plain])
    found = read_questions(tmp_path)
    assert found == {
        "c1": dataclasses.replace(choice, text="Which? \ufffd A) x B) y ✓"),
        "m1": plain,
    }
    assert found["c1"].meta == {"options": ["x", "y"], "count": 3, "scores": [1.5, 2.0]}
    assert found["c1"].options == ["x", "y"] and found["c1"].answer == "answer-line"
    assert read_questions(tmp_path / "elsewhere") is None  # a folder from before the file


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            lambda line: line.replace('"gold": "2"', '"gold": "3"'),
            "line 2 (question 'm1') was edited after the run recorded it (its sha256 no longer "
            "matches)",
        ),
        (lambda line: line[:20], "line 2 is not a question ("),
        (lambda line: line.replace('"text"', '"texts"'), 'line 2 is not a question ("text" is'),
    ],
)
def test_a_damaged_questions_file_is_named_by_line(tmp_path, edit, message):
    write_questions(tmp_path, [Question("m0", "What is 0 + 0?", "0"), Question("m1", "1+1?", "2")])
    path = tmp_path / QUESTIONS_FILE
    first, second = path.read_text().splitlines()
    path.write_text(f"{first}\n{edit(second)}\n")
    with pytest.raises(StoreError) as caught:
        read_questions(tmp_path)
    assert str(caught.value).startswith(f"{path} {message}")
    assert str(caught.value).endswith(
        "; restore it from a copy, or delete it to read the questions from the benchmark again."
    )


@pytest.mark.slow
def test_judge_and_pairs_need_neither_the_benchmark_nor_the_network(tmp_path, shared_data):
    data = ("--benchmark", "math500", "--data-dir", str(shared_data), "--limit", "4")
    made = mad_eval("run", *data, "--agents", "3", "--rounds", "1", "--out", "r", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    made = mad_eval("single", "-k", "4", *data, "--out", "s", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    judged = mad_eval("judge", "r", "--judge", "sim-judge", cwd=tmp_path, env=OFFLINE)
    assert judged.returncode == 0, judged.stderr
    assert len(lines_of(tmp_path / "r" / "judge.jsonl")) == 4 * 3  # every debate turn
    assert "skipped" not in judged.stdout + judged.stderr
    paired = mad_eval("train", "pairs", "s", "--out", "p.jsonl", cwd=tmp_path, env=OFFLINE)
    assert paired.returncode == 0, paired.stderr
    texts = {json.loads(line)["id"]: json.loads(line)["problem"] for line in
             (shared_data / "math500.jsonl").read_text().splitlines()[:4]}  # fmt: skip
    for row in lines_of(tmp_path / "p.jsonl"):
        qid = row["extra_info"]["question_id"]
        assert texts[qid] in row["prompt"][-1]["content"]


def edited_run(tmp_path: Path, shared_data: Path) -> tuple[Path, tuple[str, ...]]:
    """A finished run on a copy of AMC23's first questions, whose second question's text
    was then edited; the run's command."""
    bench = tmp_path / "amc.jsonl"
    bench.write_text("".join((shared_data / "amc23.jsonl").read_text().splitlines(True)[:3]))
    command = ("run", "--benchmark", str(bench), "--agents", "2", "--rounds", "1", "--out", "r")
    made = mad_eval(*command, cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    rows = [json.loads(line) for line in bench.read_text().splitlines()]
    rows[1]["problem"] += " Give your answer in miles."
    bench.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return bench, command


def test_a_benchmark_edited_under_a_run_stops_its_resume(tmp_path, shared_data):
    bench, command = edited_run(tmp_path, shared_data)
    turns = (tmp_path / "r" / "turns.jsonl").read_bytes()
    refused = mad_eval(*command, cwd=tmp_path)
    assert refused.returncode == 2
    assert refused.stderr.strip() == (
        "error: r holds a run on other questions than the benchmark gives now: question "
        "'amc23-1' was edited since the run read it; restore the benchmark's file as the run "
        "read it to resume, or pass another --out."
    )
    assert (tmp_path / "r" / "turns.jsonl").read_bytes() == turns
    bench.write_text(bench.read_text().replace('"answer": "27"', '"answer": "28"'))
    refused = mad_eval(*command, cwd=tmp_path)
    assert "question 'amc23-0' was edited since the run read it (2 questions differ in all)" in (
        refused.stderr
    )


@pytest.mark.slow
def test_the_judge_reads_the_questions_the_run_asked_not_the_edited_ones(tmp_path, shared_data):
    bench, _ = edited_run(tmp_path, shared_data)
    bench.unlink()  # and then gone altogether: the folder still holds everything
    judged = mad_eval("judge", "r", "--judge", "sim-judge", cwd=tmp_path, env=OFFLINE)
    assert judged.returncode == 0, judged.stderr
    assert "skipped" not in judged.stdout + judged.stderr  # every prompt rebuilt exactly
    assert len(lines_of(tmp_path / "r" / "judge.jsonl")) == 3 * 2


@pytest.mark.slow
def test_a_folder_from_before_questions_were_recorded_reports_judges_and_resumes(
    tmp_path, shared_data
):
    data = ("--benchmark", "math500", "--data-dir", str(shared_data))
    command = ("run", *data, "--agents", "2", "--rounds", "1", "--limit", "3", "--out", "r")
    assert mad_eval(*command, cwd=tmp_path).returncode == 0
    folder = tmp_path / "r"
    recorded = (folder / QUESTIONS_FILE).read_text()
    metrics = json.loads((folder / "metrics.json").read_text())
    (folder / QUESTIONS_FILE).unlink()
    manifest = json.loads((folder / "manifest.json").read_text())
    del manifest["schema_version"]
    (folder / "manifest.json").write_text(json.dumps(manifest, indent=2))

    reported = mad_eval("report", "r", cwd=tmp_path)
    assert reported.returncode == 0, reported.stderr
    again = json.loads((folder / "metrics.json").read_text())
    # The same numbers; with no golds beside them, the verdicts are said to go unchecked.
    assert [alert.split(":")[0] for alert in again.pop("alerts")] == [
        "Its answers were counted right or wrong as recorded, unchecked"
    ]
    assert again == {k: v for k, v in metrics.items() if k != "alerts"}
    judge = ("judge", "r", "--judge", "sim-judge")
    offline = mad_eval(*judge, cwd=tmp_path, env=OFFLINE)  # its questions are elsewhere
    assert offline.returncode == 2 and "pass --data-dir" in offline.stderr
    judged = mad_eval(*judge, "--data-dir", str(shared_data), cwd=tmp_path, env=OFFLINE)
    assert judged.returncode == 0, judged.stderr
    assert len(lines_of(folder / "judge.jsonl")) == 3 * 2
    assert not (folder / QUESTIONS_FILE).exists()  # the judge writes nothing of the run's

    turns = turns_of(folder)
    resumed = mad_eval(*command, cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert "resuming: 12 turns already recorded" in resumed.stdout
    assert turns_of(folder) == turns
    assert (folder / QUESTIONS_FILE).read_text() == recorded  # recorded now, as then


def test_a_new_run_over_a_stale_questions_file_records_its_own(tmp_path):
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / QUESTIONS_FILE).write_text('{"left": "by a run that never began"}\n')
    small_run(tmp_path)
    assert [line["id"] for line in lines_of(tmp_path / "r" / QUESTIONS_FILE)] == [
        "arith-0",
        "arith-1",
        "arith-2",
    ]


@pytest.mark.slow
def test_questions_that_cannot_be_written_stop_the_run_before_it_begins(tmp_path):
    args = ["run", "--agents", "2", "--rounds", "1", "--limit", "3", "--out", "r"]
    proc = start(args, tmp_path, file_limit=200)  # less than the three questions take
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 2
    assert [line for line in stderr.splitlines() if line] == [
        "error: cannot write r/questions.jsonl (File too large); free space and run the same "
        "command again."
    ]
    assert sorted(p.name for p in (tmp_path / "r").iterdir()) == [".lock"]  # no run, no tmp
    small_run(tmp_path)
    assert len(lines_of(tmp_path / "r" / QUESTIONS_FILE)) == 3
