"""An experiment's serve: models placed as Ray actors (`--ray`): a local Ray head declaring
4 logical GPUs, a stand-in `vllm` on PATH that the actors' workers inherit; each server asks
Ray for its GPUs, runs on the node's IP, and is gone (actor and process) afterwards."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from serving_helpers import (
    Heard,
    alive,
    experiment_file,
    install_stand_in,
    most_at_once,
    served_models,
    starts,
    wait_gone,
)

import mad_eval
from mad_eval.errors import UserError

ray = pytest.importorskip("ray")
pytestmark = [pytest.mark.ray, pytest.mark.slow]


@pytest.fixture
def head(tmp_path, monkeypatch):
    """A Ray head in this process with 4 logical GPUs; the stand-in on its workers' PATH.
    Yields a function that sets more of the workers' environment before the head starts."""
    monkeypatch.chdir(tmp_path)
    for name, value in install_stand_in(tmp_path).items():
        monkeypatch.setenv(name, value)

    def start(**env: str) -> None:
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        ray.init(num_gpus=4, num_cpus=4, include_dashboard=False, log_to_driver=False)

    yield start
    ray.shutdown()


def _live_actors(timeout: float = 60.0) -> list[str]:
    """The server actors not dead yet, once they all are or after a generous wait (ray.kill
    is asynchronous). Read from the GCS: the state API needs the dashboard."""
    from ray._private import state

    deadline = time.monotonic() + timeout
    while True:
        live = [
            key
            for key, actor in state.actors().items()
            if actor["ActorClassName"].endswith("_Actor") and actor["State"] != "DEAD"
        ]
        if not live or time.monotonic() > deadline:
            return live
        time.sleep(0.2)


def test_three_models_of_two_gpus_are_ray_actors_two_at_a_time_and_all_gone(tmp_path, head):
    head()
    names = ("base", "dapo", "sdrl")
    path = experiment_file(tmp_path, served_models(tmp_path, names, "tensor_parallel = 2"))
    record = {"STAND_IN_RECORD": str(tmp_path / "starts.jsonl")}

    plan = mad_eval.experiment_plan(path, ray="auto")  # the dry run: the cluster's GPUs
    assert plan.serving[0] == "on the Ray cluster auto: 4 GPUs, placed by Ray."
    assert sum(name.upper() in " ".join(plan.serving) for name in names) == 3

    heard = Heard()
    results = mad_eval.experiment(path, heard, ray="auto")
    assert len(results) == 3 and all(r.metrics["questions"] == 2 for r in results.values())

    launched = starts(record)
    assert sorted(Path(s["argv"][1]).name for s in launched) == sorted(names)  # once each
    for start in launched:  # each server got two of Ray's GPUs, and listened beyond localhost
        assert len(start["cuda"].split(",")) == 2
        assert set(start["cuda"].split(",")) <= {"0", "1", "2", "3"}
        host = start["argv"][start["argv"].index("--host") + 1]
        assert host == ray.util.get_node_ip_address()
    assert most_at_once(heard.said) == (2, 0)  # 4 GPUs hold two servers of 2 GPUs at once
    assert any("on the Ray cluster, 2 GPU(s)" in text for text in heard.said)
    assert all(wait_gone(s["pid"]) for s in launched)  # no stand-in outlives its server
    assert _live_actors() == []
    logs = sorted(p.name for p in (tmp_path / "out" / "servers").iterdir())
    assert logs == sorted(f"server-{name.upper()}-0.log" for name in names)
    for name in logs:  # written by the actors into the experiment folder (an absolute path)
        assert "ready" in (tmp_path / "out" / "servers" / name).read_text().splitlines()

    again = Heard()  # resumed: nothing left, nothing served
    mad_eval.experiment(path, again, ray="auto")
    assert len(starts(record)) == len(names)


def test_a_server_dying_at_start_up_is_one_sentence_with_its_log_and_no_actor_left(tmp_path, head):
    head(STAND_IN_FAIL="CUDA out of memory on the stand-in")
    path = experiment_file(tmp_path, served_models(tmp_path, ("base",), "tensor_parallel = 1"))
    with pytest.raises(UserError) as caught:
        mad_eval.experiment(path, Heard(), ray="auto")
    said = str(caught.value)
    assert "BASE exited during start-up" in said and "CUDA out of memory" in said
    assert "\n" not in said
    launched = starts({"STAND_IN_RECORD": str(tmp_path / "starts.jsonl")})
    assert launched and not any(alive(s["pid"]) for s in launched)
    assert _live_actors() == []


def test_kill_9_of_mad_eval_leaves_no_actor_and_no_server(tmp_path, head):
    head(STAND_IN_DELAY="5")  # each answer slow: the experiment is mid-way when killed
    path = experiment_file(tmp_path, served_models(tmp_path, ("base",), "tensor_parallel = 2"))
    record = {"STAND_IN_RECORD": str(tmp_path / "starts.jsonl")}
    address = ray.get_runtime_context().gcs_address  # mad-eval joins as a driver of its own
    command = [sys.executable, "-m", "mad_eval", "experiment", "run", str(path), "--ray", address]
    log = (tmp_path / "mad-eval.log").open("wb")
    driver = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 120  # a generous wait for its server, not a timing
        while not (tmp_path / "out" / "servers").is_dir() or not starts(record):
            assert driver.poll() is None, (tmp_path / "mad-eval.log").read_text()[-2000:]
            assert time.monotonic() < deadline, "the server never started"
            time.sleep(0.2)
        time.sleep(2)  # let the stand-in take its first requests
    finally:
        driver.kill()  # kill -9: no clean-up of mad-eval's own runs
        driver.wait()
    (server,) = starts(record)
    assert wait_gone(server["pid"], timeout=120)  # Ray killed the job's actor, and its server
    assert _live_actors(timeout=120) == []


def test_a_model_wider_than_any_node_is_one_sentence_before_any_server(tmp_path, head):
    head()
    path = experiment_file(tmp_path, served_models(tmp_path, ("big",), "tensor_parallel = 8"))
    with pytest.raises(UserError, match=r"BIG needs 8 GPUs on one node .* largest node .* has 4"):
        mad_eval.experiment(path, Heard(), ray="auto")
    assert starts({"STAND_IN_RECORD": str(tmp_path / "starts.jsonl")}) == []


def test_a_server_on_another_node_keeps_its_log_there_and_it_is_copied_back(
    tmp_path, head, monkeypatch
):
    from mad_eval.serving import ray_pool

    head(STAND_IN_FAIL="CUDA out of memory on the stand-in")
    monkeypatch.setattr(ray_pool, "driver_node", lambda: "another-node")  # as if remote
    path = experiment_file(tmp_path, served_models(tmp_path, ("base",), "tensor_parallel = 1"))
    with pytest.raises(UserError) as caught:
        mad_eval.experiment(path, Heard(), ray="auto")
    said = str(caught.value)  # the log named where it is: on the server's node
    assert "mad-eval-servers" in said and "CUDA out of memory" in said
    assert str(tmp_path / "out") not in said
    copied = (tmp_path / "out" / "servers" / "server-BASE-0.log").read_text()
    assert "CUDA out of memory on the stand-in" in copied.splitlines()  # brought back at stop


@pytest.fixture
def two_nodes(tmp_path, monkeypatch):
    """A Ray cluster of three nodes on this machine (ray.cluster_utils): a head without
    GPUs, where mad-eval drives, and two nodes of 2 logical GPUs each."""
    from ray.cluster_utils import Cluster

    monkeypatch.chdir(tmp_path)
    for name, value in install_stand_in(tmp_path).items():
        monkeypatch.setenv(name, value)
    cluster = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 1, "num_gpus": 0, "include_dashboard": False},
    )
    for _ in range(2):
        cluster.add_node(num_cpus=2, num_gpus=2)
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, log_to_driver=False)
    yield cluster
    ray.shutdown()
    cluster.shutdown()


def test_servers_on_two_nodes_keep_their_logs_there_and_bring_them_back(tmp_path, two_nodes):
    names = ("base", "dapo", "sdrl")
    path = experiment_file(tmp_path, served_models(tmp_path, names, "tensor_parallel = 2"))
    heard = Heard()
    results = mad_eval.experiment(path, heard, ray="auto")
    assert all(r.metrics["questions"] == 2 for r in results.values())
    launched = starts({"STAND_IN_RECORD": str(tmp_path / "starts.jsonl")})
    assert sorted(Path(s["argv"][1]).name for s in launched) == sorted(names)
    assert all(sorted(s["cuda"].split(",")) == ["0", "1"] for s in launched)  # a node's two
    assert most_at_once(heard.said) == (2, 0)  # one server per node at a time
    assert all(wait_gone(s["pid"]) for s in launched) and _live_actors() == []
    for name in names:  # every server ran on a node without the experiment folder
        log = tmp_path / "out" / "servers" / f"server-{name.upper()}-0.log"
        assert "ready" in log.read_text().splitlines()

    wide = experiment_file(
        tmp_path, served_models(tmp_path / "w", ("wide",), "tensor_parallel = 3")
    )
    with pytest.raises(UserError, match=r"WIDE needs 3 GPUs on one node .* largest node .* has 2"):
        mad_eval.experiment(wide, Heard(), ray="auto")  # 4 GPUs in all, but 2 per node


VLLM_SHIM = """\
import os, sys
args = sys.argv[1:]
os.execv(sys.executable, [sys.executable, "-m", "vllm.entrypoints.openai.api_server",
                          "--model", args[1], *args[2:]])
"""


@pytest.mark.vllm
def test_the_cpu_build_of_vllm_served_as_a_ray_actor(tmp_path, monkeypatch):
    """Opt-in (-m vllm): the driver's venv needs Ray, and MAD_EVAL_VLLM_PYTHON a Python with
    vLLM's CPU build (this one, if it has vLLM); a cluster without GPUs: one CPU slot."""
    python = os.environ.get("MAD_EVAL_VLLM_PYTHON")
    if python is None:
        pytest.importorskip("vllm")
        python = sys.executable
    from tiny_model import build_tiny_model

    model = build_tiny_model(tmp_path / "tiny")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bin").mkdir()
    shim = tmp_path / "bin" / "vllm"  # the CPU build's `vllm serve`: test_vllm_serve.py
    shim.write_text(f"#!{python}\n{VLLM_SHIM}")
    shim.chmod(0o755)
    for name, value in {
        "PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin",
        "HF_HUB_OFFLINE": "1",
        "VLLM_CPU_KVCACHE_SPACE": "1",
        "VLLM_CACHE_ROOT": str(tmp_path / "vllm-cache"),
        "VLLM_LOGGING_LEVEL": "WARNING",
    }.items():
        monkeypatch.setenv(name, value)
    path = experiment_file(
        tmp_path,
        f'"TINY" = {{ model = "serve:{model}", max_model_len = 512, max_tokens = 16, '
        'args = "--dtype float32 --enforce-eager" }',
    )
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        results = mad_eval.experiment(path, Heard(), ray="auto")
        assert _live_actors() == []
    finally:
        ray.shutdown()
    assert [r.metrics["questions"] for r in results.values()] == [2]
    log = (tmp_path / "out" / "servers" / "server-TINY-0.log").read_text()
    assert f"--host {ray.util.get_node_ip_address()}" in log
