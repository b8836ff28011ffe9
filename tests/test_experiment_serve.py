"""An experiment whose models are checkpoints: mad-eval serves each (a stand-in `vllm` on
PATH that serves the project's stub server), packs the servers over a pool of GPUs, runs
each model's cells while its servers are up and stops them after; cells of endpoints given
by URL (or simulated) run beside them; the same command resumes without serving again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from serving_helpers import (
    Heard,
    alive,
    checkpoint,
    experiment_file,
    install_stand_in,
    most_at_once,
    served_models,
    starts,
)

import mad_eval
from mad_eval.errors import UserError
from mad_eval.experiments.cells import ExperimentError

pytestmark = pytest.mark.slow  # it starts server processes

CHECKPOINTS = ("base", "dapo", "sdrl", "tiny", "small")
LABELS = sorted(name.upper() for name in CHECKPOINTS)


def test_five_checkpoints_on_two_gpus_are_served_once_each_two_at_a_time(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the file's out = "out" is the working directory's
    for name, value in install_stand_in(tmp_path).items():
        monkeypatch.setenv(name, value)
    record = {"STAND_IN_RECORD": str(tmp_path / "starts.jsonl")}
    path = experiment_file(tmp_path, served_models(tmp_path, CHECKPOINTS) + '\n"SIM" = "sim"')

    plan = mad_eval.experiment_plan(path, gpus="0,1")
    assert plan.serving[0].startswith("serving plan on GPUs 0,1: 5 servers to start")
    assert sum(label.upper() in " ".join(plan.serving) for label in CHECKPOINTS) == 5

    heard = Heard()
    results = mad_eval.experiment(path, heard, gpus="0,1")
    assert len(results) == 6  # five served models' cells and the simulated one
    assert all(r.metrics["questions"] == 2 for r in results.values())

    launched = starts(record)
    served = sorted(Path(s["argv"][1]).name for s in launched)
    assert served == sorted(CHECKPOINTS)  # every model served exactly once
    assert {s["cuda"] for s in launched} <= {"0", "1"}
    assert not any(alive(s["pid"]) for s in launched)  # none outlives the experiment
    busy = [text for text in heard.said if " busy: " in text]
    assert sorted(busy) == [f"Server {n.upper()} busy: 1 cell, 8 turns left." for n in LABELS]
    assert most_at_once(heard.said) == (2, 0)  # two at a time, on a pool of two GPUs
    logs = sorted(p.name for p in (tmp_path / "out" / "servers").iterdir())
    assert logs == sorted(f"server-{name.upper()}-0.log" for name in CHECKPOINTS)

    again = Heard()
    mad_eval.experiment(path, again, gpus="0,1")  # resumed: nothing left to ask
    assert len(starts(record)) == len(CHECKPOINTS)
    assert not any(text.startswith("Starting vllm serve") for text in again.said)


def test_a_cell_records_its_server_and_an_answer_changing_edit_is_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name, value in install_stand_in(tmp_path).items():
        monkeypatch.setenv(name, value)
    record = {"STAND_IN_RECORD": str(tmp_path / "starts.jsonl")}
    path = experiment_file(tmp_path, served_models(tmp_path, ("sdrl",), 'args = "--seed 1"'))
    (result,) = mad_eval.experiment(path, Heard(), gpus="0").values()
    assert result.manifest.serving["args"] == ["--seed", "1"]
    assert result.manifest.serving["checkpoint"].endswith("ckpts/sdrl")

    path.write_text(path.read_text().replace("--seed 1", "--seed 2"))
    with pytest.raises(UserError, match=r"serving args is \['--seed', '1'\] there"):
        mad_eval.experiment(path, Heard(), gpus="0")
    assert len(starts(record)) == 1  # refused before its server started again


def test_a_model_larger_than_the_pool_is_one_sentence_before_any_server(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name, value in install_stand_in(tmp_path).items():
        monkeypatch.setenv(name, value)
    path = experiment_file(tmp_path, served_models(tmp_path, ("big",), "tensor_parallel = 4"))
    with pytest.raises(UserError, match=r"model 'BIG' needs 4 GPUs at once"):
        mad_eval.experiment(path, Heard(), gpus="0,1")
    assert starts({"STAND_IN_RECORD": str(tmp_path / "starts.jsonl")}) == []


@pytest.mark.parametrize(
    ("models", "says"),
    [
        ('"A" = { model = "sim", replicas = 2 }', "replicas is for a serve:CHECKPOINT model"),
        (
            '"A" = { model = "serve:CKPT", base_url = "http://h:1/v1" }',
            "served on its own URLs; drop base_url",
        ),
        ('"A" = { model = "serve:CKPT", replica = 2 }', "'replica' is not a setting of models.A"),
        (
            '"A" = { model = "serve:CKPT" }\n"B" = { model = "serve:CKPT" }',
            "is served under another label",
        ),
    ],
)
def test_bad_serving_in_an_experiment_is_one_sentence(tmp_path, monkeypatch, models, says):
    monkeypatch.chdir(tmp_path)
    folder = checkpoint(tmp_path / "ckpt")
    path = experiment_file(tmp_path, models.replace("CKPT", str(folder)))
    with pytest.raises(ExperimentError) as caught:
        mad_eval.experiment_plan(path)
    assert says in str(caught.value) and "\n" not in str(caught.value)


def test_no_vllm_is_one_sentence_before_the_experiment_writes_anything(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", str(tmp_path))  # no vllm here
    path = experiment_file(tmp_path, served_models(tmp_path, ("base",)))
    with pytest.raises(UserError, match=r"exp.toml's serve: models: no vllm command found"):
        mad_eval.experiment(path, Heard(), gpus="0")
    assert not (tmp_path / "out").exists()


def _fail_first_turn(folder: Path) -> dict:
    """Mark the first turn of a run folder failed, as a server error would have left it."""
    path = folder / "turns.jsonl"
    lines = path.read_text().splitlines()
    turn = json.loads(lines[0])
    turn.update(error="APIConnectionError: the server went away", text="", answer=None)
    path.write_text("\n".join([json.dumps(turn), *lines[1:]]) + "\n")
    return turn


def test_retry_failed_serves_again_only_the_models_whose_cells_hold_failures(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name, value in install_stand_in(tmp_path).items():
        monkeypatch.setenv(name, value)
    record = {"STAND_IN_RECORD": str(tmp_path / "starts.jsonl")}
    path = experiment_file(tmp_path, served_models(tmp_path, ("base", "sdrl")))
    results = mad_eval.experiment(path, Heard(), gpus="0")
    broken = _fail_first_turn(results["arith-decentralized-n2-t1-SDRL"].root)
    assert len(starts(record)) == 2

    mad_eval.experiment(path, Heard(), gpus="0")  # a resume leaves failures alone
    assert len(starts(record)) == 2
    again = mad_eval.experiment(path, Heard(), gpus="0", retry_failed=True)
    launched = starts(record)
    assert [Path(s["argv"][1]).name for s in launched[2:]] == ["sdrl"]  # BASE not served
    run = again["arith-decentralized-n2-t1-SDRL"]
    turns = [json.loads(line) for line in (run.root / "turns.jsonl").read_text().splitlines()]
    assert len(turns) == 2 * 2 * 2 and not any(t["error"] for t in turns)
    superseded = (run.root / "superseded" / "turns.jsonl").read_text()
    assert broken["error"] in superseded
