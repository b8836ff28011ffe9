"""Serving arguments are someone else's too (an experiment file's `args`, a pasted command):
a secret flag's value (--api-key K, --api-key=K, --hf-token, --*-secret) never reaches a
file or the console, an argument that moves where the server listens is refused in one
sentence, and a dry run shows each server's command, where the questions are read from and
where they are sent."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from cli_helpers import mad_eval
from serving_helpers import checkpoint, experiment_file, install_stand_in, served_models, starts

import mad_eval as api
from mad_eval.sanitize import HIDDEN, redact, secrets_in
from mad_eval.serving.spec import parse_serve
from mad_eval.settings.config import ConfigError

KEY, TOKEN, SECRET = "key-value-31415", "token-value-27182", "secret-value-16180"
ARGS = f"--api-key {KEY} --hf-token={TOKEN} --my-secret '{SECRET}' --seed 3"
SMALL = ("--agents", "2", "--rounds", "1", "--limit", "2", "--retries", "0")


def leaks(root: Path) -> list[str]:
    """Each file under `root` holding a secret; of a server's log only the lines mad-eval
    writes ($ vllm serve ...): the rest is the server's own output."""
    found = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        text = path.read_text(errors="replace")
        if path.name.startswith("server-"):
            text = "\n".join(line for line in text.splitlines() if line.startswith("$ "))
        found += [f"{path}: {s}" for s in (KEY, TOKEN, SECRET) if s in text]
    return found


# --- one rule for secret flags -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("args=--api-key K1", f"args=--api-key {HIDDEN}"),
        ("vllm serve m --api-key=K1 --port 8", f"vllm serve m --api-key={HIDDEN} --port 8"),
        ("--hf-token 'a b' --seed 1", f"--hf-token '{HIDDEN}' --seed 1"),
        ('--db-password="p w" --x', f'--db-password="{HIDDEN}" --x'),
        ("--API_KEY k --client-secret s", f"--API_KEY {HIDDEN} --client-secret {HIDDEN}"),
        ('args = "--api-key K1 --seed 1"', f'args = "--api-key {HIDDEN} --seed 1"'),
        ('["--api-key", "K1", "--seed", "1"]', f'["--api-key", "{HIDDEN}", "--seed", "1"]'),
    ],
)  # fmt: skip
def test_a_secret_flag_is_hidden_in_every_spelling_of_a_command_line(text, shown):
    assert redact(text) == shown
    assert redact(shown) == shown


@pytest.mark.parametrize(
    "text",
    ["--max-tokens 512 --tokenizer t --ssl-keyfile k.pem --max-num-batched-tokens 8192",
     "--api-key --port 8"],  # a flag's value that starts with a dash is the next flag
)  # fmt: skip
def test_other_flags_keep_their_values(text):
    assert redact(text) == text


def test_an_argument_list_hides_the_value_after_a_secret_flag():
    argv = ["vllm", "serve", "m", "--api-key", KEY, "--hf_token", TOKEN, "--seed", "3"]
    assert redact(argv) == ["vllm", "serve", "m", "--api-key", HIDDEN, "--hf_token", HIDDEN,
                            "--seed", "3"]  # fmt: skip
    assert redact(("--key",)) == ["--key"]  # a flag with nothing after it
    assert secrets_in({"args": argv}) == {KEY, TOKEN}
    assert secrets_in(f"vllm serve m {ARGS}") == {KEY, TOKEN, SECRET}


# --- where the server listens is mad-eval's --------------------------------------------------


@pytest.mark.parametrize(
    "args",
    ["--host 0.0.0.0", "--host=0.0.0.0", "--seed 1 --hos 0.0.0.0", "--port 80", "--port=80",
     "--uds /tmp/vllm.sock", "--config serve.yaml", "--data_parallel_address 0.0.0.0",
     "--data-parallel-rpc-port=1"],
)  # fmt: skip
def test_an_argument_that_moves_the_server_is_refused_in_one_sentence(args):
    with pytest.raises(ConfigError) as error:
        parse_serve("serve:org/model", {"args": args})
    message = str(error.value)
    flag = next(a for a in args.split() if a.startswith("--") and a != "--seed")
    assert message.startswith(f"--serving args of serve:org/model may not hold '{flag}'")
    assert message.count(". ") == 0 and message.endswith("remove it.")


def test_other_arguments_are_served_as_given():
    spec = parse_serve("serve:org/model", {"args": "--seed 1 --hf-overrides {} --max-num-seqs 8"})
    assert spec.command(8000)[3:7] == ["--host", "127.0.0.1", "--port", "8000"]
    assert spec.command(8000)[-6:] == ["--seed", "1", "--hf-overrides", "{}", "--max-num-seqs", "8"]


# --- no secret reaches a file ------------------------------------------------------------------


@pytest.mark.slow
def test_no_serving_secret_reaches_a_file_of_a_served_run(tmp_path, monkeypatch):
    for name, value in install_stand_in(tmp_path).items():
        monkeypatch.setenv(name, value)
    ckpt = checkpoint(tmp_path / "ckpts" / "m")
    result = mad_eval("run", "--model", f"serve:{ckpt}", "--serving", f"args={ARGS}",
                      "--gpus", "0", *SMALL, "--out", "r", cwd=tmp_path)  # fmt: skip
    assert result.returncode == 0, result.stderr
    run = tmp_path / "r"
    assert leaks(run) == []
    assert [s for s in (KEY, TOKEN, SECRET) if s in result.stdout + result.stderr] == []
    (start,) = starts({"STAND_IN_RECORD": os.environ["STAND_IN_RECORD"]})
    real = ["--api-key", KEY, f"--hf-token={TOKEN}", "--my-secret", SECRET, "--seed", "3"]
    assert start["argv"][-7:] == real  # the server gets the real values
    manifest = json.loads((run / "manifest.json").read_text())
    assert f"args=--api-key {HIDDEN} --hf-token={HIDDEN} --my-secret '{HIDDEN}'" in " ".join(
        manifest["command"]
    )
    assert manifest["serving"]["args"] == [f"--hf-token={HIDDEN}", "--my-secret", HIDDEN,
                                           "--seed", "3"]  # fmt: skip
    assert manifest["serving"]["operational"]["args"] == ["--api-key", HIDDEN]
    assert "--api-key" in (run / ".lock").read_text()
    (log,) = run.glob("server-*.log")
    (line,) = [x for x in log.read_text().splitlines() if x.startswith("$ ")]
    assert f"--api-key {HIDDEN} --hf-token={HIDDEN} --my-secret {HIDDEN} --seed 3" in line


def test_an_experiment_file_keeps_its_serving_secrets_out_of_experiment_json(tmp_path):
    from mad_eval.experiments import load_experiment
    from mad_eval.experiments.run import copied

    models = served_models(tmp_path, ("m",), f'args = "{ARGS}"')
    experiment = load_experiment(experiment_file(tmp_path, models))
    experiment.out = tmp_path / "out"
    with copied(experiment, []):
        text = json.loads((tmp_path / "out" / "experiment.json").read_text())["text"]
    assert f'args = "--api-key {HIDDEN} --hf-token={HIDDEN} --my-secret' in text
    assert leaks(tmp_path / "out") == []


# --- the dry runs ------------------------------------------------------------------------------


def test_a_runs_dry_run_prints_each_servers_command_redacted(tmp_path):
    ckpt = checkpoint(tmp_path / "ckpts" / "m")
    result = mad_eval("run", "--dry-run", "--model", f"serve:{ckpt}", "--serving",
                      f"args={ARGS} --trust-remote-code", "--serving", "replicas=2",
                      "--gpus", "0,1", *SMALL, "--out", "r", cwd=tmp_path)  # fmt: skip
    assert result.returncode == 0, result.stderr
    servers = [line for line in result.stdout.splitlines() if line.startswith("Server: ")]
    assert len(servers) == 2
    assert servers[0] == (
        f"Server: vllm serve {ckpt} --host 127.0.0.1 --port PORT --served-model-name m "
        f"--api-key {HIDDEN} --hf-token={HIDDEN} --my-secret {HIDDEN} --seed 3 --trust-remote-code"
    )
    assert "runs the Python code that comes with its checkpoint" in result.stdout
    assert "r: 2 questions, 8 turns in all, 0 recorded, 8 to ask." in result.stdout
    assert leaks(tmp_path) == [] and not (tmp_path / "r").exists()


def test_a_runs_dry_run_says_where_questions_come_from_and_go(tmp_path):
    rows = tmp_path / "elsewhere" / "private.jsonl"
    rows.parent.mkdir()
    rows.write_text('{"question": "What is 2 + 2?", "answer": "4"}\n')
    preview = api.run_plan(model="openai:m", base_url=["http://u:pw99@example.test:1/v1"],
                           benchmark=str(rows), agents=2, rounds=1, out=tmp_path / "r")  # fmt: skip
    assert preview.data_file == rows
    assert preview.endpoints == {f"http://{HIDDEN}@example.test:1/v1": ["openai:m"]}
    assert (preview.questions, preview.turns, preview.recorded) == (1, 4, 0)
    assert not (tmp_path / "r").exists()


def test_an_experiments_dry_run_shows_its_servers_endpoints_and_outside_files(tmp_path):
    rows = tmp_path / "private.jsonl"  # outside the experiment's own folder
    rows.write_text('{"question": "What is 2 + 2?", "answer": "4"}\n')
    home = tmp_path / "exp"
    home.mkdir()
    (home / "mine.jsonl").write_text(rows.read_text())  # inside: not flagged
    ckpt = checkpoint(tmp_path / "ckpts" / "m")
    (home / "exp.toml").write_text(f"""
[experiment]
out = "out"
[models]
evil = {{ model = "openai:m", base_url = "http://u:pw99@example.test:1/v1" }}
srv = {{ model = "serve:{ckpt}", args = "{ARGS} --trust-remote-code" }}
[grids.main]
models = ["evil", "srv"]
benchmarks = ["{rows}", "{home / "mine.jsonl"}"]
agents = [2]
rounds = [1]
""")
    result = mad_eval("experiment", "run", "exp/exp.toml", "--dry-run", "--gpus", "0",
                      cwd=tmp_path)  # fmt: skip
    assert result.returncode == 0, result.stderr
    out = result.stdout.splitlines()
    assert out[out.index("Questions are sent to:") + 1] == (
        f"  http://{HIDDEN}@example.test:1/v1 (2 runs: private-decentralized-n2-t1-evil, "
        "mine-decentralized-n2-t1-evil)"
    )
    assert f"  {rows} (outside; 2 runs: private-decentralized-n2-t1-evil, " in "\n".join(out)
    assert "mine.jsonl" not in "\n".join(line for line in out if "outside" in line)
    assert f"Server for serve:{ckpt}: vllm serve {ckpt} --host 127.0.0.1 --port PORT " in (
        result.stdout
    )
    assert f"--api-key {HIDDEN} --hf-token={HIDDEN}" in result.stdout
    assert f"Served with --trust-remote-code: serve:{ckpt}'s server runs" in result.stdout
    assert [s for s in (KEY, TOKEN, SECRET, "pw99") if s in result.stdout] == []
    assert not (tmp_path / "out").exists()  # nothing written
