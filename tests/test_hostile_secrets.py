"""No secret is written: a URL's password (with an unencoded @), an extra body's api_key,
custom secrets and header maps, and a server's echo of the Authorization header never reach
a file of a run, a judge, an experiment or the viewer's site, nor the console; the requests
still carry them; and every file of a run has one mode."""

from __future__ import annotations

import base64
import json
import os
import textwrap
from pathlib import Path

import pytest
from cli_helpers import mad_eval as command
from cli_helpers import turns_of
from stub_server import StubServer

import mad_eval
from mad_eval.sanitize import HIDDEN, outward, redact, remember, secrets_in
from mad_eval.settings.config import RunConfig

PASSWORD = "we@rd0011"  # an @ left unencoded, as people write it
BASIC = base64.b64encode(f"carol:{PASSWORD}".encode()).decode()
BODY = {
    "api_key": "body-secret-value-1",
    "my_secret": "custom-hidden-42",
    "headers": {"Authorization": "Bearer tok-bearer-secret-7", "x-api-key": "xapikey-98765"},
    "chat_template_kwargs": {"enable_thinking": False},
}
SECRETS = (
    PASSWORD,
    "rd0011",
    BASIC,
    "body-secret-value-1",
    "custom-hidden-42",
    "tok-bearer-secret-7",
    "xapikey-98765",
)
FAST = {"retries": 0, "backoff": 0.01}


def with_login(url: str) -> str:
    return url.replace("http://", f"http://carol:{PASSWORD}@")


def leaks(root: Path) -> list[str]:
    """Each file under `root` that holds a secret, with the secret."""
    return [
        f"{path}: {secret}"
        for path in sorted(root.rglob("*"))
        if path.is_file()
        for secret in SECRETS
        if secret.encode() in path.read_bytes()
    ]


def probe(body: dict) -> bool:
    """The one-token request that checks an extra body before a run (plan.check_extra_body)."""
    return body.get("messages", [{}])[0].get("content") == "Say OK."


def echo_half(body: dict, attempt: int) -> str | None:
    """Half the turns refused with an error that repeats the Authorization header and the
    extra fields; the extra body's check passes."""
    return "echo" if not probe(body) and body["seed"] % 2 == 0 else None


def umask_mode() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


# --- a run, resumed, judged, reported and viewed ---------------------------------------------


@pytest.mark.slow
def test_no_secret_reaches_a_file_of_a_run_a_judge_or_the_viewer(tmp_path):
    run_dir, site = tmp_path / "run", tmp_path / "site"
    with StubServer(fault=echo_half) as server:
        url = with_login(server.base_url)
        settings = dict(model="openai:stub-model", base_url=[url], extra_body=BODY, **FAST)
        settings |= dict(benchmark="arith", limit=4, agents=2, rounds=1)
        mad_eval.run(out=run_dir, **settings)
        # Resumed: the recorded (redacted) configuration is the one asked for again.
        mad_eval.run(out=run_dir, **settings)
        for _ in range(2):  # judged, and the judging resumed under the same setting
            mad_eval.judge(run_dir, "openai:stub-model", base_url=[url], extra_body=BODY, **FAST)
        mad_eval.report(run_dir)
        mad_eval.view([run_dir], out=site)
        bodies, headers = list(server.requests), list(server.headers)

    assert leaks(tmp_path) == []
    # Redaction hid what was recorded, not what was sent: the server got the real login and
    # the real extra body on every request.
    assert {h["Authorization"] for h in headers} == {f"Basic {BASIC}"}
    assert all(b["api_key"] == BODY["api_key"] for b in bodies)
    assert all(b["headers"] == BODY["headers"] for b in bodies)

    turns = turns_of(run_dir)
    failed = [t for t in turns if t["error"]]
    assert failed and len(failed) < len(turns)
    assert all(f"Authorization: Basic {HIDDEN}" in t["error"] for t in failed)
    assert (
        {t["endpoint"] for t in turns if not t["error"]}
        == {redact(url)}
        == {url.replace(f"carol:{PASSWORD}", HIDDEN)}
    )
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["config"]["extra_body"] == {
        "api_key": HIDDEN,
        "my_secret": HIDDEN,
        "headers": {"Authorization": HIDDEN, "x-api-key": HIDDEN},
        "chat_template_kwargs": {"enable_thinking": False},  # what a replay reads is kept
    }
    assert manifest["team"][0]["extra_body"] == manifest["config"]["extra_body"]
    verdict = json.loads((run_dir / "judge.jsonl").read_text().splitlines()[0])
    assert verdict["setting"]["extra_body"]["api_key"] == HIDDEN

    files = [p for p in run_dir.rglob("*") if p.is_file()]
    names = {p.name for p in files}
    assert {".lock", "manifest.json", "questions.jsonl", "turns.jsonl", "judge.jsonl"} <= names
    assert "metrics.json" in names
    assert {p.name: p.stat().st_mode & 0o777 for p in files} == {
        p.name: umask_mode() for p in files
    }


@pytest.mark.slow
def test_a_folder_written_before_redaction_still_resumes_and_is_judged_again(tmp_path):
    """A manifest and verdicts that hold the secrets in clear (as older versions wrote them)
    are compared in their redacted form: the same command resumes them."""
    run_dir = tmp_path / "run"
    with StubServer() as server:
        settings = dict(model="openai:stub-model", base_url=[server.base_url], extra_body=BODY)
        settings |= dict(benchmark="arith", limit=2, agents=2, rounds=1, **FAST)
        mad_eval.run(out=run_dir, **settings)
        mad_eval.judge(run_dir, "openai:stub-model", base_url=[server.base_url], extra_body=BODY)
        manifest = json.loads((run_dir / "manifest.json").read_text())
        manifest["config"]["extra_body"] = BODY
        (run_dir / "manifest.json").write_text(json.dumps(manifest))
        verdicts = [json.loads(line) for line in (run_dir / "judge.jsonl").open()]
        for verdict in verdicts:
            verdict["setting"]["extra_body"] = BODY
        (run_dir / "judge.jsonl").write_text("".join(json.dumps(v) + "\n" for v in verdicts))
        asked = [body for body in server.requests if not probe(body)]
        # A rotated key is no other configuration: nothing is asked again.
        mad_eval.run(out=run_dir, **{**settings, "extra_body": {**BODY, "api_key": "rotated-1"}})
        mad_eval.judge(run_dir, "openai:stub-model", base_url=[server.base_url], extra_body=BODY)
        assert [body for body in server.requests if not probe(body)] == asked
    assert "body-secret-value-1" not in (run_dir / "metrics.json").read_text()


@pytest.mark.slow
def test_an_experiment_folder_keeps_its_file_without_its_secrets(tmp_path, monkeypatch):
    with StubServer() as server:
        url = with_login(server.base_url)
        path = tmp_path / "exp.toml"
        path.write_text(
            textwrap.dedent(f"""
            [experiment]
            out = "out"

            [settings]
            limit = 2
            rounds = 1
            retries = 0
            extra_body = {{ api_key = "body-secret-value-1", token = "custom-hidden-42" }}

            [models]
            m = {{ model = "openai:stub-model", base_url = "{url}" }}

            [grids.main]
            benchmarks = ["arith"]
            agents = [2]
            """)
        )
        monkeypatch.chdir(tmp_path)  # `out` is read relative to where the command runs
        mad_eval.experiment(path)
    saved = json.loads((tmp_path / "out" / "experiment.json").read_text())
    assert leaks(tmp_path / "out") == []
    assert f'base_url = "http://{HIDDEN}@127.0.0.1:' in saved["text"]
    assert f'api_key = "{HIDDEN}"' in saved["text"] and f'token = "{HIDDEN}"' in saved["text"]
    modes = {p.stat().st_mode & 0o777 for p in (tmp_path / "out").rglob("*") if p.is_file()}
    assert modes == {umask_mode()}


def run_command(url: str, cwd: Path):
    return command("run", "--model", "openai:stub-model", "--base-url", url,
                   "--extra-body", json.dumps(BODY), "--limit", "1", "--agents", "2",
                   "--rounds", "1", "--out", "r", "--retries", "0", cwd=cwd)  # fmt: skip


@pytest.mark.slow
def test_an_echoed_login_never_reaches_the_console_nor_the_command_line_recorded(tmp_path):
    """The server refuses the extra body's check, repeating the request's Authorization
    header and fields: the one-sentence error shows neither. A run that goes through keeps
    its command line in .lock and the manifest, the login and the extra body hidden."""
    with StubServer(fault=lambda body, attempt: "echo") as server:
        refused = run_command(with_login(server.base_url), tmp_path)
        sent = server.headers[-1]["Authorization"]
    assert refused.returncode == 2
    assert "refused the extra body" in refused.stderr
    assert f"Authorization: Basic {HIDDEN}" in refused.stderr
    assert sent == f"Basic {BASIC}"
    with StubServer() as server:
        done = run_command(with_login(server.base_url), tmp_path)
    assert done.returncode == 0, done.stderr
    shown = refused.stdout + refused.stderr + done.stdout + done.stderr
    assert [secret for secret in SECRETS if secret in shown] == []
    assert leaks(tmp_path) == []
    command_line = json.loads((tmp_path / "r" / "manifest.json").read_text())["command"]
    assert "--extra-body" in command_line and f"http://{HIDDEN}@127.0.0.1" in " ".join(command_line)
    assert "--extra-body" in (tmp_path / "r" / ".lock").read_text()


def test_a_password_with_a_slash_is_refused_in_one_sentence_without_it(tmp_path):
    result = command("run", "--model", "openai:m", "--base-url", "http://carol:pa/ss99@h:8/v1",
                     "--limit", "1", cwd=tmp_path)  # fmt: skip
    assert result.returncode == 2
    assert "cannot be read" in result.stderr and "%2F" in result.stderr
    assert "Traceback" not in result.stderr and "ss99" not in result.stderr


# --- the redaction, shape by shape ------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("http://carol:we@rd0011@127.0.0.1:8000/v1", "http://***@127.0.0.1:8000/v1"),
        ("http://carol:we%40rd0011@h:8000/v1", "http://***@h:8000/v1"),
        ("http://carol:pa/ss@h:8000/v1", "http://***@h:8000/v1"),
        ("http://u:p?w#x@h/v1", "http://***@h/v1"),
        ("no answer at https://u:p@h/v1 (refused)", "no answer at https://***@h/v1 (refused)"),
        ("http://a/v1,http://u:p@b/v1", "http://a/v1,http://***@b/v1"),  # the first host kept
        ("['http://u:p@a/v1', 'http://b/v1']", "['http://***@a/v1', 'http://b/v1']"),
        ("https://h/v1?api_key=abc&x=1&access_token=t", "https://h/v1?api_key=***&x=1&access_token=***"),
        ("Authorization: Basic Y2Fyb2w6d2VAcmQwMDEx", "Authorization: Basic ***"),
        ("authorization=bearer abc.def", "authorization=bearer ***"),
        ("echo: Basic Y2Fyb2w6d2VAcmQwMDEx.", "echo: Basic ***."),
        ("x-api-key: k1 and api-key=k2", "x-api-key: *** and api-key=***"),
        ('{"Authorization": "Bearer t", "top_k": 20}', '{"Authorization": "***", "top_k": 20}'),
        ("{'my_secret': 'v', 'max_tokens': 5}", "{'my_secret': '***', 'max_tokens': 5}"),
        ('api_key = "v"\n{ X-Auth-Token = "t" }', 'api_key = "***"\n{ X-Auth-Token = "***" }'),
        ("Proxy-Authorization: Digest u=1", "Proxy-Authorization: Digest ***"),
        ("sk-abcdefghijklmnop and hf_abcdefghijklmnop", "sk-*** and hf-***"),
    ],
)  # fmt: skip
def test_redaction_of_text(text, shown):
    assert redact(text) == shown
    assert redact(shown) == shown  # redacting again changes nothing


@pytest.mark.parametrize(
    "text",
    [
        "Basic arithmetic, basic YWJj",  # no base64 of user:password
        "max_tokens: 500, tokenizer: x, key: k, token ids, the bos_token",
        "http://localhost:8000/v1 and mail@example.com",
    ],
)
def test_text_without_credentials_is_left_alone(text):
    assert redact(text) == text


def test_redaction_of_structures():
    given = {
        "api_key": 12345,
        "apiKey": None,
        "x-api-key": ["a"],
        "client_secret": {"nested": "v"},
        "access_token": "t",
        "password": "p",
        "auth": ("u", "p"),
        "headers": {"Authorization": "Bearer t", "X-Goog-Api-Key": "k", "Accept": "json"},
        "default_headers": {"Cookie": "s=1", "User-Agent": "me"},
        "base_urls": ("http://u:p@h/v1",),
        "chat_template_kwargs": {"enable_thinking": False, "bos_token": "<s>"},
        "max_tokens": 5,
        "tokenizer": "t",
    }
    assert redact(given) == {
        "api_key": HIDDEN,
        "apiKey": HIDDEN,
        "x-api-key": HIDDEN,
        "client_secret": HIDDEN,
        "access_token": HIDDEN,
        "password": HIDDEN,
        "auth": HIDDEN,
        "headers": {"Authorization": HIDDEN, "X-Goog-Api-Key": HIDDEN, "Accept": "json"},
        "default_headers": {"Cookie": HIDDEN, "User-Agent": "me"},
        "base_urls": ["http://***@h/v1"],
        "chat_template_kwargs": {"enable_thinking": False, "bos_token": "<s>"},
        "max_tokens": 5,
        "tokenizer": "t",
    }
    assert redact(redact(given)) == redact(given)


def test_the_secrets_of_a_setting_are_found_and_hidden_wherever_echoed(monkeypatch):
    found = secrets_in(
        {
            "base_urls": ["http://carol:we%40rd0011@h/v1"],
            "extra_body": {"token": "custom-hidden-43", "pin": "123", "headers": {"X-Key": "k"}},
        }
    )
    assert found == {"we%40rd0011", "we@rd0011", BASIC, "custom-hidden-43"}  # short: not
    remember({"extra_body": {"license": {"token": "custom-hidden-44"}}})
    assert redact("field license: input custom-hidden-44") == f"field license: input {HIDDEN}"
    monkeypatch.setenv("MY_SERVICE_TOKEN", "env-secret-value-5")
    assert outward("refused env-secret-value-5\x1b[2J") == f"refused {HIDDEN}\ufffd[2J"


def test_a_default_run_folder_is_named_by_the_extra_body_as_recorded():
    """Its short hash is of the redacted body: a name that a secret changed would let a
    guess of the secret be checked against it."""
    one = RunConfig(extra_body={"api_key": "a-secret-1", "top_k": 20}).default_out()
    rotated = RunConfig(extra_body={"api_key": "b-secret-2", "top_k": 20}).default_out()
    other = RunConfig(extra_body={"api_key": "a-secret-1", "top_k": 40}).default_out()
    assert one == rotated != other
