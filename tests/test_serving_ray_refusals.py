"""`--ray` refused in one sentence before anything starts: together with --gpus, or with
Ray not installed (no Ray needed to run these)."""

from __future__ import annotations

import sys

import pytest
from serving_helpers import Heard, checkpoint, experiment_file, install_stand_in, starts
from typer.testing import CliRunner

import mad_eval
from mad_eval.cli import app
from mad_eval.errors import UserError


def _one_model(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name, value in install_stand_in(tmp_path).items():
        monkeypatch.setenv(name, value)
    folder = checkpoint(tmp_path / "ckpt")
    return experiment_file(tmp_path, f'"A" = {{ model = "serve:{folder}" }}')


def test_ray_with_gpus_is_one_sentence(tmp_path, monkeypatch):
    path = _one_model(tmp_path, monkeypatch)
    with pytest.raises(UserError, match=r"^ray and gpus cannot be given together") as caught:
        mad_eval.experiment(path, Heard(), gpus="0,1", ray="auto")
    assert "\n" not in str(caught.value)
    with pytest.raises(UserError, match=r"^ray and gpus"):
        mad_eval.experiment_plan(path, gpus="0", ray="auto")
    assert starts({"STAND_IN_RECORD": str(tmp_path / "starts.jsonl")}) == []


def test_ray_not_installed_is_one_sentence_naming_the_extra(tmp_path, monkeypatch):
    path = _one_model(tmp_path, monkeypatch)
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray: ImportError
    with pytest.raises(UserError, match=r"pip install 'ray\[default\]'") as caught:
        mad_eval.experiment(path, Heard(), ray="auto")
    assert "\n" not in str(caught.value)
    assert starts({"STAND_IN_RECORD": str(tmp_path / "starts.jsonl")}) == []


def test_experiment_run_takes_ray_on_the_command_line(tmp_path, monkeypatch):
    path = _one_model(tmp_path, monkeypatch)
    result = CliRunner().invoke(
        app, ["experiment", "run", str(path), "--ray", "auto", "--gpus", "0"]
    )
    assert result.exit_code != 0
    assert "--ray and --gpus cannot be given together" in " ".join(result.output.split())
