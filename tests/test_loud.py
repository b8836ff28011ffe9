"""Loud where a result is suspect, quiet where it is not: alerts (metrics.json, the console,
a Python warning), default run folders that tell a sweep apart, and a library that speaks
to its caller (keywords, not options; short reprs; no stray lines on stderr)."""

from __future__ import annotations

import io
import json
import logging
import warnings
from pathlib import Path

import pytest
from cli_helpers import mad_eval as command
from stub_server import StubServer

import mad_eval
from mad_eval.errors import SuspiciousResult, UserError, for_keywords
from mad_eval.measure.alerts import Outcomes, alerts
from mad_eval.records import Turn
from mad_eval.reporting.results import _identifier
from mad_eval.settings.config import RecordedConfig, RunConfig, run_defaults

SMALL = {"limit": 3, "agents": 2, "rounds": 1}
BOXED = "Working it out, we get \\boxed{7}"  # what the stub's model writes
UNPARSED = (
    "6 of 6 final answers were unparsed: the replies do not write their answer as the "
    "answer-line answer protocol reads it (Answer: X) but as boxed reads it (\\boxed{X}); "
    "pass --answer-protocol boxed."
)


def turn(answer: str | None = "1", **fields: object) -> Turn:
    base = dict(
        run=0, question="q", round=1, agent=0, model="m", seed=0, temperature=1.0, top_p=1.0,
        max_tokens=64, messages_hash="h", sees=[0], text="a reply", answer=answer,
        correct=False, finish_reason="stop", prompt_tokens=1, completion_tokens=1, latency=0.0,
    )  # fmt: skip
    return Turn(**{**base, **fields})


def said(outcomes: list[Turn], rounds: int = 1, answer: str | None = None) -> list[str]:
    counted = Outcomes()
    for t in outcomes:
        counted.add(t)
    return alerts(counted, "math", answer, rounds)


# ---- when a run is suspect ----------------------------------------------------------------


def test_most_answers_unread_names_each_sizeable_cause_and_a_quarter_alone_is_said_too():
    fine = [turn() for _ in range(4)]
    unparsed = [turn(None, text="no answer here") for _ in range(3)]
    cut = [turn(None, finish_reason="length") for _ in range(3)]
    # 6 of 10 unread: both causes said, each with its count and its option.
    found = said(fine + unparsed + cut)
    assert len(found) == 2
    assert (
        found[0].startswith("3 of 10 final answers were unparsed")
        and "--answer-protocol" in found[0]
    )
    assert found[1] == (
        "3 of 10 final answers were cut off at the token limit (64 tokens) before they gave "
        "an answer; raise --max-tokens."
    )
    # 3 of 10 unparsed alone: more than a quarter, said; 2 of 10: not.
    assert len(said(fine * 2 + unparsed[:1] + unparsed)) == 1
    assert said([turn()] * 8 + unparsed[:2]) == []
    assert said([turn()] * 10) == [] and said([]) == []
    assert said([turn(), turn(None, text="?")], rounds=0) == [
        "1 of 2 answers was unparsed: the replies do not write their answer as the boxed answer "
        "protocol reads it (\\boxed{X}); pass --answer-protocol with the one the model writes "
        "(answer-line, dapo, math-verify, braces, dov-math, dov-math-fork, debate-answer)."
    ]


def test_failed_answers_say_whether_to_retry_or_to_make_room():
    sent = [turn(None, error="HTTP 500", attempts=3) for _ in range(3)]
    unsent = [turn(None, error="prompt too long", attempts=0) for _ in range(3)]
    assert said([*sent, turn()]) == [
        "3 of 4 final answers failed (each error is in turns.jsonl); once the server answers, "
        "ask them again with --retry-failed."
    ]
    assert "--max-model-len" in said([*unsent, turn()])[0]
    refused = said([turn(None, refusal="I cannot help with that.")] * 3, rounds=0)
    assert refused[0].startswith("3 of 3 answers were refusals")  # no debate: no "final"


def test_an_unparsed_alert_names_the_format_the_replies_do_write_else_the_choices():
    braces = [turn(None, text="so {final answer: 7}") for _ in range(3)]
    # Read as written: answer-line and boxed would find a "7}" after "answer:" too.
    assert said(braces, answer="answer-line")[0].endswith(
        "but as braces reads it ({final answer: X}); pass --answer-protocol braces."
    )
    assert said(braces)[0].endswith("pass --answer-protocol braces.")
    boxed = [turn(None, text="We get \\boxed{12}.") for _ in range(3)]
    assert said(boxed, answer="braces")[0].endswith("pass --answer-protocol boxed.")
    nothing = [turn(None, text="I am not sure.") for _ in range(3)]
    assert said(nothing)[0].endswith(
        "the model writes (answer-line, dapo, math-verify, braces, dov-math, dov-math-fork, "
        "debate-answer)."
    )


def served_run(tmp_path: Path, **settings: object) -> mad_eval.Run:
    with StubServer(reply=lambda body: BOXED) as server:
        return mad_eval.run(
            model="openai:stub-model",
            base_url=[server.base_url],
            benchmark="arith",
            out=tmp_path / "run",
            **SMALL,
            **settings,
        )


@pytest.mark.slow
def test_a_model_that_misses_the_answer_protocol_is_loud_everywhere(tmp_path):
    with pytest.warns(SuspiciousResult) as caught:
        run = served_run(tmp_path, answer_protocol="answer-line")
    assert run.maj == run.debate == 0.0  # what used to be all there was to see
    # The library's warning names its keyword and the folder, at the caller's line.
    (warning,) = caught
    assert str(warning.message) == f"{run.root}: " + UNPARSED.replace(
        "--answer-protocol boxed", "answer_protocol boxed"
    )
    assert warning.filename == __file__
    # metrics.json keeps the command line's sentence; report recomputes it exactly.
    written = json.loads((run.root / "metrics.json").read_text())
    assert written["alerts"] == run.alerts == [UNPARSED]
    with pytest.warns(SuspiciousResult):
        again = mad_eval.report(run.root)
    assert again.metrics == written
    # The command line says it under the table, with its option, and warns nothing else.
    with warnings.catch_warnings():
        warnings.simplefilter("error", SuspiciousResult)
        shown = command("report", str(run.root), cwd=tmp_path)
    assert shown.returncode == 0
    assert f"suspicious: {UNPARSED}" in shown.stdout
    assert "Records:" in shown.stdout.split("suspicious:")[1]  # under the result's tables


def test_replies_cut_off_at_the_token_limit_name_max_tokens(tmp_path):
    with pytest.warns(SuspiciousResult, match=r"raise max_tokens\.$"):
        run = mad_eval.run(
            model="sim:words=40,think=1", max_tokens=10, out=tmp_path / "cut", **SMALL
        )
    assert run.alerts == [
        "6 of 6 final answers were cut off at the token limit (10 tokens) before they gave an "
        "answer; raise --max-tokens."
    ]


def test_a_sound_run_says_nothing(tmp_path, capsys, recwarn):
    run = mad_eval.run(out=tmp_path / "fine", **SMALL)
    assert run.alerts == [] and run.metrics["alerts"] == []
    assert not [w for w in recwarn if issubclass(w.category, SuspiciousResult)]
    assert capsys.readouterr() == ("", "")


def test_a_metrics_json_from_before_alerts_still_loads_and_adding_them_changes_no_number(
    tmp_path,
):
    run = mad_eval.run(out=tmp_path / "old", **SMALL)
    path = run.root / "metrics.json"
    before = json.loads(path.read_text())
    path.write_text(json.dumps({k: v for k, v in before.items() if k != "alerts"}))
    from mad_eval.experiments.tables import _alerts

    assert _alerts(run.root) == [] and _alerts(tmp_path / "none") == []
    assert mad_eval.load_run(run.root).metrics == before  # recomputed from the records
    assert mad_eval.report(run.root).metrics == before
    # The key sits beside the counts; every other key is what it was.
    assert [k for k in before if k not in run.metrics] == []
    assert list(before).index("alerts") == list(before).index("prefix_share") + 1


def test_an_experiment_says_its_suspect_runs_in_its_own_keys(tmp_path):
    (tmp_path / "exp.toml").write_text(
        '[experiment]\nout = "out"\n\n[settings]\nlimit = 2\nrounds = 1\nmax_tokens = 10\n\n'
        '[models]\n"cut" = { model = "sim:words=40,think=1" }\n\n'
        '[grids.main]\nbenchmarks = ["arith"]\nagents = [2]\n'
    )
    sentence = (
        "arith-decentralized-n2-t1-cut: 4 of 4 final answers were cut off at the token limit "
        "(10 tokens) before they gave an answer; raise max_tokens."
    )
    done = command("experiment", "run", "exp.toml", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"suspicious: {sentence}" in done.stdout
    assert command("experiment", "tables", "exp.toml", cwd=tmp_path).returncode == 0
    summary = (tmp_path / "out" / "summary.md").read_text()
    assert f"\n- {sentence}\n" in summary


# ---- default run folders --------------------------------------------------------------------


def test_runs_differing_only_by_temperature_get_their_own_folders(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    default = mad_eval.run(**SMALL)
    warmer = mad_eval.run(temperature=0.7, **SMALL)
    # Today's name for default settings, so an old folder resumes with the same command.
    assert default.root == Path("results/arith-decentralized-n2-t1-sim-l3")
    assert warmer.root == Path("results/arith-decentralized-n2-t1-sim-l3-temperature0.7")
    assert warmer.config.temperature == 0.7 and default.config.temperature == 1.0
    # The same commands again resume their own folders (nothing refused, nothing new).
    assert mad_eval.run(**SMALL).metrics == default.metrics
    assert mad_eval.run(temperature=0.7, **SMALL).metrics == warmer.metrics
    # Given at their defaults (the benchmark's own max tokens too), settings name nothing.
    assert mad_eval.run(temperature=1.0, max_tokens=512, **SMALL).root == default.root
    assert sorted(p.name for p in Path("results").iterdir()) == [
        "arith-decentralized-n2-t1-sim-l3",
        "arith-decentralized-n2-t1-sim-l3-temperature0.7",
    ]


# A value other than its default for every recorded setting: a setting added to the
# configuration fails here until it has one, and so until its folder name tells it apart.
OTHER = {
    "protocol": "sparse",
    "agents": 3,
    "rounds": 2,
    "benchmark": "gsm8k",
    "limit": 10,
    "answer_protocol": "answer-line",
    "model": "openai:m",
    "runs": 2,
    "seed": 1,
    "temperature": 0.7,
    "top_p": 0.95,
    "max_tokens": 1024,
    "prompt_style": "reflection",
    "strip_think": True,
    "quote": "full",
    "extra_body": {"top_k": 20},
    "max_model_len": 4096,
    "tokenizer": "Qwen/Qwen3-8B",
    "api": "completions",
    "template": "raw",
    "dtype": "bfloat16",
}


# Recorded settings that change no answer, and so no folder name.
UNNAMED = {"tokenizer"}


def test_every_recorded_setting_that_changes_answers_changes_the_default_folder_name():
    from dataclasses import fields

    # A roster is named by its groups' models and counts (tests/test_roster.py).
    assert set(OTHER) == {f.name for f in fields(RecordedConfig)} - {"roster"}
    base = RunConfig(max_tokens=512).default_out(512)
    assert base == Path("results/arith-decentralized-n5-t3-sim")
    names = {base}
    for name, value in OTHER.items():
        folder = RunConfig(**{"max_tokens": 512, name: value}).default_out(512)
        if name in UNNAMED:
            assert folder == base, name
            continue
        assert folder not in names, name
        names.add(folder)
    # A sweep over two settings at once never meets one over either.
    pairs = {
        RunConfig(temperature=t, top_p=p).default_out() for t in (0.2, 0.7, 1.0) for p in (0.5, 0.9)
    }
    assert len(pairs) == 6
    assert RunConfig(temperature=0.2, top_p=0.5).default_out().name == (
        "arith-decentralized-n5-t3-sim-temperature0.2-top_p0.5"
    )


def test_many_settings_fall_back_to_a_stable_hash_and_never_spell_an_equals_sign():
    many = dict(temperature=0.3, top_p=0.5, max_tokens=64, answer_protocol="math-verify:a=1")
    one = RunConfig(**many, api="completions", template="raw").default_out().name
    other = RunConfig(**many, api="completions", template="bare").default_out().name
    # The answer protocol is spelled out beside a hash of the rest.
    assert one.startswith("arith-decentralized-n5-t3-sim-answer_protocol-math-verify_a_1-c")
    assert len(one.split("-c")[-1]) == 8
    assert one == RunConfig(**many, api="completions", template="raw").default_out().name
    assert one != other
    named = RunConfig(answer_protocol="math-verify:precision=2").default_out().name
    assert named.endswith("-answer_protocol-math-verify_precision_2") and "=" not in named
    # A tokenizer, a path, changes no answer: it is left out.
    tokenized = RunConfig(
        model="openai:smollm2",
        answer_protocol="dov-math",
        tokenizer="/home/someone/models/HuggingFaceTB/SmolLM2-135M-Instruct",
        temperature=0.0,
    )
    assert tokenized.default_out().name == (
        "arith-decentralized-n5-t3-openai_smollm2-answer_protocol-dov-math-temperature0.0"
    )


# ---- a library that speaks to its caller ----------------------------------------------------


def test_library_errors_name_keywords_and_the_command_line_names_options(tmp_path):
    with pytest.raises(UserError) as raised:
        mad_eval.run(agents=0, out=tmp_path / "x")
    assert str(raised.value) == "agents must be at least 1, got 0."
    shown = command("run", "--agents", "0", "--out", str(tmp_path / "x"), cwd=tmp_path)
    assert shown.returncode == 2 and "--agents must be at least 1, got 0." in shown.stderr


@pytest.mark.parametrize(
    ("text", "worded"),
    [
        ("pass --data-dir pointing at it.", "pass data_dir pointing at it."),
        ("pass --quote verbatim.", "pass quote verbatim."),
        ("--template raw needs --api completions: x.", "template raw needs api completions: x."),
        ("pass --model openai:NAME --base-url URL", "pass model openai:NAME base_url URL"),
        ("ask again with --retry-failed.", "ask again with retry_failed."),
        ("see mad-eval table --layout cost", "see mad-eval table --layout cost"),  # not run's
        ("args is ['--seed', '7'] there", "args is ['--seed', '7'] there"),  # values shown
    ],
)
def test_options_are_worded_as_the_calls_keywords(text, worded):
    keywords = {*run_defaults(), "retry_failed"}
    assert for_keywords(text, keywords) == worded


def test_every_long_option_is_its_keyword_with_dashes():
    """A keyword is its long option with underscores, so a library error names it by
    swapping the two (cli/options.py declares every option)."""
    from mad_eval.cli import options

    named = [
        (key, option.info)
        for table in vars(options).values()
        if isinstance(table, dict)
        and table
        and all(isinstance(o, options.Option) for o in table.values())
        for key, option in table.items()
    ]
    assert len(named) > 40
    for key, info in named:
        flags = [info.default, *(info.param_decls or ())]
        for flag in (f for f in flags if isinstance(f, str) and f.startswith("--")):
            if key in ("show_agent", "show_round"):
                continue  # `mad-eval templates` --agent and --round, which no call takes
            assert flag == "--" + key.replace("_", "-"), (flag, key)


@pytest.mark.slow
def test_the_library_writes_nothing_to_stderr_unless_logging_is_configured(tmp_path, monkeypatch):
    """A notebook has no logging configured: Python's last resort would print the default
    Listener's notes (an unknown tokenizer) to stderr."""
    last = io.StringIO()
    monkeypatch.setattr(logging, "lastResort", logging.StreamHandler(last))
    monkeypatch.setattr(logging.getLogger(), "handlers", [])  # pytest's own capture, off
    run = served_run(tmp_path)
    assert run.alerts == [] and last.getvalue() == ""


@pytest.mark.slow
def test_the_listeners_notes_still_reach_a_configured_log(tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="mad_eval"):
        served_run(tmp_path)
    assert any(
        "no tokenizer found for model 'openai:stub-model'" in r.message for r in caplog.records
    )


@pytest.mark.slow
def test_results_print_short_and_show_as_a_small_table(tmp_path):
    with pytest.warns(SuspiciousResult):
        run = served_run(tmp_path, answer_protocol="answer-line")
    text = repr(run)
    assert text == (
        "Run(benchmark='arith', protocol='decentralized', n=2, t=1, Maj=0.0, Debate=0.0, "
        f"delta=0.0, questions=3, alerts=1, folder={str(run.root)!r})"
    )
    assert str(run) == text and "array" not in text
    html = run._repr_html_()
    assert html.startswith("<table>") and "<th>Maj</th>" in html
    assert "pass answer_protocol boxed" in html and "<li>" in html  # keyword, not option
    single = mad_eval.single(samples=2, limit=2, out=tmp_path / "single")
    assert repr(single).startswith("Run(benchmark='arith', protocol='single', k=2, mean_at_K=")
    assert len(repr(mad_eval.load_runs([run.root, single.root]))) < 400
    every = [*run.headline(), *single.headline(), "Δ ROUGE-L", "ROUGE-L"]
    assert all(_identifier(name).isidentifier() for name in every)
