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
from mad_eval.errors import UserError
from mad_eval.settings.config import (
    OPERATIONAL,
    REQUESTS,
    ConfigError,
    RecordedConfig,
    RunConfig,
    project_folder,
    run_defaults,
    setting_name,
)
from mad_eval.settings.keywords import RequestSettings, RunSettings, SingleSettings
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
    named = {setting_name(field) for field in config}
    assert set(settings) == named | {"agent", "data_dir"} == set(run_defaults())
    for name, hint in config.items():
        if name == "roster":  # a roster file here; RunConfig holds its entries
            assert parts(settings[name]) == {str, Path, type(None)}
            continue
        given, held = parts(settings[setting_name(name)]), parts(hint)
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
    # REQUESTS by setting name (base_url), OPERATIONAL by field name (base_urls).
    assert set(REQUESTS) < {setting_name(name) for name in OPERATIONAL}
    assert set(SHARED) < set(OPERATIONAL)
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
        ("base_url", [1], "str or a list of str"),
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
    mad_eval.run(**SMALL, prompt_template=template, cache=tmp_path / "c.sqlite", out=tmp_path / "r")
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


def test_every_setting_is_named_as_its_long_option_and_recorded_as_before(tmp_path):
    """A keyword is the long option with underscores; RunConfig's field (manifest.json's key)
    keeps the name runs have always been recorded under, so old folders still resume."""
    assert {"prompt_template", "base_url"} <= set(run_defaults())
    assert not {"prompt_style", "base_urls"} & set(run_defaults())
    mad_eval.run(**SMALL, prompt_template="critique", out=tmp_path / "r")
    manifest = json.loads((tmp_path / "r" / "manifest.json").read_text())
    assert manifest["config"]["prompt_style"] == "critique"


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: mad_eval.run(prompt_style="critique"), "'prompt_style' is now 'prompt_template'"),
        (lambda: mad_eval.run(base_urls=["http://a/v1"]), "'base_urls' is now 'base_url'"),
        (lambda: mad_eval.single(prompt_style="x"), "'prompt_style' is now 'prompt_template'"),
        (lambda: mad_eval.table(["r"], labels={}), "'labels' is now 'label'"),
        (lambda: mad_eval.plot(["r"], labels={}), "'labels' is now 'label'"),
        (lambda: mad_eval.load_runs(["r"], labels={}), "'labels' is now 'label'"),
        (lambda: mad_eval.judge("r", "sim-judge", base_urls=[]), "'base_urls' is now 'base_url'"),
    ],
)
def test_an_old_keyword_is_refused_with_its_new_name(call, message):
    with pytest.raises(UserError, match=f"^{message}: give it by its new name.$"):
        call()


def test_a_misspelled_keyword_names_the_one_meant(tmp_path):
    with pytest.raises(ConfigError, match=r"^a run: 'agent' must be a list of str, got 3 "
                       r"\(did you mean 'agents'\?\)\.$"):  # fmt: skip
        mad_eval.run(agent=3, out=tmp_path / "x")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^table\(\) takes no 'lable' \(did you mean 'label'\?\)"):
        mad_eval.table(["r"], lable={})  # type: ignore[call-arg]
    with pytest.raises(ConfigError, match=r"'temprature' is not a setting of a run "
                       r"\(did you mean 'temperature'\?\)"):  # fmt: skip
        mad_eval.run(temprature=0.5, out=tmp_path / "x")
    assert not (tmp_path / "x").exists()


def test_one_base_url_may_be_given_as_text(tmp_path):
    preview = mad_eval.run_plan(model="openai:m", base_url="http://one:8000/v1", out=tmp_path / "r")
    assert list(preview.endpoints) == ["http://one:8000/v1"]


def test_a_bare_path_where_run_folders_are_meant_is_one_folder(tmp_path):
    mad_eval.run(**SMALL, out=tmp_path / "r")
    runs = mad_eval.load_runs(str(tmp_path / "r"))
    assert [run.root for run in runs] == [tmp_path / "r"]
    assert mad_eval.load_runs(tmp_path / "r")[0].maj == runs[0].maj


def test_an_old_key_in_a_preset_or_an_experiment_file_is_refused_with_its_new_name(
    tmp_path, monkeypatch
):
    from mad_eval.experiments import load_experiment
    from mad_eval.protocols import resolve

    (tmp_path / "protocols").mkdir()
    (tmp_path / "protocols" / "mine.toml").write_text(
        'class = "decentralized"\nprompt_style = "critique"\n'
    )
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UserError, match="prompt_style is now prompt_template; rename the key"):
        resolve("mine")
    (tmp_path / "exp.toml").write_text(
        '[settings]\nprompt_style = "critique"\n[models]\na = "sim"\n[grids.main]\n'
    )
    with pytest.raises(UserError, match="'prompt_style' is now 'prompt_template'"):
        load_experiment(tmp_path / "exp.toml")
