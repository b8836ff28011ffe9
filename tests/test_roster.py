"""Reading a team from --agent options and roster files, and resolving each agent."""

import pytest
from cli_helpers import mad_eval

from mad_eval.settings.config import ConfigError, RunConfig
from mad_eval.settings.roster import (
    Entry,
    RosterError,
    group_labels,
    load_roster_file,
    parse_agent_option,
)


@pytest.mark.parametrize(
    ("text", "entry"),
    [
        ("sim", Entry("sim")),
        ("sim:p0=0.3,s0=2*4", Entry("sim:p0=0.3,s0=2", 4)),
        (
            "openai:q3-sdrl@http://host-a:8000/v1*3",
            Entry("openai:q3-sdrl", 3, base_urls=("http://host-a:8000/v1",)),
        ),
        (
            "openai:Qwen/Qwen3-8B@https://h/v1",
            Entry("openai:Qwen/Qwen3-8B", base_urls=("https://h/v1",)),
        ),
    ],
)
def test_agent_options(text, entry):
    assert parse_agent_option(text) == entry


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("sim*0", "count must be at least 1"),
        ("sim*two", "cannot read --agent"),
        ("openai:m@host:8000/v1*2", "endpoint 'host:8000/v1' .* needs a scheme"),
        (" 5", "--agent ' 5' is no model.*; did you mean --agents 5\\?"),
    ],
)
def test_bad_agent_options(text, message):
    with pytest.raises(RosterError, match=message):
        parse_agent_option(text)


def test_roster_file(tmp_path):
    path = tmp_path / "team.toml"
    path.write_text(
        '[[agent]]\nmodel = "openai:a"\ncount = 2\ntemperature = 0.5\npersona = "Be brief."\n\n'
        '[[agent]]\nmodel = "openai:a"\nbase_url = "http://b/v1"\n'
    )
    entries = load_roster_file(path)
    assert entries == (
        Entry("openai:a", 2, temperature=0.5, persona="Be brief."),
        Entry("openai:a", base_urls=("http://b/v1",)),
    )
    assert group_labels(entries) == ["openai:a", "openai:a#2"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[[agent]]\nmodel = "sim"\ncolor = "red"\n', r"agent entry 1: unknown key\(s\) color"),
        ("[[agent]]\ncount = 2\n", "agent entry 1 has no 'model'"),
        ('[[agent]]\nmodel = "sim"\ncount = "3"\n', "count = '3' is not a whole number"),
        ('[[agent]]\nmodel = "sim"\ncount = true\n', "count = True is not a whole number"),
        ('[[agent]]\nmodel = "sim"\ntop_p = "high"\n', "top_p = 'high' is not a number"),
        ('[[agent]]\nmodel = "sim"\npersona = 3\n', "persona = 3 is not a string"),
        ('[[agent]]\nmodel = "sim"\nextra_body = 3\n', "extra_body = 3 is not a table"),
        ('[[agent]]\nmodel = "sim"\nbase_url = []\n', "is not a URL or a non-empty list of URLs"),
        ('[[agent]]\nmodel = "sim"\nbase_url = [1]\n', "is not a URL or a non-empty list of URLs"),
        ('[[agent]]\nmodel = "sim"\ntemperature = 3.0\n', r"temperature must lie in \[0, 2\]"),
        ('[[agent]]\nmodel = "sim"\nbase_url = "h:1/v1"\n', "needs a scheme"),
        ('model = "sim"\n', r"must hold only \[\[agent\]\] tables"),
        ("[[agent]\n", "is not valid TOML"),
    ],
)
def test_bad_roster_files_name_the_entry(tmp_path, text, message):
    path = tmp_path / "team.toml"
    path.write_text(text)
    with pytest.raises(RosterError, match=message):
        load_roster_file(path)


def test_team_resolves_each_agent_with_fallbacks():
    roster = (Entry("sim:p0=0.7", 2, name="strong", top_p=0.5), Entry("sim", 1, max_tokens=9))
    config = RunConfig(agents=3, roster=roster, temperature=0.7, top_p=0.9, max_tokens=100)
    config.validate()
    team = config.team()
    assert [(a.index, a.group, a.model) for a in team] == [
        (0, "strong", "sim:p0=0.7"),
        (1, "strong", "sim:p0=0.7"),
        (2, "sim", "sim"),
    ]
    assert [(a.temperature, a.top_p, a.max_tokens) for a in team] == [
        (0.7, 0.5, 100),
        (0.7, 0.5, 100),
        (0.7, 0.9, 9),
    ]
    with pytest.raises(ConfigError, match="the roster has 3 agents but --agents is 4"):
        RunConfig(agents=4, roster=roster).validate()


def test_endpoints_are_operational_but_models_are_identity():
    a = RunConfig(agents=1, roster=(Entry("openai:m", base_urls=("http://one/v1",)),))
    b = RunConfig(agents=1, roster=(Entry("openai:m", base_urls=("http://two/v1",)),))
    c = RunConfig(agents=1, roster=(Entry("openai:n", base_urls=("http://one/v1",)),))
    assert a.identity() == b.identity() != c.identity()
    assert a.default_out().name == "arith-decentralized-n1-t3-openai_mx1"


def test_an_option_mistyped_gets_a_hint(tmp_path):
    """`--agent 5` is a real option given a number of agents; `--agnts` no option at all."""
    result = mad_eval("run", "--agent", "5", "--benchmark", "arith", cwd=tmp_path)
    assert result.returncode == 2
    assert "did you mean --agents 5?" in result.stderr
    result = mad_eval("run", "--agnts", "5", cwd=tmp_path)
    assert result.returncode == 2
    assert "No such option: --agnts" in result.stderr and "--agents" in result.stderr
