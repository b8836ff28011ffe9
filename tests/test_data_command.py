"""`mad-eval data fetch|check` and the advice a missing benchmark file gets in each front end
(the API's keyword, a command's --data-dir, an experiment file's data_dir key). The hub is
faked throughout: nothing here touches the network."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
import typer
from cli_helpers import mad_eval, no_hub
from factories import write_jsonl

import mad_eval as api
from mad_eval.data import hub as online
from mad_eval.data.benchmarks import BenchmarkError, DataMissingError, load_questions
from mad_eval.data.files import check, check_folder, fetch

SHARED_ROWS = {
    "aime24": 30,
    "aime25": 30,
    "amc23": 40,
    "math500": 500,
    "mmlu_professional_medicine": 272,
}
ADVICE_TAIL = (
    "(`mad-eval data fetch math500 --to FOLDER` writes it from the hub, "
    "`mad-eval data check FOLDER` checks it)."
)


@pytest.fixture(autouse=True)
def _no_env_data(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test says where data comes from; HF_HUB_OFFLINE in a developer's shell must not
    turn a faked download failure into an offline one."""
    import huggingface_hub.constants

    monkeypatch.delenv("MAD_EVAL_DATA", raising=False)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _hub(monkeypatch: pytest.MonkeyPatch, files: dict[str, Path]) -> list[str]:
    """A reachable hub whose files are `files` (by repo); the repos asked, in order."""
    import huggingface_hub

    asked: list[str] = []

    def download(repo_id: str, filename: str, **kwargs: object) -> str:
        asked.append(repo_id)
        if repo_id not in files:
            raise OSError(f"404 {repo_id}")
        return str(files[repo_id])

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", download)
    monkeypatch.setattr(online, "hub_reachable", lambda: True)
    return asked


def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """No hub, and an empty hub cache: the client's cache lookup fails."""
    import huggingface_hub

    def download(*args: object, **kwargs: object) -> str:
        assert kwargs.get("local_files_only") is True  # never a request when unreachable
        raise OSError("not in the cache")

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", download)
    monkeypatch.setattr(online, "hub_reachable", lambda: False)


# ---- check -------------------------------------------------------------------------------------


def test_check_accepts_the_shared_data_folder(shared_data: Path, tmp_path: Path) -> None:
    states = check_folder(shared_data)
    assert {s.benchmark: s.rows for s in states} == SHARED_ROWS
    assert all(s.ok for s in states)
    result = mad_eval("data", "check", str(shared_data), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    for name, rows in SHARED_ROWS.items():
        assert any(name in line and f" {rows} " in line for line in result.stdout.splitlines())
    assert result.stdout.count(" ok ") == len(SHARED_ROWS)


def test_check_reads_the_folder_from_mad_eval_data(
    shared_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MAD_EVAL_DATA", str(shared_data))
    result = mad_eval("data", "check", "--benchmark", "amc23", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "amc23.jsonl" in result.stdout and "math500" not in result.stdout


def test_check_names_each_requested_benchmark(shared_data: Path, tmp_path: Path) -> None:
    asked = ("math500", "mmlu:anatomy", "arith", "aime24_dapo")
    states = {name: check(name, shared_data) for name in asked}
    assert states["math500"].ok and states["math500"].rows == 500
    assert states["aime24_dapo"].file == "aime24.jsonl" and states["aime24_dapo"].rows == 30
    assert states["arith"].ok and states["arith"].note == "built in: needs no file"
    assert states["mmlu:anatomy"].problem == f"mmlu_anatomy.jsonl is not in {shared_data}."
    args = [arg for name in asked for arg in ("--benchmark", name)]
    result = mad_eval("data", "check", str(shared_data), *args, cwd=tmp_path)
    assert result.returncode == 1  # one requested file is missing
    assert "mmlu_anatomy.jsonl is not in" in result.stdout


def test_check_says_what_is_wrong_with_each_broken_file(shared_data: Path, tmp_path: Path) -> None:
    folder = tmp_path / "data"
    folder.mkdir()
    shutil.copy(shared_data / "math500.jsonl", folder)
    amc = _rows(shared_data / "amc23.jsonl")[:3]
    del amc[1]["answer"]
    write_jsonl(folder / "amc23.jsonl", amc)
    (folder / "aime24.jsonl").write_text(
        '{"id": "aime24-0", "problem": "x", "answer": "1"}\n{oops\n'
    )
    aime25 = _rows(shared_data / "aime25.jsonl")[:2]
    aime25[1]["id"] = aime25[0]["id"]
    write_jsonl(folder / "aime25.jsonl", aime25)
    medicine = _rows(shared_data / "mmlu_professional_medicine.jsonl")[:2]
    medicine[0]["answer"] = "F"
    write_jsonl(folder / "mmlu_professional_medicine.jsonl", medicine)
    anatomy = _rows(shared_data / "mmlu_professional_medicine.jsonl")[:4]
    write_jsonl(folder / "mmlu_anatomy.jsonl", anatomy)  # any subject's file is recognised
    write_jsonl(folder / "notes.jsonl", [{"text": "mine"}])

    states = {s.benchmark or s.file: s for s in check_folder(folder)}
    assert states["math500"].ok and states["math500"].rows == 500
    assert states["mmlu:anatomy"].ok and states["mmlu:anatomy"].rows == 4
    assert states["amc23"].problem == "amc23.jsonl line 2: missing field 'answer'."
    assert states["aime24"].problem.startswith("aime24.jsonl line 2: invalid JSON")
    assert states["aime25"].problem.startswith("aime25.jsonl line 2: duplicate id 'aime25-0'")
    assert states["mmlu_professional_medicine"].problem.startswith(
        "mmlu_professional_medicine.jsonl line 1: answer 'F' is neither an option letter"
    )
    assert states["notes.jsonl"].ok and "no benchmark spec names" in states["notes.jsonl"].note
    result = mad_eval("data", "check", str(folder), cwd=tmp_path)
    assert result.returncode == 1
    assert "missing field 'answer'" in result.stdout and "notes.jsonl" in result.stdout

    for name in ("amc23", "aime24", "aime25", "mmlu_professional_medicine"):
        (folder / f"{name}.jsonl").unlink()
    assert mad_eval("data", "check", str(folder), cwd=tmp_path).returncode == 0  # rest is fine


def test_check_of_a_folder_without_benchmark_files(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    result = mad_eval("data", "check", str(empty), cwd=tmp_path)
    assert result.returncode == 1
    assert f"{empty} holds no benchmark file; `mad-eval data fetch NAME --to {empty}`" in (
        result.stdout
    )
    missing = mad_eval("data", "check", str(tmp_path / "nowhere"), cwd=tmp_path)
    assert missing.returncode == 2 and "is not a folder" in missing.stderr


# ---- fetch -------------------------------------------------------------------------------------


def _hub_files(tmp_path: Path) -> dict[str, Path]:
    """Stand-ins for the hub's files, in the hub's shapes: MATH-500's JSON Lines without ids,
    AMC23's parquet with float answers, its own int id and the question under `question`,
    MMLU's parquet with a 0-based index for the answer."""
    hub = tmp_path / "hub"
    hub.mkdir()
    math500 = write_jsonl(
        hub / "test.jsonl",
        [
            {"problem": "What is $\\frac{1}{2}+\\frac{1}{2}$?", "answer": "1", "level": 1},
            {"problem": "Find $x$: $2x = 14$.", "answer": "7", "level": 2},
        ],
    )
    amc = hub / "amc.parquet"
    frame = {"id": [0, 7], "question": ["How many?", "How far?"], "answer": [27.0, -1.0]}
    pd.DataFrame({**frame, "url": ["u0", "u7"]}).to_parquet(amc)
    mmlu = hub / "mmlu.parquet"
    pd.DataFrame(
        {
            "question": ["Which bone is longest?", "Where is the heart?"],
            "subject": ["anatomy", "anatomy"],
            "choices": [["femur", "ulna", "rib", "skull"], ["chest", "head", "leg", "arm"]],
            "answer": [0, 0],
        }
    ).to_parquet(mmlu)
    return {"HuggingFaceH4/MATH-500": math500, "math-ai/amc23": amc, "cais/mmlu": mmlu}


def test_fetch_writes_files_that_check_accepts_and_a_run_reads_as_the_hub(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = _hub_files(tmp_path)
    asked = _hub(monkeypatch, files)
    names = ("math500", "amc23", "mmlu:anatomy", "arith")
    result = mad_eval("data", "fetch", *names, "--to", "out", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert asked == ["HuggingFaceH4/MATH-500", "math-ai/amc23", "cais/mmlu"]
    out = tmp_path / "out"
    assert sorted(p.name for p in out.iterdir()) == [
        "amc23.jsonl",
        "math500.jsonl",
        "mmlu_anatomy.jsonl",
    ]
    assert "built in: nothing to fetch" in result.stdout
    assert f"Runs read them with --data-dir {out}" in result.stdout
    # Rows under the local field names, ids as a run gives the hub's rows; the hub's own
    # id kept as source_id, numbers and lists as plain JSON.
    assert _rows(out / "amc23.jsonl") == [
        {"id": "amc23-0", "problem": "How many?", "answer": 27.0, "source_id": 0, "url": "u0"},
        {"id": "amc23-1", "problem": "How far?", "answer": -1.0, "source_id": 7, "url": "u7"},
    ]
    assert _rows(out / "math500.jsonl")[0] == {
        "id": "math500-0",
        "problem": "What is $\\frac{1}{2}+\\frac{1}{2}$?",
        "answer": "1",
        "level": 1,
    }
    assert _rows(out / "mmlu_anatomy.jsonl")[1]["choices"] == ["chest", "head", "leg", "arm"]

    checked = mad_eval(
        "data", "check", "out", *("--benchmark", "math500", "--benchmark", "amc23"),
        "--benchmark", "mmlu:anatomy", cwd=tmp_path,
    )  # fmt: skip
    assert checked.returncode == 0, checked.stdout
    for name in ("math500", "amc23", "mmlu:anatomy"):
        _, from_hub = load_questions(name)  # the faked hub
        _, from_folder = load_questions(name, data_dir=out)
        assert [(q.id, q.text, q.gold, q.meta.get("options")) for q in from_folder] == [
            (q.id, q.text, q.gold, q.meta.get("options")) for q in from_hub
        ]
    assert [q.gold for q in from_folder] == ["A", "A"]  # mmlu: the index read as a letter
    ran = mad_eval(
        "run", "--benchmark", "amc23", "--data-dir", "out", "--agents", "2", "--rounds", "1",
        "--out", "r", cwd=tmp_path,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    recorded = _rows(tmp_path / "r" / "questions.jsonl")
    assert [row["id"] for row in recorded] == ["amc23-0", "amc23-1"]


def test_fetch_keeps_a_file_already_there_unless_forced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = _hub_files(tmp_path)
    asked = _hub(monkeypatch, files)
    out = tmp_path / "out"
    out.mkdir()
    write_jsonl(out / "math500.jsonl", [{"id": "math500-0", "problem": "mine", "answer": "3"}])
    kept = fetch("math500", out)
    assert kept.note.startswith("kept: already there") and kept.rows == 1 and asked == []
    assert _rows(out / "math500.jsonl")[0]["problem"] == "mine"
    forced = fetch("math500", out, force=True)
    assert forced.note == "written" and forced.rows == 2
    assert _rows(out / "math500.jsonl")[0]["problem"].startswith("What is")
    assert not [p for p in out.iterdir() if p.name.startswith(".")]  # no temporary file left


def test_fetch_refuses_to_write_rows_a_run_would_read_otherwise(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A spec whose [local] table reads no id where the hub's rows carry one: a run would
    number the file's rows afresh, so nothing is written."""
    hub = write_jsonl(tmp_path / "rows.jsonl", [{"key": "k1", "q": "Two?", "a": "2"}])
    spec = tmp_path / "mine.toml"
    spec.write_text(
        'description = "mine"\nkind = "math"\nmax_tokens = 64\n'
        '[hub]\nrepo = "me/mine"\nfile = "rows.jsonl"\nid = "key"\nquestion = "q"\nanswer = "a"\n'
        '[local]\nfile = "mine.jsonl"\nquestion = "q"\nanswer = "a"\n',
        encoding="utf-8",
    )
    _hub(monkeypatch, {"me/mine": hub})
    state = fetch(str(spec), tmp_path / "out")
    assert state.problem == (
        "the hub's question k1 would be read back from mine.jsonl as mine-0; make the spec's "
        "[local] table read the fields (and id) its [hub] table reads."
    )
    result = mad_eval("data", "fetch", str(spec), "--to", "out", cwd=tmp_path)
    assert result.returncode == 1
    assert not (tmp_path / "out" / "mine.jsonl").exists()


def test_fetch_reports_a_hub_file_it_cannot_get(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = _hub_files(tmp_path)
    _hub(monkeypatch, {"HuggingFaceH4/MATH-500": files["HuggingFaceH4/MATH-500"]})
    result = mad_eval("data", "fetch", "math500", "gsm8k", "--to", "out", cwd=tmp_path)
    assert result.returncode == 1
    assert "could not download main/test-00000-of-00001.parquet" in result.stdout
    assert (tmp_path / "out" / "math500.jsonl").is_file()  # the one it could get is written


def test_fetch_writes_nothing_from_a_hub_file_with_a_bad_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bad = write_jsonl(
        tmp_path / "test.jsonl", [{"problem": "One?", "answer": "1"}, {"problem": "?"}]
    )
    _hub(monkeypatch, {"HuggingFaceH4/MATH-500": bad})
    with pytest.raises(
        BenchmarkError, match=r"^HuggingFaceH4/MATH-500/test\.jsonl line 2: missing"
    ):
        fetch("math500", tmp_path / "out")
    result = mad_eval("data", "fetch", "math500", "--to", "out", cwd=tmp_path)
    assert result.returncode == 1 and "missing field 'answer'" in result.stdout
    assert not (tmp_path / "out" / "math500.jsonl").exists()


def test_fetch_offline_says_in_one_sentence_how_to_copy_files_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _offline(monkeypatch)
    result = mad_eval("data", "fetch", "math500", "aime24", "aime24_dapo", "--to", "out",
                      cwd=tmp_path)  # fmt: skip
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "error: could not fetch math500, aime24: the hub cannot be reached and the hub cache "
        "lacks their files; copy math500.jsonl, aime24.jsonl into out from a machine that can "
        "reach the hub (`mad-eval data fetch math500 aime24 --to FOLDER` there), then run "
        "`mad-eval data check out`."
    )
    assert not (tmp_path / "out").exists()


def test_fetch_of_an_unknown_benchmark_fails_before_any_download(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked = _hub(monkeypatch, _hub_files(tmp_path))
    result = mad_eval("data", "fetch", "math500", "math5000", "--to", "out", cwd=tmp_path)
    assert result.returncode == 2 and "unknown benchmark 'math5000'" in result.stderr
    assert asked == []


# ---- the advice each front end gives -----------------------------------------------------------


def test_the_api_names_its_keyword(tmp_path: Path) -> None:
    with pytest.raises(DataMissingError) as info:
        api.run(benchmark="math500", data_dir=tmp_path, out=tmp_path / "r")
    assert str(info.value) == (
        f"local data file 'math500.jsonl' for benchmark 'math500' is not in {tmp_path}; pass "
        "data_dir= a folder holding math500.jsonl or set MAD_EVAL_DATA to one " + ADVICE_TAIL
    )


def test_the_api_names_its_keyword_when_the_hub_is_out_of_reach(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _offline(monkeypatch)
    with pytest.raises(DataMissingError) as info:
        api.single(benchmark="math500", out=tmp_path / "r")
    assert str(info.value) == (
        "could not download test.jsonl from the Hugging Face hub dataset HuggingFaceH4/MATH-500 "
        "(the hub cannot be reached); pass data_dir= a folder holding math500.jsonl or set "
        "MAD_EVAL_DATA to one " + ADVICE_TAIL
    )


@pytest.mark.parametrize("command", ["run", "single"])
def test_a_command_names_its_data_dir_option(command: str, tmp_path: Path) -> None:
    result = mad_eval(command, "--benchmark", "math500", "--data-dir", str(tmp_path), cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip() == (
        f"error: local data file 'math500.jsonl' for benchmark 'math500' is not in {tmp_path}; "
        "pass --data-dir with a folder holding math500.jsonl or set MAD_EVAL_DATA to one "
        + ADVICE_TAIL
    )


def test_a_command_without_data_dir_names_the_environment_variable(capsys) -> None:
    from mad_eval.cli.ui import one_sentence

    with pytest.raises(typer.Exit) as info, one_sentence():
        raise DataMissingError("local data file 'x.jsonl' is not in /d", "x", "x.jsonl")
    assert info.value.exit_code == 2
    assert " ".join(capsys.readouterr().err.split()) == (
        "error: local data file 'x.jsonl' is not in /d; set MAD_EVAL_DATA to a folder holding "
        "x.jsonl (`mad-eval data fetch x --to FOLDER` writes it from the hub, `mad-eval data "
        "check FOLDER` checks it)."
    )


def _experiment(tmp_path: Path, settings: str) -> Path:
    path = tmp_path / "exp.toml"
    path.write_text(
        f'[experiment]\nname = "x"\n[settings]\nrounds = 1\nlimit = 2\n{settings}\n'
        '[models]\nBase = "sim"\n[grids.main]\nbenchmarks = ["math500"]\nagents = [2]\n',
        encoding="utf-8",
    )
    return path


def test_an_experiment_names_its_data_dir_key(tmp_path: Path) -> None:
    _experiment(tmp_path, 'data_dir = "nodata"')
    result = mad_eval("experiment", "run", "exp.toml", "--dry-run", cwd=tmp_path)
    assert result.returncode == 2
    message = " ".join(result.stderr.split())
    assert message == (
        "error: exp.toml: cell math500-decentralized-n2-t1-Base (main): local data file "
        "'math500.jsonl' for benchmark 'math500' is not in nodata; set data_dir "
        "in the experiment file's [settings] to a folder holding math500.jsonl (relative to the "
        "file) or set MAD_EVAL_DATA to one " + ADVICE_TAIL
    )
    assert "--data-dir" not in message


def test_an_experiment_without_data_names_its_data_dir_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _offline(monkeypatch)
    _experiment(tmp_path, "")
    result = mad_eval("experiment", "run", "exp.toml", cwd=tmp_path)
    assert result.returncode == 2
    message = " ".join(result.stderr.split())
    assert "(the hub cannot be reached); set data_dir in the experiment file's [settings]" in (
        message
    )
    assert "--data-dir" not in message and not (tmp_path / "results").exists()


def test_a_judge_of_an_old_folder_names_where_its_questions_went(
    tmp_path: Path, shared_data: Path
) -> None:
    """A run folder from before questions.jsonl, judged with a folder lacking its questions:
    the advice names --data-dir (the command's) and the file."""
    data = ("--benchmark", "math500", "--data-dir", str(shared_data), "--limit", "2")
    made = mad_eval("run", *data, "--agents", "2", "--rounds", "1", "--out", "r", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    (tmp_path / "r" / "questions.jsonl").unlink()
    manifest = json.loads((tmp_path / "r" / "manifest.json").read_text())
    del manifest["schema_version"]
    (tmp_path / "r" / "manifest.json").write_text(json.dumps(manifest))
    other = tmp_path / "other"
    other.mkdir()
    write_jsonl(other / "math500.jsonl", [{"id": "math500-9", "problem": "x", "answer": "1"}])
    judged = mad_eval("judge", "r", "--judge", "sim-judge", "--data-dir", str(other), cwd=tmp_path)
    assert judged.returncode == 2
    assert " ".join(judged.stderr.split()) == (
        "error: benchmark math500 as loaded here lacks 2 of the run's questions (e.g. "
        "'math500-0'); pass --data-dir with a folder holding math500.jsonl or set MAD_EVAL_DATA "
        "to one " + ADVICE_TAIL
    )


def _hub_row(spec, index: int) -> dict:
    """A row in the shape of the spec's [hub] table: each field it reads, a plausible value."""
    values = {
        "question": f"Question {index}?",
        "answer": {"choice": index % 3, "math": "1/2", "number": 27.0}.get(spec.kind, "sum up"),
        "options": ["first", "second", "third"],
        "chosen": f"\n\nHuman: hi {index}\n\nAssistant: hello",
        "rejected": f"\n\nHuman: hi {index}\n\nAssistant: go away",
        "id": f"hub-{index}",
    }
    row: dict = {"extra": index}
    for key, path in spec.hub.items():
        if key in values:
            *parents, last = path.split(".")
            place = row
            for part in parents:
                place = place.setdefault(part, {})
            place[last] = values[key]
    return row


def test_every_project_spec_fetches_rows_a_run_reads_as_the_hub() -> None:
    """For each shipped spec with a [hub] and a [local] table, hub-shaped rows are written so
    that the [local] table reads the same questions: the tables agree on what they read."""
    from mad_eval.data.benchmarks import list_specs, table_questions
    from mad_eval.data.files import local_rows

    specs = [spec for spec in list_specs() if spec.hub and spec.local]
    assert {"amc23", "commonsense_qa", "hh_rlhf", "mmlu", "gsm8k"} <= {s.name for s in specs}
    for spec in specs:
        rows = [(f"row {i}", _hub_row(spec, i)) for i in range(3)]
        written = json.loads(json.dumps(local_rows(spec, rows)))  # as the file holds them
        local = [(f"line {i}", row) for i, row in enumerate(written, 1)]
        expected = [(q.id, q.text, q.gold) for q in table_questions(spec, rows, "hub")]
        got = [(q.id, q.text, q.gold) for q in table_questions(spec, local, "local")]
        assert got == expected, spec.name
        assert all(row["extra"] == i for i, row in enumerate(written)), spec.name


@pytest.mark.slow
def test_fetch_offline_in_a_fresh_process_says_so_in_one_sentence(tmp_path: Path) -> None:
    """The real client and probe, against a hub that refuses connections and an empty cache."""
    env = no_hub(tmp_path)
    result = mad_eval("data", "fetch", "gsm8k", "--to", "out", cwd=tmp_path, env=env)
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "error: could not fetch gsm8k: the hub cannot be reached and the hub cache lacks its "
        "file; copy gsm8k.jsonl into out from a machine that can reach the hub (`mad-eval data "
        "fetch gsm8k --to FOLDER` there), then run `mad-eval data check out`."
    )


def test_the_viewer_names_what_view_takes_when_an_old_folders_questions_are_gone(
    tmp_path: Path, shared_data: Path, monkeypatch
) -> None:
    """`view` has no --data-dir and no data_dir=: its page names MAD_EVAL_DATA."""
    from mad_eval import api
    from mad_eval.viewer.site import load_view

    run = api.run(benchmark="math500", data_dir=shared_data, limit=2, agents=2, rounds=1,
                  out=tmp_path / "r")  # fmt: skip
    (run.root / "questions.jsonl").unlink()
    manifest = json.loads((run.root / "manifest.json").read_text())
    del manifest["schema_version"]  # as a folder from before questions.jsonl
    (run.root / "manifest.json").write_text(json.dumps(manifest))
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("MAD_EVAL_DATA", str(empty))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    missing = load_view(run.root).missing
    assert "set MAD_EVAL_DATA to a folder holding math500.jsonl" in missing
    assert "data_dir=" not in missing and "--data-dir" not in missing
