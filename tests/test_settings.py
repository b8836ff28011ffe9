"""A run's keyword settings: typed (RunSettings) and kept equal to RunConfig's fields, checked
by their type hints, and one list of operational settings that a resume ignores."""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

import mad_eval
from mad_eval.setup.config import (
    OPERATIONAL,
    REQUESTS,
    ConfigError,
    RecordedConfig,
    RunConfig,
    project_folder,
    run_defaults,
)
from mad_eval.setup.settings import RequestSettings, RunSettings, SingleSettings
from mad_eval.store.files import StoreError

SMALL = {"agents": 2, "rounds": 1, "limit": 2}


def parts(hint: Any) -> set[Any]:
    """A type as the set of what it accepts, a tuple of X counted as a sequence of X."""
    union = typing.get_origin(hint) in (types.UnionType, typing.Union)
    found = set()
    for part in typing.get_args(hint) if union else (hint,):
        if typing.get_origin(part) is tuple:
            part = Sequence[typing.get_args(part)[0]]
        found.add(part)
    return found


def test_run_settings_are_run_configs_fields_as_a_caller_gives_them():
    settings = typing.get_type_hints(RunSettings)
    config = typing.get_type_hints(RunConfig)
    assert set(settings) == set(config) | {"agent", "data_dir"} == set(run_defaults())
    for name, hint in config.items():
        if name == "roster":  # a roster file here; RunConfig holds its entries
            assert parts(settings[name]) == {str, Path, type(None)}
            continue
        given, held = parts(settings[name]), parts(hint)
        assert held <= given, name  # whatever the run holds, a caller may give
        # ... and more only as None (resolved later), a Path, or an extra body's JSON text
        assert given - held <= {type(None), Path, str}, name
    single = typing.get_type_hints(SingleSettings)
    assert set(settings) - set(single) == {"protocol", "agents", "rounds"}
    assert tuple(typing.get_type_hints(RequestSettings)) == REQUESTS


def test_the_operational_settings_are_one_list_that_the_manifest_keeps_apart(tmp_path):
    from mad_eval.cli.options import OPERATIONAL as JUDGE_OPTIONS
    from mad_eval.experiments.parse import SHARED

    recorded = {f.name for f in dataclasses.fields(RecordedConfig)}
    assert set(OPERATIONAL) == set(typing.get_type_hints(RunConfig)) - recorded
    assert set(REQUESTS) < set(OPERATIONAL) and set(SHARED) < set(OPERATIONAL)
    assert set(JUDGE_OPTIONS) < set(REQUESTS)
    mad_eval.run(**SMALL, concurrency=3, out=tmp_path / "r")
    manifest = json.loads((tmp_path / "r" / "manifest.json").read_text())
    assert not set(OPERATIONAL) & set(manifest["config"])
    assert set(OPERATIONAL) <= set(manifest["operational"])
    assert manifest["operational"]["concurrency"] == 3


def test_a_resume_ignores_every_operational_setting_but_not_a_recorded_one(tmp_path):
    out = tmp_path / "r"
    first = mad_eval.run(**SMALL, out=out)
    changed = {
        "concurrency": 2,
        "timeout": 5.0,
        "retries": 0,
        "backoff": 0.5,
        "cache": tmp_path / "cache.sqlite",
        "tensor_parallel_size": 2,
        "gpu_memory_utilization": 0.5,
        "enforce_eager": True,
    }
    assert set(changed) == set(OPERATIONAL) - {"base_urls"}  # sim agents take no endpoint
    assert mad_eval.run(**SMALL, **changed, out=out).maj == first.maj
    with pytest.raises(StoreError, match=r"different configuration \(seed is 0 there, 1 here\)"):
        mad_eval.run(**SMALL, seed=1, out=out)


@pytest.mark.parametrize(
    ("name", "value", "wanted"),
    [
        ("agents", "five", "int"),
        ("agents", True, "int"),
        ("temperature", None, "float"),
        ("seed", 1.5, "int"),
        ("base_urls", [1], "a list of str"),
        ("base_urls", "http://a/v1", "a list of str"),
        ("extra_body", 5, "dict or str"),
        ("enforce_eager", 1, "bool"),
        ("cache", 3, "str or Path"),
    ],
)
def test_a_setting_of_the_wrong_type_is_one_sentence_naming_it(tmp_path, name, value, wanted):
    with pytest.raises(ConfigError) as caught:
        mad_eval.run(**{**SMALL, name: value}, out=tmp_path / "x")  # type: ignore[arg-type]
    assert str(caught.value) == f"a run: '{name}' must be {wanted}, got {value!r}."
    assert not (tmp_path / "x").exists()


def test_a_file_setting_may_be_a_path_and_is_recorded_as_text(tmp_path):
    template = project_folder("templates") / "debate.toml"
    mad_eval.run(**SMALL, prompt_style=template, cache=tmp_path / "c.sqlite", out=tmp_path / "r")
    manifest = json.loads((tmp_path / "r" / "manifest.json").read_text())
    assert manifest["config"]["prompt_style"] == str(template)
    assert manifest["operational"]["cache"] == str(tmp_path / "c.sqlite")


def test_the_judge_takes_only_how_requests_travel(tmp_path):
    mad_eval.run(**SMALL, out=tmp_path / "r")
    with pytest.raises(ConfigError, match=r"'seed_x' is not a setting of the judge"):
        mad_eval.judge(tmp_path / "r", "sim-judge", seed_x=1)  # type: ignore[call-arg]
    with pytest.raises(ConfigError, match=r"^the judge: 'timeout' must be float, got 'x'\.$"):
        mad_eval.judge(tmp_path / "r", "sim-judge", timeout="x")  # type: ignore[arg-type]
    assert not (tmp_path / "r" / "judge.jsonl").exists()
