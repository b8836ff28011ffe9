"""Runs sent to Weights & Biases (offline mode, its run files read back) and MLflow (a SQLite
store, read back through its client): the numbers equal metrics.json's, the config is the
manifest's redacted one, an experiment's cells are grouped, a rerun duplicates nothing, a
failing tracker is one warning and never the evaluation's failure, and without --log neither
package is imported."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import ClassVar

import pytest
from cli_helpers import closed_port, turns_of, without_timing
from cli_helpers import mad_eval as command
from stub_server import StubServer
from tracker_files import wandb_runs

import mad_eval
from mad_eval.progress import Listener
from mad_eval.sanitize import HIDDEN
from mad_eval.tracking import TRACKERS, Group, Tracker, TrackingError, targets
from mad_eval.tracking.payload import Payload

pytest.importorskip("wandb")
pytest.importorskip("mlflow")

PASSWORD = "tr@ck-pass-31"
API_KEY = "sk-tracking-secret-5521"
SECRETS = (PASSWORD, API_KEY)


class Warnings(Listener):
    """The tracking warnings a call gave (a stub model's tokenizer warning is not one)."""

    def __init__(self) -> None:
        self.warnings: list[str] = []

    def warn(self, label: str, text: str) -> None:
        if label == "tracking":
            self.warnings.append(text)


@pytest.fixture
def offline(tmp_path, monkeypatch):
    """W&B offline, writing under tmp_path/wandb; MLflow's artifacts under tmp_path."""
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.chdir(tmp_path)
    yield tmp_path
    import wandb

    wandb.teardown()  # W&B reads its settings once a process: the next test's are its own


def mlflow_runs(uri: str, experiment: str = "mad-eval") -> list:
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    found = client.get_experiment_by_name(experiment)
    return client.search_runs([found.experiment_id]) if found else []


def metrics_of(folder: Path) -> dict:
    return json.loads((folder / "metrics.json").read_text())


def leaks(root: Path) -> list[str]:
    return [
        f"{path}: {secret}"
        for path in sorted(root.rglob("*"))
        if path.is_file() and not path.is_symlink() and path.suffix != ".toml"
        for secret in SECRETS
        if secret.encode() in path.read_bytes()
    ]


# --- the experiment: three cells, both trackers, read back, resumed -------------------


@pytest.mark.slow
def test_an_experiments_cells_read_back_from_both_trackers_equal_metrics_json(offline):
    db = f"sqlite:///{offline / 'mlflow.db'}"
    with StubServer() as server:
        url = server.base_url.replace("http://", f"http://ann:{PASSWORD}@")
        file = offline / "exp.toml"
        file.write_text(
            textwrap.dedent(f"""
            [experiment]
            name = "tracked"
            out = "out"
            log = ["wandb:project=madtest", "mlflow:tracking_uri={db}"]

            [settings]
            limit = 4
            rounds = 2
            retries = 0

            [models.stub]
            model = "openai:stub-model"
            base_url = "{url}"
            extra_body = {{ api_key = "{API_KEY}", top_k = 5 }}

            [grids.main]
            benchmarks = ["arith"]
            agents = [2, 3, 4]
            """)
        )
        listener = Warnings()
        results = mad_eval.experiment(file, listener=listener)
        assert len(results) == 3 and listener.warnings == []

        runs = wandb_runs(offline / "wandb")
        assert len(runs) == 3
        by_name = {run.name: run for run in runs}
        assert set(by_name) == set(results)
        parent = next(r for r in mlflow_runs(db) if r.info.run_name == "tracked")
        children = {
            r.info.run_name: r for r in mlflow_runs(db) if r.info.run_id != parent.info.run_id
        }
        assert set(children) == set(results)
        for name in results:
            folder = offline / "out" / name
            metrics = metrics_of(folder)
            manifest = json.loads((folder / "manifest.json").read_text())
            accuracy = [(r["round"], r["vote_accuracy"]) for r in metrics["rounds"]]
            assert len(accuracy) == 3

            run = by_name[name]
            assert run.group == "tracked" and run.project == "madtest"
            for key in ("maj", "debate", "delta"):
                assert run.summary[key] == pytest.approx(metrics[key])
            steps = {row["_step"]: row for row in run.history}
            assert [(s, steps[s]["rounds/vote_accuracy"]) for s in sorted(steps)] == accuracy
            assert run.config["config"]["extra_body"] == {"api_key": HIDDEN, "top_k": 5}
            assert run.config["config"] == manifest["config"]
            (artifact,) = [a for a in run.artifacts if a[1] == "mad-eval-run"]
            assert {"turns.jsonl", "manifest.json", "metrics.json", "site/index.html"} <= set(
                artifact[2]
            )

            child = children[name]
            assert child.data.tags["mlflow.parentRunId"] == parent.info.run_id
            for key in ("maj", "debate", "delta"):
                assert child.data.metrics[key] == pytest.approx(metrics[key])
            from mlflow import MlflowClient

            history = MlflowClient(tracking_uri=db).get_metric_history(
                child.info.run_id, "rounds/vote_accuracy"
            )
            assert sorted((m.step, m.value) for m in history) == accuracy
            params = child.data.params
            assert params["config.extra_body.api_key"] == HIDDEN
            assert params["config.extra_body.top_k"] == "5"
            assert params["config.model"] == manifest["config"]["model"]

        # Resumed, or its folder sent: nothing new, so nothing is sent or duplicated.
        again = Warnings()
        mad_eval.experiment(file, listener=again)
        assert again.warnings == []
        to = ["wandb:project=madtest", f"mlflow:tracking_uri={db}"]
        assert all(entry.id is None for entry in mad_eval.log(offline / "out", to).logged)
        assert len(wandb_runs(offline / "wandb")) == 3
        assert len(mlflow_runs(db)) == 4  # three cells and their parent
    assert leaks(offline) == []


# --- a failing tracker ------------------------------------------------------------------------


@pytest.mark.slow
def test_an_unreachable_mlflow_is_one_warning_and_changes_no_record_or_exit_status(offline):
    plain, tracked = offline / "plain", offline / "tracked"
    args = ["run", "--agents", "3", "--rounds", "1", "--limit", "5"]
    assert command(*args, "--out", str(plain), cwd=offline).returncode == 0
    dead = f"mlflow:tracking_uri=http://127.0.0.1:{closed_port()}"
    done = command(*args, "--out", str(tracked), "--log", dead, cwd=offline)
    assert done.returncode == 0, done.stderr
    said = done.stdout + done.stderr
    assert said.count("could not log to mlflow") == 1
    assert f"mad-eval log {tracked} --to" in said.replace("\n", "")
    assert (tracked / "questions.jsonl").read_bytes() == (plain / "questions.jsonl").read_bytes()
    assert without_timing(turns_of(tracked)) == without_timing(turns_of(plain))
    numbers = ("maj", "debate", "delta", "questions", "turns")
    assert [metrics_of(tracked)[k] for k in numbers] == [metrics_of(plain)[k] for k in numbers]
    assert not (tracked / "tracked.json").exists()


@pytest.mark.slow
def test_an_experiment_with_an_unreachable_mlflow_finishes_with_one_warning(offline):
    file = offline / "exp.toml"
    dead = f"mlflow:tracking_uri=http://127.0.0.1:{closed_port()}"
    file.write_text(
        textwrap.dedent(f"""
        [experiment]
        out = "out"
        log = ["{dead}"]
        [settings]
        limit = 3
        rounds = 1
        [models]
        m = "sim"
        [grids.main]
        benchmarks = ["arith"]
        agents = [2, 3, 4]
        """)
    )
    listener = Warnings()
    results = mad_eval.experiment(file, listener=listener)
    assert len(results) == 3 and all(r.maj is not None for r in results.values())
    (warning,) = listener.warnings
    assert "send them later with mad-eval log out --to" in warning  # the folder of the cells
    assert not list((offline / "out").glob("*/tracked.json"))
    # Sent later from the experiment's folder: grouped as the experiment would have been.
    db = f"sqlite:///{offline / 'mlflow.db'}"
    later = mad_eval.log(offline / "out", f"mlflow:tracking_uri={db}")
    assert len(later.logged) == 3 and later.failed == []
    runs = mlflow_runs(db)
    (parent,) = [r for r in runs if r.info.run_name == "exp"]
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    assert sorted(r.info.run_name for r in children) == sorted(results)


@pytest.mark.slow
def test_a_tracker_that_fails_on_the_first_run_is_given_up_with_one_warning(offline):
    first, second = offline / "a", offline / "b"
    for folder in (first, second):
        mad_eval.run(agents=2, rounds=1, limit=3, out=folder)
    listener = Warnings()
    dead = f"mlflow:tracking_uri=http://ann:{PASSWORD}@127.0.0.1:{closed_port()}"
    done = mad_eval.log([first, second], [dead, "wandb"], listener=listener)
    assert done.failed == [dead]
    assert len(listener.warnings) == 1 and "could not log to mlflow" in listener.warnings[0]
    assert PASSWORD not in listener.warnings[0] and "http://***@127.0.0.1" in listener.warnings[0]
    assert [entry.folder for entry in done.logged] == [first, second]  # W&B took both


def test_wandb_without_a_login_is_one_warning(offline, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "online")
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.setenv("HOME", str(offline))  # no ~/.netrc, no W&B settings
    monkeypatch.setenv("WANDB_CONFIG_DIR", str(offline / "config"))
    listener = Warnings()
    result = mad_eval.run(agents=2, rounds=1, limit=3, out="r", log="wandb", listener=listener)
    assert result.maj is not None
    assert len(listener.warnings) == 1 and "could not log to wandb" in listener.warnings[0]


# --- later, again, and changed ----------------------------------------------------------------


@pytest.mark.slow
def test_log_sends_a_folder_once_and_a_judged_one_updates_its_tracked_run(offline):
    db = f"sqlite:///{offline / 'mlflow.db'}"
    folder = offline / "run"
    mad_eval.run(agents=3, rounds=1, limit=4, out=folder)
    to = ["wandb", f"mlflow:tracking_uri={db}"]
    first = mad_eval.log(folder, to)
    assert [entry.id is not None for entry in first.logged] == [True, True]
    assert all(entry.id is None for entry in mad_eval.log(folder, to).logged)

    # Judged with --log: the records changed, so the same tracked runs are updated.
    mad_eval.judge(folder, "sim", log=to)
    assert all(entry.id is None for entry in mad_eval.log(folder, to).logged)
    marker = json.loads((folder / "tracked.json").read_text())["logged"]
    assert sorted(m["id"] for m in marker.values()) == sorted(e.id for e in first.logged)
    (run,) = mlflow_runs(db)
    assert "judge_failure_rate" in run.data.metrics
    # Updated, not appended to: each round once in the series, each table's rows once.
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=db)
    history = client.get_metric_history(run.info.run_id, "rounds/vote_accuracy")
    assert sorted(m.step for m in history) == [0, 1]
    got = client.download_artifacts(run.info.run_id, "tables/debate.json", str(offline))
    rows = json.loads(Path(got).read_text())["data"]
    assert len(rows) == len(mad_eval.table(folder, format="csv").splitlines()) - 1
    # The same folder by another spelling of its path, or again: nothing to send.
    assert all(e.id is None for e in mad_eval.log(str(folder) + "/../run", to).logged)
    # Into a group: sent again, to the same tracked runs.
    grouped = mad_eval.log(folder, to, group="sweep")
    assert [e.id for e in grouped.logged] == [e.id for e in first.logged]
    runs = wandb_runs(offline / "wandb")  # sent, judged, grouped: W&B resumes the one run
    assert [r.id for r in runs] == [first.logged[0].id] * 3
    assert "judge_failure_rate" in runs[1].summary and runs[2].group == "sweep"


@pytest.mark.slow
def test_a_link_planted_in_a_run_folder_is_not_sent(offline):
    db = f"sqlite:///{offline / 'mlflow.db'}"
    secret = offline / "secret.txt"
    secret.write_text(API_KEY)
    folder = offline / "run"
    mad_eval.run(agents=2, rounds=1, limit=3, out=folder)
    (folder / "notes.txt").symlink_to(secret)
    mad_eval.log(folder, ["wandb", f"mlflow:tracking_uri={db}"])
    (artifact,) = [a for a in wandb_runs(offline / "wandb")[0].artifacts if a[1] == "mad-eval-run"]
    assert "notes.txt" not in artifact[2] and "turns.jsonl" in artifact[2]
    secret.unlink()
    assert leaks(offline) == []


# --- mistakes are refused before any work --------------------------------------------------------


def test_a_mistyped_tracker_or_key_is_refused_before_the_run(offline):
    with pytest.raises(TrackingError, match=r"unknown tracker 'wandbb' \(did you mean 'wandb'\?\)"):
        mad_eval.run(agents=2, rounds=1, limit=2, out="r", log="wandbb")
    with pytest.raises(TrackingError, match=r"takes no key 'projekt' \(did you mean 'project'\?\)"):
        targets(["wandb:projekt=x"])
    with pytest.raises(TrackingError, match="is no key=value"):
        targets("mlflow:experiment")
    assert not (offline / "r").exists()
    for dry in ([], ["--dry-run"]):
        done = command("run", *dry, "--limit", "2", "--log", "mlflaw", cwd=offline)
        assert done.returncode == 2 and "did you mean 'mlflow'" in done.stderr


def test_a_tracker_whose_package_is_missing_names_its_extra(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "mlflow" else real(name, *a)
    )
    with pytest.raises(TrackingError, match=r"pip install 'mad-eval\[mlflow\]'"):
        targets("mlflow")


def test_an_experiment_files_log_is_checked_with_the_file(tmp_path):
    from mad_eval.experiments import ExperimentError

    file = tmp_path / "e.toml"
    rest = '[models]\nm = "sim"\n[grids.g]\nbenchmarks = ["arith"]\n'
    file.write_text(f'[experiment]\nlog = ["wandb:entity"]\n{rest}')
    with pytest.raises(ExperimentError, match=r"e.toml: \[experiment\] log: .*is no key=value"):
        mad_eval.experiment(file)
    with pytest.raises(ExperimentError, match=r"\[experiment\] log: .*is no key=value"):
        mad_eval.experiment_plan(file)  # a dry run checks it too
    file.write_text(f"[experiment]\nlog = 3\n{rest}")
    with pytest.raises(ExperimentError, match="give a tracker or a list of them"):
        mad_eval.experiment(file)


def test_trackers_are_one_registry_open_to_plugins():
    assert TRACKERS.names()[:2] == ["wandb", "mlflow"]
    assert TRACKERS.group == "mad_eval.trackers"


@pytest.mark.slow
def test_without_log_neither_package_is_imported(tmp_path):
    code = (
        "import sys, mad_eval\n"
        f"mad_eval.run(agents=2, rounds=1, limit=2, out={str(tmp_path / 'r')!r})\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('wandb', 'mlflow')))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


# --- tracked.json is data ---------------------------------------------------------------------


class Counting(Tracker):
    """A tracker that counts what it is sent."""

    name = "counting"
    package = "json"
    keys: ClassVar[dict[str, str]] = {}
    sent: ClassVar[list[str]] = []
    payloads: ClassVar[list[Payload]] = []

    def where(self) -> str:
        return "here"

    def log(self, payload: Payload, files: Path, group: Group | None) -> str:
        self.sent.append(payload.key)
        self.payloads.append(payload)
        return payload.key


@pytest.mark.slow
def test_a_damaged_or_linked_tracked_json_is_data_never_followed(tmp_path, registered):
    registered(TRACKERS, "counting", Counting)
    Counting.sent.clear()
    folder = tmp_path / "run"
    mad_eval.run(agents=2, rounds=1, limit=2, out=folder)
    marker = folder / "tracked.json"
    marker.write_text("not json {")
    mad_eval.log(folder, "counting")  # no record of sending it: sent, the file written anew
    assert len(Counting.sent) == 1 and json.loads(marker.read_text())["logged"]
    assert all(e.id is None for e in mad_eval.log(folder, "counting").logged)

    outside = tmp_path / "elsewhere.json"
    outside.write_text("keep me")
    marker.unlink()
    marker.symlink_to(outside)
    listener = Warnings()
    done = mad_eval.log(folder, "counting", listener=listener)
    assert len(Counting.sent) == 2 and done.failed == []  # sent; its record could not be kept
    (warning,) = listener.warnings
    assert "tracked.json" in warning and "link" in warning
    assert outside.read_text() == "keep me" and marker.is_symlink()


@pytest.mark.slow
def test_a_single_run_sends_mean_and_maj_at_k_and_its_table(tmp_path, registered):
    registered(TRACKERS, "counting", Counting)
    Counting.payloads.clear()
    result = mad_eval.single(samples=3, limit=4, out=tmp_path / "s", log="counting")
    (sent,) = Counting.payloads
    for key in ("mean_at_k", "maj_at_k"):
        assert sent.metrics[key] == pytest.approx(result.metrics[key])
    assert "mean_at_k_ci_low" in sent.metrics and set(sent.tables) == {"single", "cost"}


@pytest.mark.slow
def test_log_reads_a_folder_of_runs_one_at_a_time(tmp_path, registered, monkeypatch):
    registered(TRACKERS, "counting", Counting)
    Counting.sent.clear()
    for name in ("a", "b"):
        mad_eval.run(agents=2, rounds=1, limit=2, out=tmp_path / "runs" / name)
    from mad_eval.reporting import results

    order: list[str] = []
    real = results.load_run

    def loading(root, *args, **kwargs):
        order.append(f"read {Path(root).name}")
        return real(root, *args, **kwargs)

    monkeypatch.setattr(results, "load_run", loading)
    listener = Warnings()
    listener.say = lambda text: order.append(f"sent {text.split(':')[0]}")  # type: ignore[method-assign]
    mad_eval.log(tmp_path / "runs", "counting", listener=listener)
    first = [event for i, event in enumerate(order) if event not in order[:i]]  # the site reads too
    assert first == ["read a", "sent a", "read b", "sent b"]
