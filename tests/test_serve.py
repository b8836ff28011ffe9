"""serve:CHECKPOINT models: the spec and its settings refused in one sentence, the `vllm
serve` command line, and (through a stand-in `vllm` on PATH that serves the test server)
servers started for a run, routed to, stopped afterwards, resumed, and never left behind:
not after a start-up failure, SIGTERM or kill -9 of mad-eval."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from cli_helpers import mad_eval, turns_of
from serving_helpers import (
    alive,
    group_gone,
    install_stand_in,
    install_stand_in_module,
    starts,
    wait_gone,
)
from serving_helpers import checkpoint as make_checkpoint

from mad_eval.backends import BackendError, backend_type, make_backend, model_label
from mad_eval.errors import UserError
from mad_eval.reporting.results import load_run
from mad_eval.serving import (
    LocalServer,
    PoolError,
    ServerError,
    ServeSpec,
    gpu_pool,
    parse_serve,
    place,
)
from mad_eval.serving.session import prepare
from mad_eval.settings.config import ConfigError

RUN = ("--agents", "2", "--rounds", "1", "--limit", "3", "--retries", "1", "--backoff", "0.01")


@pytest.fixture
def checkpoint(tmp_path: Path) -> Path:
    return make_checkpoint(tmp_path / "ckpts" / "qwen-sdrl")


# --- the spec and its settings, no process -------------------------------------------


def test_a_served_spec_reads_its_settings_into_the_vllm_serve_command(checkpoint):
    spec = parse_serve(
        f"serve:{checkpoint}",
        ["tensor_parallel=2", "replicas=2", "args=--dtype float16 --seed 7"],
        max_model_len=4096,
    )
    assert (spec.label, spec.gpus, spec.replicas) == ("qwen-sdrl", 2, 2)
    assert spec.command(8123) == [
        "vllm", "serve", str(checkpoint), "--host", "127.0.0.1", "--port", "8123",
        "--served-model-name", "qwen-sdrl", "--tensor-parallel-size", "2",
        "--max-model-len", "4096", "--dtype", "float16", "--seed", "7",
    ]  # fmt: skip


def test_a_lora_adapter_is_served_over_its_base_under_the_label(tmp_path):
    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text("{}")
    with pytest.raises(ConfigError, match=r"is a LoRA adapter: give its base model with"):
        parse_serve(f"serve:{adapter}")
    spec = parse_serve(f"serve:{adapter}", {"base": "Qwen/Qwen3-8B"})
    command = spec.command(9000)
    assert command[2] == "Qwen/Qwen3-8B"
    assert command[-3:] == ["--enable-lora", "--lora-modules", f"adapter={adapter}"]
    (adapter / "adapter_config.json").write_text('{"r": 64}')  # above vLLM's default of 16
    spec = parse_serve(f"serve:{adapter}", {"base": "Qwen/Qwen3-8B"})
    assert spec.command(9000)[-2:] == ["--max-lora-rank", "64"]
    spec = parse_serve(f"serve:{adapter}", {"base": "b/m", "args": "--max-lora-rank=128"})
    assert spec.args == ("--max-lora-rank=128",)


def test_a_label_of_its_own_keeps_the_name_runs_ask_for():
    spec = ServeSpec(label="sdrl-8b", checkpoint="org/qwen-sdrl")
    command = spec.command(1)
    at = command.index("--served-model-name")
    assert command[at + 1 : at + 3] == ["sdrl-8b", "qwen-sdrl"]


@pytest.mark.parametrize(
    "spec",
    [
        "openai:SmolLM2-135M-Instruct",  # a server's --served-model-name
        "serve:/ckpts/SmolLM2-135M-Instruct/",  # served by mad-eval, under that name
        "serve:HuggingFaceTB/SmolLM2-135M-Instruct",
        "vllm:HuggingFaceTB/SmolLM2-135M-Instruct",
        "openai:HuggingFaceTB/SmolLM2-135M-Instruct",
    ],
)
def test_a_model_has_one_label_however_it_is_reached(spec):
    assert model_label(spec) == "SmolLM2-135M-Instruct"
    assert model_label("sim:p0=0.5,skill=0.7") == "sim:p0=0.5,skill=0.7"  # a sim stays whole
    # The label a served model prints under is the one it answers to.
    assert parse_serve("serve:HuggingFaceTB/SmolLM2-135M-Instruct").label == model_label(spec)


@pytest.mark.parametrize(
    ("model", "settings", "sentence"),
    [
        ("serve:./no/such/ckpt", None, "the checkpoint folder ./no/such/ckpt of serve:./no/"),
        ("serve:/no/such", None, "the checkpoint folder /no/such of serve:/no/such does not"),
        ("serve:", None, "names no checkpoint"),
        ("serve:org/m", ["replicas=0"], "replicas of serve:org/m must be a whole number of at"),
        ("serve:org/m", ["tensor_parallel=1.5"], "tensor_parallel of serve:org/m must be a whole"),
        ("serve:org/m", {"max_model_len": True}, "max_model_len of serve:org/m must be a whole"),
        ("serve:org/m", ["tp=2"], "has no setting 'tp' for serve:org/m; use base, tensor_par"),
        ("serve:org/m", ["replicas"], "--serving takes KEY=VALUE"),
        ("serve:org/m", ["base=/no/base"], "the base model folder /no/base of serve:org/m does"),
        ("serve:org/m", ["args=--x 'open"], "args of serve:org/m cannot be split"),
    ],
)
def test_bad_serving_input_is_one_sentence(model, settings, sentence):
    with pytest.raises(ConfigError) as caught:
        parse_serve(model, settings)
    assert sentence in str(caught.value)
    assert "\n" not in str(caught.value) and str(caught.value).endswith(".")


def test_the_gpu_pool_comes_from_the_option_then_the_environment(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    assert gpu_pool("0, 1") == [0, 1]
    assert gpu_pool(None) == [2, 3]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert gpu_pool(None) == []
    with pytest.raises(PoolError, match="--gpus 'a,b' is not a list of GPU indices"):
        gpu_pool("a,b")
    with pytest.raises(PoolError, match="names GPU 1 twice"):
        gpu_pool("1,1")


def test_replicas_take_distinct_gpus_and_never_more_than_the_pool():
    spec = ServeSpec("m", "org/m", tensor_parallel=2, replicas=2)
    assert place(spec, [4, 5, 6, 7]) == [[4, 5], [6, 7]]
    with pytest.raises(ConfigError, match=r"m needs 4 GPUs .* but the pool has 3 \(0,1,2\)"):
        place(spec, [0, 1, 2])
    assert place(ServeSpec("m", "org/m", tensor_parallel=4), []) == [[]]  # one CPU slot
    with pytest.raises(ConfigError, match="asks for 2 replicas but there are no GPUs"):
        place(ServeSpec("m", "org/m", replicas=2), [])


def test_serve_is_a_backend_type_that_needs_its_server():
    found = backend_type("serve:org/m")
    assert found.name == "serve" and found.context_length and found.extra_body
    with pytest.raises(BackendError, match="serve:<checkpoint> for a checkpoint mad-eval serves"):
        backend_type("nope:x")
    with pytest.raises(BackendError, match="'serve:org/m' has no server"):
        make_backend("serve:org/m")


def test_a_run_refuses_serving_settings_it_cannot_use(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no vllm here
    with pytest.raises(ConfigError, match="no vllm command found, nor a vLLM installed beside"):
        prepare({"model": "serve:org/m"}, None, None)
    # a mistyped checkpoint is the user's to fix first, whatever the machine lacks
    with pytest.raises(ConfigError, match=r"the checkpoint folder \./ckpts/nope of serve:\./ckpts"):
        prepare({"model": "serve:./ckpts/nope"}, None, None)
    env = install_stand_in(tmp_path)
    monkeypatch.setenv("PATH", env["PATH"])
    with pytest.raises(ConfigError, match=r"\(or OPENAI_BASE_URL\) is for openai: models"):
        prepare({"model": "serve:org/m", "base_url": ["http://h/v1"]}, None, None)
    with pytest.raises(ConfigError, match="--serving is for a serve:CHECKPOINT model, not sim"):
        prepare({}, ["replicas=2"], None)
    with pytest.raises(ConfigError, match="--gpus is for a serve:CHECKPOINT model, not openai:x"):
        prepare({"model": "openai:x"}, None, "0")
    assert prepare({"model": "openai:x"}, None, None) is None


# --- servers through the stand-in vllm ---------------------------------------------------


def run_served(tmp_path: Path, checkpoint: Path, env: dict[str, str], *extra: str):
    return mad_eval(
        "run", "--model", f"serve:{checkpoint}", *RUN, "--out", "r", *extra, cwd=tmp_path, env=env
    )  # fmt: skip


@pytest.mark.slow
def test_a_served_run_starts_routes_to_and_stops_its_replicas(tmp_path, checkpoint):
    env = install_stand_in(tmp_path)
    result = run_served(tmp_path, checkpoint, env, "--gpus", "0,1", "--serving", "replicas=2")
    assert result.returncode == 0, result.stderr + result.stdout
    launched = starts(env)
    assert sorted(s["cuda"] for s in launched) == ["0", "1"]
    for start in launched:
        argv = start["argv"]
        assert argv[:2] == ["serve", str(checkpoint)]
        assert argv[argv.index("--served-model-name") + 1] == "qwen-sdrl"
        assert start["pgid"] == start["ppid"] != os.getpgid(0)  # its guard's group, its own
        assert not alive(start["pid"])
    assert len({s["argv"][s["argv"].index("--port") + 1] for s in launched}) == 2
    run = tmp_path / "r"
    turns = turns_of(run)
    assert len(turns) == 3 * 2 * 2 and all(t["error"] is None for t in turns)
    assert len({t["endpoint"] for t in turns}) == 2  # both replicas answered
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["config"]["model"] == f"serve:{checkpoint}"
    assert load_run(run).describe()["model"] == "qwen-sdrl"  # as openai:qwen-sdrl would be
    for i in (0, 1):
        assert "stand-in vllm serve" in (run / f"server-qwen-sdrl-{i}.log").read_text()
    assert "Server qwen-sdrl ready at http://127.0.0.1:" in result.stdout
    assert "Server qwen-sdrl stopped (2 replica(s))." in result.stdout

    # Finished: reported again with fewer replicas (operational), no server started.
    again = run_served(tmp_path, checkpoint, env, "--gpus", "0", "--serving", "replicas=1")
    assert again.returncode == 0, again.stderr + again.stdout
    assert "holds every turn: reported, qwen-sdrl not served." in " ".join(again.stdout.split())
    assert turns_of(run) == turns
    assert len(starts(env)) == 2


@pytest.mark.slow
def test_a_server_that_dies_at_start_up_is_one_sentence_naming_its_log(tmp_path, checkpoint):
    env = install_stand_in(tmp_path)
    env["STAND_IN_FAIL"] = "torch.OutOfMemoryError: CUDA out of memory; key sk-abcdefghijklmnop1234"
    result = run_served(tmp_path, checkpoint, env)
    assert result.returncode != 0
    error = " ".join(result.stderr.split())
    log = Path("r", "server-qwen-sdrl-0.log")
    assert f"the vllm server for qwen-sdrl exited during start-up (code 3); see {log}" in error
    assert "CUDA out of memory" in error and "sk-abcdefghijklmnop1234" not in error
    assert not (tmp_path / "r" / "turns.jsonl").exists()


def serve_once(spec: ServeSpec, log: Path, **limits: float) -> tuple[str, LocalServer]:
    async def go() -> tuple[str, LocalServer]:
        server = LocalServer(spec, [3], log, **limits)
        try:
            url = await server.start()
            with urllib.request.urlopen(url + "/models", timeout=10) as answer:
                assert json.load(answer)["data"][0]["id"] == spec.label
            assert server.alive()
        finally:
            await server.stop()
            await server.stop()  # idempotent
        return url, server

    return asyncio.run(go())


@pytest.mark.slow
def test_stop_reaches_the_servers_children_and_a_taken_port_is_tried_again(
    tmp_path, monkeypatch, checkpoint
):
    env = install_stand_in(tmp_path)
    for name, value in {**env, "STAND_IN_CHILD": "1", "STAND_IN_TAKEN": "1"}.items():
        monkeypatch.setenv(name, value)
    spec = parse_serve(f"serve:{checkpoint}")
    _, server = serve_once(spec, tmp_path / "server.log", grace=10)
    first, second = starts(env)
    assert (
        first["argv"][first["argv"].index("--port") + 1]
        != second["argv"][second["argv"].index("--port") + 1]
    )
    assert second["cuda"] == "3" and not server.alive()
    assert wait_gone(second["pid"]) and wait_gone(second["child"])  # the worker went too


@pytest.mark.slow
@pytest.mark.parametrize("fault", [{"STAND_IN_SILENT": "1"}, {"STAND_IN_MODELS": "deep"}])
def test_a_server_that_never_answers_times_out_naming_its_log(tmp_path, monkeypatch, fault):
    """A server silent, or one whose model list is hostile (nested 100,000 deep: the start-up
    probe reads /v1/models as any reply is read, bodies.py, so no RecursionError), never
    counts as ready, and its start times out in one sentence."""
    env = install_stand_in(tmp_path)
    for name, value in {**env, **fault}.items():
        monkeypatch.setenv(name, value)
    log = tmp_path / "server.log"
    with pytest.raises(ServerError, match=rf"for m did not answer within 3 s; see {log}"):
        serve_once(ServeSpec("m", "org/m"), log, start_timeout=3)
    assert wait_gone(starts(env)[-1]["pid"])


@pytest.mark.slow
@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGTERM, signal.SIGINT])
def test_no_server_outlives_mad_eval_killed_mid_run(tmp_path, checkpoint, how):
    """Nor its engine: a child of the server that ignores SIGTERM, as vLLM's engine process
    does not hear its API server killed mid-start, goes with the group all the same."""
    env = {**os.environ, **install_stand_in(tmp_path), "STAND_IN_DELAY": "0.3", "COLUMNS": "200"}
    env["STAND_IN_CHILD"] = "deaf"
    process = subprocess.Popen(
        [sys.executable, "-m", "mad_eval", "run", "--model", f"serve:{checkpoint}", *RUN,
         "--limit", "40", "--concurrency", "2", "--out", "r"],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        turns = tmp_path / "r" / "turns.jsonl"
        while not (turns.exists() and turns.read_text().count("\n") >= 2):
            assert process.poll() is None, process.stdout.read().decode()
            assert time.monotonic() < deadline, "the run never got going"
            time.sleep(0.1)
        (server,) = starts(env)
        assert alive(server["pid"])
        process.send_signal(how)
        process.wait(timeout=120)
        assert wait_gone(server["pid"], timeout=120) and group_gone(server["pgid"])
        assert not alive(server["child"])
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()


@pytest.mark.slow
def test_single_from_python_serves_its_model_too(tmp_path, monkeypatch, checkpoint):
    import mad_eval

    for name, value in install_stand_in(tmp_path).items():
        monkeypatch.setenv(name, value)
    said: list[str] = []

    class Heard(mad_eval.Listener):
        def say(self, text: str) -> None:
            said.append(text)

    result = mad_eval.single(
        model=f"serve:{checkpoint}", samples=2, limit=2, out=tmp_path / "s",
        serving={"max_model_len": 1024}, gpus="5", listener=Heard(),
    )  # fmt: skip
    assert len(result.turns()) == 4
    (start,) = starts({"STAND_IN_RECORD": os.environ["STAND_IN_RECORD"]})
    assert start["cuda"] == "5" and "--max-model-len" in start["argv"]
    assert not alive(start["pid"])
    assert said[0].startswith("Starting vllm serve for qwen-sdrl (GPUs 5); log: ")
    assert said[1].startswith("Server qwen-sdrl ready at http://127.0.0.1:")
    assert said[2] == "Server qwen-sdrl busy: 4 turns left."
    assert said[-1] == "Server qwen-sdrl stopped (1 replica(s))."


@pytest.mark.slow
def test_a_served_run_records_its_server_and_resumes_only_on_the_same_answers(
    tmp_path, monkeypatch, checkpoint, caplog
):
    import mad_eval

    for name, value in install_stand_in(tmp_path).items():
        monkeypatch.setenv(name, value)
    record = {"STAND_IN_RECORD": os.environ["STAND_IN_RECORD"]}
    out = tmp_path / "r"
    common = dict(model=f"serve:{checkpoint}", agents=2, rounds=1, limit=2, out=out)
    args = "--seed 7 --gpu-memory-utilization 0.8 --api-key sk-abcdefghijklmnop1234"
    with caplog.at_level("WARNING", logger="mad_eval"):
        mad_eval.run(**common, serving={"args": args + " --trust-remote-code"}, gpus="0")
    assert "qwen-sdrl is served with --trust-remote-code: vllm runs the Python code" in caplog.text
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["serving"] == {
        "checkpoint": str(checkpoint), "base": None, "max_model_len": None,
        "args": ["--seed", "7"],
        "operational": {"tensor_parallel": 1, "data_parallel": 1, "replicas": 1,
                        "args": ["--gpu-memory-utilization", "0.8", "--api-key", "***",
                                 "--trust-remote-code"],
                        "launcher": shutil.which("vllm")},  # the stand-in on PATH
    }  # fmt: skip
    assert "sk-abcdefghijklmnop1234" not in (out / "manifest.json").read_text()

    # What changes the answers (another seed) is refused, before any server starts.
    with pytest.raises(UserError, match=r"serving args is \['--seed', '7'\] there"):
        mad_eval.run(**common, serving={"args": "--seed 8"}, gpus="0")
    # What does not (memory, replicas) is the same run: finished, so reported unserved.
    again = mad_eval.run(**common, serving={"args": "--seed 7", "replicas": 2}, gpus="0,1")
    assert len(again.turns()) == 2 * 2 * 2
    assert len(starts(record)) == 1


@pytest.mark.slow
def test_a_server_that_dies_mid_run_is_started_again_and_the_run_resumes(tmp_path, checkpoint):
    env = install_stand_in(tmp_path)
    env.update(STAND_IN_DIE_AFTER="5", STAND_IN_DIE_STARTS="1", STAND_IN_DELAY="0.05")
    args = ("run", "--model", f"serve:{checkpoint}", "--agents", "2", "--rounds", "1",
            "--limit", "6", "--concurrency", "2", "--backoff", "0.5", "--out", "r",
            "--cache", "answers.db")  # fmt: skip
    result = mad_eval(*args, cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stderr + result.stdout
    first, second = starts(env)
    said = " ".join(result.stdout.split())
    assert "Server qwen-sdrl exited by itself mid-run (code 7); starting again (1 of 2)" in said
    assert "the run resumes" in said and "resuming:" in said
    turns = turns_of(tmp_path / "r")
    assert len(turns) == 6 * 2 * 2 and all(t["error"] is None for t in turns)
    assert not alive(first["pid"]) and not alive(second["pid"])


@pytest.mark.slow
def test_a_server_that_keeps_dying_ends_the_run_in_one_sentence(tmp_path, checkpoint):
    env = install_stand_in(tmp_path)
    env.update(STAND_IN_DIE_AFTER="1", STAND_IN_DIE_STARTS="9")
    args = ("run", "--model", f"serve:{checkpoint}", "--agents", "2", "--rounds", "1",
            "--limit", "6", "--concurrency", "2", "--backoff", "0.5", "--out", "r")  # fmt: skip
    result = mad_eval(*args, cwd=tmp_path, env=env)
    assert result.returncode != 0
    error = " ".join(result.stderr.split())
    assert (
        "the vllm server for qwen-sdrl exited by itself mid-run (code 7) 3 times; see r/server-"
        in error
    )
    assert len(starts(env)) == 3 and not any(alive(s["pid"]) for s in starts(env))


@pytest.mark.slow
def test_a_server_that_dies_twice_on_the_same_error_says_it_and_is_not_started_again(
    tmp_path, checkpoint
):
    """vLLM's CPU build dying on seeded requests: its API server logs the engine's traceback,
    then its shutdown, and exits 0. The message quotes the error and the frame that raised it,
    not the shutdown, says what avoids it, and there is no third start."""
    env = install_stand_in(tmp_path)
    env.update(STAND_IN_DIE_AFTER="1", STAND_IN_DIE_STARTS="9",
               STAND_IN_DIE_ERROR="RuntimeError: CPU Generator does not use offset")  # fmt: skip
    args = ("run", "--model", f"serve:{checkpoint}", "--agents", "2", "--rounds", "1",
            "--limit", "6", "--concurrency", "2", "--backoff", "0.5", "--out", "r")  # fmt: skip
    result = mad_eval(*args, cwd=tmp_path, env=env)
    assert result.returncode != 0
    said, error = " ".join(result.stdout.split()), " ".join(result.stderr.split())
    assert "Server qwen-sdrl exited by itself mid-run (code 0); starting again (1 of 2)" in said
    assert (
        "exited by itself mid-run (code 0) twice on the same error, so it is not started" in error
    )
    cause = "its first error: RuntimeError: CPU Generator does not use offset (raised at "
    assert cause + "gpu_model_runner.py:2210 in sync); vLLM's CPU build cannot sample" in error
    assert "--no-enable-chunked-prefill" in error and "MPClient" not in error
    assert len(starts(env)) == 2 and not any(alive(s["pid"]) for s in starts(env))


VLLM_CPU_CRASH = """\
$ vllm serve /ckpt --port 5
RuntimeError: an earlier start's error, not this one's
$ vllm serve /ckpt --port 6
INFO 11-28 12:00:00 [api_server.py:1] vLLM API server version 0.32.0
(EngineCore_DP0 pid=81) ERROR 11-28 12:00:01 [core.py:710] EngineCore encountered a fatal error.
(EngineCore_DP0 pid=81) ERROR 11-28 12:00:01 [core.py:710] Traceback (most recent call last):
(EngineCore_DP0 pid=81) ERROR 11-28 12:00:01 [core.py:710]   File "/v/vllm/v1/engine/core.py", \
line 701, in run_engine_core
(EngineCore_DP0 pid=81) ERROR 11-28 12:00:01 [core.py:710]     engine_core.run_busy_loop()
(EngineCore_DP0 pid=81) ERROR 11-28 12:00:01 [core.py:710]   File \
"/v/vllm/v1/worker/gpu_model_runner.py", line 2210, in _bookkeeping_sync
(EngineCore_DP0 pid=81) ERROR 11-28 12:00:01 [core.py:710]     generator.set_offset(offset)
(EngineCore_DP0 pid=81) ERROR 11-28 12:00:01 [core.py:710] RuntimeError: CPU Generator does not \
use offset
(APIServer pid=80) vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue.
(APIServer pid=80) [shutdown] MPClient: complete
resource_tracker.py:254: UserWarning: There appear to be 1 leaked semaphore objects
"""


def test_a_server_log_is_read_for_its_last_starts_first_error(tmp_path):
    from mad_eval.serving.launch import first_error, why_it_ended

    log = tmp_path / "server.log"
    log.write_text(VLLM_CPU_CRASH)
    assert first_error(log) == (
        "RuntimeError: CPU Generator does not use offset "
        "(raised at gpu_model_runner.py:2210 in _bookkeeping_sync)"
    )
    assert "--no-enable-chunked-prefill" in why_it_ended(log)
    log.write_text("$ vllm serve /ckpt\nINFO starting\nKilled\n")
    assert first_error(log) is None and why_it_ended(log) == ": INFO starting | Killed"
    assert first_error(tmp_path / "absent.log") is None
    # A log echoing a request: a long line of anyone's text is read in linear time, and no
    # line that only looks like a name is taken for an exception.
    log.write_text("a." * 2_000_000 + "\n(" + "pid=" * 500_000 + "\nUserWarning: not raised\n")
    assert first_error(log) is None


@pytest.mark.slow
def test_without_a_vllm_on_path_the_installed_vllm_serves_through_its_module(
    tmp_path, monkeypatch, checkpoint
):
    """vLLM's CPU build has no working `vllm serve`: with no vllm on PATH, a vLLM installed
    beside mad-eval is started as `python -m vllm.entrypoints.openai.api_server --model CKPT`,
    isolated from the working directory; the run goes through it as through `vllm serve`."""
    import mad_eval
    from mad_eval.children import python_module
    from mad_eval.serving import installation

    for name, value in install_stand_in_module(tmp_path).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(installation, "installed", lambda package: package == "vllm")
    command = installation.server_command(["vllm", "serve", "/ckpt", "--port", "5", "--seed", "1"])
    module = python_module("vllm.entrypoints.openai.api_server")
    assert command == [*module, "--model", "/ckpt", "--port", "5", "--seed", "1"]
    assert module[-1] == "--" and "-I" in module  # isolated; its arguments after the path
    result = mad_eval.run(model=f"serve:{checkpoint}", agents=2, rounds=1, limit=2,
                          out=tmp_path / "r", gpus="0")  # fmt: skip
    assert len(result.turns()) == 2 * 2 * 2
    (start,) = starts({"STAND_IN_RECORD": str(tmp_path / "starts.jsonl")})
    assert start["argv"][:2] == ["serve", str(checkpoint)] and not alive(start["pid"])
    # The CPU build's own `vllm` script on PATH (its `serve` cannot run): the module still.
    scripts = tmp_path / "venv-bin"
    scripts.mkdir()
    (scripts / "vllm").write_text("#!/bin/sh\nexit 1\n")
    (scripts / "vllm").chmod(0o755)
    monkeypatch.setenv("PATH", f"{scripts}{os.pathsep}/usr/bin")
    monkeypatch.setattr(installation.sysconfig, "get_paths", lambda: {"scripts": str(scripts)})
    assert installation.server_command(["vllm", "serve", "/ckpt"])[:2] == module[:2]
    monkeypatch.setattr(installation.importlib.metadata, "distribution", lambda name: name)
    assert installation.server_command(["vllm", "serve", "/ckpt"]) == [
        str(scripts / "vllm"),
        "serve",
        "/ckpt",
    ]
    monkeypatch.setenv("PATH", "/usr/bin")
    monkeypatch.setattr(installation, "installed", lambda package: False)
    with pytest.raises(ConfigError, match="nor a vLLM installed beside mad-eval"):
        mad_eval.run(model=f"serve:{checkpoint}", limit=1, out=tmp_path / "r2")
