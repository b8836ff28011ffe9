"""An experiment whose models are checkpoints: mad-eval serves each (a stand-in `vllm` on
PATH that serves the project's stub server), packs the servers over a pool of GPUs, runs
each model's cells while its servers are up and stops them after; cells of endpoints given
by URL (or simulated) run beside them; the same command resumes without serving again."""

from __future__ import annotations

from pathlib import Path

import pytest
from serving_helpers import alive, install_stand_in, starts

import mad_eval
from mad_eval.errors import UserError
from mad_eval.experiments.cells import ExperimentError

pytestmark = pytest.mark.slow  # it starts server processes

CHECKPOINTS = ("base", "dapo", "sdrl", "tiny", "small")


def _experiment(tmp_path: Path, models: str) -> Path:
    path = tmp_path / "exp.toml"
    path.write_text(
        f"""
[experiment]
out = "out"

[settings]
limit = 2
runs = 1
rounds = 1
retries = 1

[models]
{models}

[grids.main]
benchmarks = ["arith"]
agents = [2]
"""
    )
    return path


def _checkpoints(tmp_path: Path) -> str:
    lines = []
    for name in CHECKPOINTS:
        folder = tmp_path / "ckpts" / name
        folder.mkdir(parents=True)
        (folder / "config.json").write_text("{}")
        lines.append(f'"{name.upper()}" = {{ model = "serve:{folder}" }}')
    return "\n".join(lines)


class Heard(mad_eval.Listener):
    def __init__(self) -> None:
        self.said: list[str] = []

    def say(self, text: str) -> None:
        self.said.append(text)


def test_five_checkpoints_on_two_gpus_are_served_once_each_two_at_a_time(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the file's out = "out" is the working directory's
    for name, value in install_stand_in(tmp_path).items():
        monkeypatch.setenv(name, value)
    record = {"STAND_IN_RECORD": str(tmp_path / "starts.jsonl")}
    path = _experiment(tmp_path, _checkpoints(tmp_path) + '\n"SIM" = "sim"')

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
    up, most = 0, 0
    for text in heard.said:  # in the order mad-eval started and stopped them
        up += text.startswith("Starting vllm serve for ") - text.startswith("Server ") * (
            " stopped " in text
        )
        most = max(most, up)
    assert most == 2 and up == 0  # two at a time, on a pool of two GPUs
    logs = sorted(p.name for p in (tmp_path / "out" / "servers").iterdir())
    assert logs == sorted(f"server-{name.upper()}-0.log" for name in CHECKPOINTS)

    again = Heard()
    mad_eval.experiment(path, again, gpus="0,1")  # resumed: nothing left to ask
    assert len(starts(record)) == len(CHECKPOINTS)
    assert not any(text.startswith("Starting vllm serve") for text in again.said)


def test_a_model_larger_than_the_pool_is_one_sentence_before_any_server(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name, value in install_stand_in(tmp_path).items():
        monkeypatch.setenv(name, value)
    folder = tmp_path / "ckpts" / "big"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    path = _experiment(tmp_path, f'"BIG" = {{ model = "serve:{folder}", tensor_parallel = 4 }}')
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
    folder = tmp_path / "ckpt"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    path = _experiment(tmp_path, models.replace("CKPT", str(folder)))
    with pytest.raises(ExperimentError) as caught:
        mad_eval.experiment_plan(path)
    assert says in str(caught.value) and "\n" not in str(caught.value)
