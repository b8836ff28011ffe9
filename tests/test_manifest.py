"""The typed manifest: what a run writes is what every command reads back, and manifests
written before schema_version existed still read, with the defaults they always had."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_helpers import mad_eval, small_run

from mad_eval.store.folder import StoreError
from mad_eval.store.manifest import SCHEMA_VERSION, RunManifest

GOLDEN = Path(__file__).parent / "golden" / "tables"


def test_a_run_writes_the_manifest_it_reads_back(tmp_path):
    small_run(tmp_path, "--protocol", "centralized", agents="3")
    written = json.loads((tmp_path / "r" / "manifest.json").read_text())
    manifest = RunManifest.read(tmp_path / "r")
    assert written["schema_version"] == SCHEMA_VERSION == manifest.schema_version
    assert manifest.to_dict() == written  # reader and writer agree, field for field
    assert RunManifest.from_dict(manifest.to_dict(), Path("m.json")) == manifest
    assert manifest.protocol.hub == 0 and manifest.protocol.cls == "centralized"
    assert manifest.protocol.sees == ((0, 1, 2), (0, 1), (0, 2))
    assert [seat.agent for seat in manifest.team] == [0, 1, 2]
    assert manifest.benchmark.questions == ("arith-0", "arith-1", "arith-2")


def test_a_version_1_manifest_reads_with_the_defaults_it_always_had():
    manifest = RunManifest.read(GOLDEN / "alpha")  # written by hand, before schema_version
    assert manifest.schema_version == 1
    assert manifest.benchmark.kind == "math" and manifest.benchmark.answer is None
    assert manifest.benchmark.title == "Golden" and manifest.benchmark.orders == {}
    assert manifest.protocol.voters == (0, 1, 2) and manifest.protocol.hub is None
    assert manifest.protocol.score is None and manifest.protocol.sees is None
    assert manifest.prompt.style == "debate" and manifest.prompt.prompt_templates is None
    assert manifest.config.quote == "final" and manifest.config.strip_think is False
    assert manifest.team == () and manifest.seat(1).model == "openai:alpha"


def test_a_version_1_manifest_without_names_reads_them_from_its_config(tmp_path):
    data = json.loads((GOLDEN / "alpha" / "manifest.json").read_text())
    data["config"]["prompt_style"] = "reflection"
    del data["benchmark"]["name"], data["benchmark"]["title"], data["protocol"]["name"]
    manifest = RunManifest.from_dict(data, tmp_path / "manifest.json")
    assert manifest.benchmark.name == manifest.benchmark.title == "golden"
    assert manifest.protocol.name == "decentralized"
    assert manifest.prompt.style == "reflection"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda m: m.update(schema_version=SCHEMA_VERSION + 1),
            f"was written by a newer mad-eval (manifest schema {SCHEMA_VERSION + 1}; this one "
            f"reads up to {SCHEMA_VERSION}); upgrade mad-eval to read it.",
        ),
        (
            lambda m: m["protocol"].pop("voters"),
            'is not a mad-eval run manifest (its "protocol" names no "voters").',
        ),
        (lambda m: m.pop("config"), "is not a mad-eval run manifest."),
        (
            lambda m: m.update(team=[{"agent": 0}]),
            'is not a mad-eval run manifest (a seat of its "team" names no "group").',
        ),
    ],
)
def test_a_manifest_that_cannot_be_read_is_named_in_one_sentence(tmp_path, change, message):
    data = json.loads((GOLDEN / "alpha" / "manifest.json").read_text())
    change(data)
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps(data))
    with pytest.raises(StoreError) as caught:
        RunManifest.read(tmp_path)
    assert str(caught.value) == f"{path} {message}"
    result = mad_eval("report", str(tmp_path), cwd=tmp_path)
    assert result.returncode == 2 and result.stderr.strip() == f"error: {path} {message}"


@pytest.mark.parametrize(
    ("key", "value", "wanted"),
    [
        ("agents", "5", "int"),
        ("temperature", "hot", "float"),
        ("strip_think", 0, "bool"),
        ("extra_body", [1], "dict"),
        ("roster", "team", "a list of Entry tables"),
        ("roster", [{"count": 2}], "a list of Entry tables"),  # no model
        ("roster", [{"model": "sim", "colour": "red"}], "a list of Entry tables"),
    ],
)
def test_a_config_value_of_the_wrong_type_is_named_in_one_sentence(tmp_path, key, value, wanted):
    data = json.loads((GOLDEN / "alpha" / "manifest.json").read_text())
    data["config"][key] = value
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps(data))
    with pytest.raises(StoreError) as caught:
        RunManifest.read(tmp_path)
    shown = repr(value)
    assert str(caught.value) == (
        f'{path} is not a mad-eval run manifest ("config" "{key}" is {shown}, not {wanted}).'
    )


def test_config_keys_of_another_version_are_kept_and_a_resume_ignores_them(tmp_path):
    import mad_eval

    out = tmp_path / "r"
    mad_eval.run(agents=2, rounds=1, limit=2, out=out)
    data = json.loads((out / "manifest.json").read_text())
    data["config"]["from_a_later_version"] = {"x": 1}
    (out / "manifest.json").write_text(json.dumps(data))
    manifest = RunManifest.read(out)
    assert manifest.unknown_config == {"from_a_later_version": {"x": 1}}
    assert manifest.to_dict()["config"] == data["config"]  # in their order, ours first
    assert manifest.config.agents == 2 and manifest.config.roster == ()
    mad_eval.run(agents=2, rounds=1, limit=2, out=out)  # resumed: nothing to ask again
    assert json.loads((out / "manifest.json").read_text()) == data
