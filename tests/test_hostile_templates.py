"""Hostile prompt templates: a template file, a working directory's templates/ and the
template text a shared run folder's manifest carries are data. Nothing in them runs (each
payload would write a marker file), hangs or fills memory; each is refused in one sentence
naming the file and the key, before any request."""

from __future__ import annotations

import hashlib
import json
import shutil
import tomllib
from pathlib import Path

import pytest
from cli_helpers import mad_eval
from prompt_helpers import debate_messages

import mad_eval as api
from mad_eval.debate.plan import make_plan
from mad_eval.errors import UserError
from mad_eval.settings import sandbox
from mad_eval.settings.templates import TemplateError, load_template, sample_prompt

# Each payload would write MARK (or hang, or build a gigabyte string) in a plain Jinja
# environment; {mark} is the marker file's path.
RUNS_CODE = {
    "cycler": "{{{{ cycler.__init__.__globals__.os.popen('touch {mark}').read() }}}}",
    "lipsum": "{{{{ lipsum.__globals__['os'].popen('touch {mark}').read() }}}}",
    "joiner": "{{{{ joiner.__init__.__globals__.os.popen('touch {mark}').read() }}}}",
    "namespace": "{{{{ namespace.__init__.__globals__.os.popen('touch {mark}').read() }}}}",
    "self": "{{{{ self._TemplateReference__context.cycler.__init__.__globals__.os"
    ".popen('touch {mark}').read() }}}}",
    "subclasses": "{{% for c in ''.__class__.__mro__[1].__subclasses__() %}}"
    "{{% if c.__name__ == 'Popen' %}}{{{{ c(['touch', '{mark}']) }}}}{{% endif %}}"
    "{{% endfor %}}",
    "values": "{{{{ values.__class__.__mro__[1].__subclasses__() }}}}",
    "attr": "{{{{ (question|attr('__class__')).__mro__ }}}}",
    "format": "{{{{ '{{0.__class__.__mro__}}'.format(question) }}}}",
    "range": "{{{{ range.__class__.__base__.__subclasses__() }}}}",
}
BOUNDED = {
    "huge range": "{% for x in range(10**9) %}x{% endfor %}",
    "repeated question": "{{ question * 100000000 }}",
    "nested loops": "{% for a in range(10000) %}{% for b in range(10000) %}x{% endfor %}"
    "{% endfor %}",
    "silent nested loops": "{% for a in range(10000) %}{% for b in range(10000) %}{% endfor %}"
    "{% endfor %}",
    "doubling": "{% set s = question * 1000 %}" + "{% set s = s ~ s %}" * 40 + "{{ s }}",
    "block doubling": "{% set s = question * 1000 %}{% set t %}{% for i in range(10000) %}"
    "{{ s }}{% endfor %}{% endset %}{{ t }}",
    "exponential macro": "{% macro f(n) %}{% if n %}{{ f(n - 1) }}{{ f(n - 1) }}{% endif %}"
    "{% endmacro %}{{ f(60) }}",
    "wide format": "{{ '{:>999999999}'.format(question) }}",
    "wide center": "{{ question|center(1000000000) }}",
    "huge power": "{{ 2 ** 100000000 }}",
    "replace blowup": "{{ (question * 1000).replace('', question * 1000) }}",
    "recursive loop": "{% for x in [[1]] recursive %}{{ loop(x) }}{% endfor %}",
}
PAYLOADS = {**RUNS_CODE, **BOUNDED}


def template_text(payload: str, where: str = "round0") -> str:
    """A template whose `where` user message holds `payload`, otherwise ordinary."""
    messages = {"round0": "{{ question }} {{ answer_format }}", "debate": "{{ question }}"}
    messages[where] = f"{{{{ question }}}} {payload}"
    return "".join(
        f'[[{section}]]\nrole = "user"\ncontent = {json.dumps(content)}\n'
        for section, content in messages.items()
    )


def hostile(tmp_path: Path, name: str, where: str = "round0") -> tuple[Path, Path]:
    """(the template file holding payload `name`, the marker it would write)."""
    mark = tmp_path / "MARK"
    payload = PAYLOADS[name].format(mark=mark) if name in RUNS_CODE else PAYLOADS[name]
    path = tmp_path / "theirs.toml"
    path.write_text(template_text(payload, where))
    return path, mark


def one_sentence(message: str) -> None:
    assert "\n" not in message and "Traceback" not in message and len(message) < 700, message


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(PAYLOADS))
@pytest.mark.parametrize("where", ["round0", "debate"])
def test_a_hostile_template_is_refused_in_one_sentence_naming_file_and_key(tmp_path, name, where):
    path, mark = hostile(tmp_path, name, where)
    with pytest.raises(TemplateError) as info:
        load_template(str(path))
    message = str(info.value)
    one_sentence(message)
    assert message.startswith(f"{path}: {where}[0]"), message
    assert not mark.exists()


def test_each_bound_names_what_it_stopped(tmp_path):
    expected = {
        "huge range": "range() of more than 10,000 numbers",
        "repeated question": "would make a text of over",
        "nested loops": f"more than {sandbox.MAX_STEPS:,} steps",
        "silent nested loops": f"more than {sandbox.MAX_STEPS:,} steps",
        "doubling": "characters, this message's bound",
        "block doubling": "writes more than",
        "huge power": "a number of more than 4096 bits",
        "recursive loop": "recursive loops are not supported",
        "cycler": "unknown variable 'cycler'",
        "subclasses": "access to attribute '__class__' of 'str' object is unsafe",
    }
    for name, words in expected.items():
        path, _ = hostile(tmp_path, name)
        with pytest.raises(TemplateError, match=words.replace("(", r"\(").replace(")", r"\)")):
            load_template(str(path))


def test_a_template_that_misbehaves_only_on_real_data_stops_the_run_in_one_sentence(tmp_path):
    """The load-time check renders sample data; a payload hidden behind the real questions
    (arith's say "Evaluate") is caught where it renders, before its request is sent."""
    mark = tmp_path / "MARK"
    payload = "{% if 'Evaluate' in question %}{{ ''.__class__.__mro__ }}{% endif %}"
    path = tmp_path / "theirs.toml"
    path.write_text(template_text(payload))
    load_template(str(path))  # the sample question does not trigger it
    with pytest.raises(TemplateError, match=r"theirs\.toml: round0\[0\]\.content: access to"):
        api.run(agents=2, rounds=1, limit=1, prompt_template=str(path), out=tmp_path / "r")
    assert not mark.exists()
    assert not (tmp_path / "r" / "turns.jsonl").exists() or not any(
        json.loads(line).get("text") for line in (tmp_path / "r" / "turns.jsonl").open()
    )


@pytest.mark.parametrize("name", ["cycler", "subclasses", "self", "repeated question"])
def test_run_with_a_hostile_template_file_is_refused_before_any_turn(tmp_path, name):
    path, mark = hostile(tmp_path, name, "debate")
    with pytest.raises(TemplateError) as info:
        api.run(agents=2, rounds=1, limit=1, prompt_template=str(path), out=tmp_path / "r")
    one_sentence(str(info.value))
    assert not mark.exists() and not (tmp_path / "r" / "turns.jsonl").exists()


def test_the_reproduced_commands_return_at_once_with_one_sentence(tmp_path):
    """`mad-eval run --prompt-template` with the payloads that hung or died with a
    MemoryError, as a process: a generous timeout is the hang detector."""
    for name in ("huge range", "repeated question", "nested loops", "cycler"):
        path, mark = hostile(tmp_path, name)
        result = mad_eval(
            "run", "--agents", "2", "--rounds", "1", "--limit", "1",
            "--prompt-template", str(path), "--out", "r", cwd=tmp_path,
        )  # fmt: skip
        assert result.returncode == 2, result.stderr
        assert "Traceback" not in result.stderr and "theirs.toml: round0[0]" in result.stderr
        assert not mark.exists()


# --- the working directory's templates/ and protocols/ --------------------------------


def test_templates_listing_renders_nothing_unsafe_and_says_what_a_name_does_not_reach(
    tmp_path,
):
    (tmp_path / "templates").mkdir()
    mark = tmp_path / "MARK"
    payload = PAYLOADS["self"].format(mark=mark)  # compiles; runs code if rendered unsandboxed
    (tmp_path / "templates" / "debate.toml").write_text(template_text(payload))
    (tmp_path / "templates" / "evil.toml").write_text(template_text(payload, "debate"))
    listed = mad_eval("templates", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert not mark.exists()
    out = " ".join(listed.stdout.split())
    assert "│ evil │ unusable: " in out
    assert "templates/debate.toml: not used by the name debate, which is built in" in out
    assert "weigh the other responses" in out  # the built-in debate's description
    shown = mad_eval("templates", "templates/debate.toml", cwd=tmp_path)
    assert shown.returncode == 2, shown.stderr
    assert "round0[0].content: access to attribute '_TemplateReference__context'" in shown.stderr
    assert not mark.exists()
    (tmp_path / "protocols").mkdir()
    (tmp_path / "protocols" / "decentralized.toml").write_text('class = "evil_mod:Evil"\n')
    presets = mad_eval("protocols", cwd=tmp_path)
    assert presets.returncode == 0, presets.stderr
    assert (
        "protocols/decentralized.toml: not used by the name decentralized, which is built "
        "in; rename the file to use it." in " ".join(presets.stdout.split())
    )


def test_a_plain_run_in_a_cloned_repository_uses_the_built_in_template_and_protocol(
    tmp_path, monkeypatch
):
    """./templates/debate.toml and ./protocols/decentralized.toml (whose class imports a
    module of the repository) stand in for no default: only a path names them."""
    mark = tmp_path / "MARK"
    (tmp_path / "templates").mkdir()
    (tmp_path / "protocols").mkdir()
    (tmp_path / "templates" / "debate.toml").write_text(
        template_text(PAYLOADS["self"].format(mark=mark))
    )
    (tmp_path / "protocols" / "decentralized.toml").write_text('class = "evil_mod:Evil"\n')
    (tmp_path / "evil_mod.py").write_text(f"open({str(mark)!r}, 'w').close()\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))  # so an import of evil_mod would succeed
    run = api.run(agents=2, rounds=1, limit=1, out="r")
    assert not mark.exists()
    manifest = json.loads((tmp_path / "r" / "manifest.json").read_text())
    recorded = manifest["prompt"]["prompt_templates"]["debate"]
    ours = Path(api.__file__).resolve().parents[1] / "templates" / "debate.toml"
    assert recorded["text"] == ours.read_text()
    assert Path(manifest["protocol"]["source"]).resolve() != tmp_path / "protocols"
    assert manifest["protocol"]["class"] == "decentralized"
    assert run.maj is not None
    # ... and the run says which of the directory's files it left out.
    warned = " ".join(make_plan({"agents": 2, "rounds": 1, "limit": 1}).warnings)
    assert "templates/debate.toml is not used: 'debate' is a built-in template" in warned
    assert "protocols/decentralized.toml is not used: 'decentralized' is a built-in" in warned
    # A new name there is still found by name; the shadowing file by its path.
    shutil.copy(ours, tmp_path / "templates" / "mine.toml")
    assert load_template("mine").path == (tmp_path / "templates" / "mine.toml").resolve()
    with pytest.raises(TemplateError, match="access to attribute '_TemplateReference__context'"):
        load_template("templates/debate.toml")
    assert not mark.exists()


# --- run folders whose manifest.json carries a payload ----------------------------------


@pytest.fixture(scope="module")
def sim_run(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("sim") / "r"
    api.run(agents=2, rounds=1, limit=2, out=root)
    return root


def tampered(sim_run: Path, tmp_path: Path, name: str, hash_ok: bool) -> tuple[Path, Path]:
    """A copy of the sim run whose manifest.json records `name`'s payload as its debate
    template (in the debate round's message), with its table and, if `hash_ok`, its hash
    to match; and the marker it would write."""
    root = tmp_path / "shared"
    shutil.copytree(sim_run, root)
    mark = tmp_path / "MARK"
    payload = PAYLOADS[name].format(mark=mark) if name in RUNS_CODE else PAYLOADS[name]
    text = template_text(payload, "debate")
    path = root / "manifest.json"
    manifest = json.loads(path.read_text())
    recorded = manifest["prompt"]["prompt_templates"]["debate"]
    recorded["text"], recorded["data"] = text, tomllib.loads(text)
    if hash_ok:
        recorded["sha256"] = hashlib.sha256(text.encode()).hexdigest()
    path.write_text(json.dumps(manifest))
    return root, mark


def site_text(out: Path) -> str:
    """The site's own text: its pages and data, less the KaTeX it ships (fonts are binary)."""
    return " ".join(p.read_text() for p in out.rglob("*") if p.is_file() and "katex" not in p.parts)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(PAYLOADS))
def test_view_of_a_folder_whose_manifest_carries_a_payload_runs_nothing(sim_run, tmp_path, name):
    root, mark = tampered(sim_run, tmp_path, name, hash_ok=True)
    index = api.view([root], out=tmp_path / "site")
    assert index.is_file() and not mark.exists()
    assert "The prompt cannot be rebuilt exactly: its prompt template cannot be loaded" in (
        site_text(tmp_path / "site")
    )


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(PAYLOADS))
def test_judge_of_a_folder_whose_manifest_carries_a_payload_refuses(sim_run, tmp_path, name):
    root, mark = tampered(sim_run, tmp_path, name, hash_ok=True)
    with pytest.raises(TemplateError) as info:
        api.judge(root, "sim-judge")
    one_sentence(str(info.value))
    assert "debate[0]" in str(info.value)
    assert not mark.exists() and not (root / "judge.jsonl").exists()


def test_a_manifest_template_that_does_not_match_its_hash_is_reported_not_rendered(
    sim_run, tmp_path
):
    root, mark = tampered(sim_run, tmp_path, "cycler", hash_ok=False)
    words = "manifest.json's prompt template 'debate' does not match its recorded hash"
    with pytest.raises(TemplateError, match=words) as info:
        api.judge(root, "sim-judge")
    one_sentence(str(info.value))
    api.view([root], out=tmp_path / "site")
    assert words.replace("'", "\\u0027") in site_text(tmp_path / "site") or words in site_text(
        tmp_path / "site"
    )
    with pytest.raises(UserError, match=words + r".*or pass another out"):  # resume
        api.run(agents=2, rounds=1, limit=2, out=root)
    assert not mark.exists()


def test_a_manifest_template_whose_table_is_not_its_text_is_refused(sim_run, tmp_path):
    """The hash covers the text; a payload put in the recorded table alone is refused."""
    root = tmp_path / "shared"
    shutil.copytree(sim_run, root)
    path = root / "manifest.json"
    manifest = json.loads(path.read_text())
    recorded = manifest["prompt"]["prompt_templates"]["debate"]
    recorded["data"]["debate"][-1]["content"] = "{{ ''.__class__ }}"
    path.write_text(json.dumps(manifest))
    with pytest.raises(TemplateError, match="holds a table that is not the one its text gives"):
        api.judge(root, "sim-judge")


def test_resuming_a_folder_whose_manifest_carries_a_payload_is_refused(sim_run, tmp_path):
    root, mark = tampered(sim_run, tmp_path, "cycler", hash_ok=True)
    with pytest.raises(UserError, match=r"different configuration.*prompt template debate"):
        api.run(agents=2, rounds=1, limit=2, out=root)
    assert not mark.exists()


def test_an_untouched_run_folder_still_replays_and_judges(sim_run, tmp_path):
    root = tmp_path / "shared"
    shutil.copytree(sim_run, root)
    run = api.judge(root, "sim-judge")
    assert len((root / "judge.jsonl").read_text().splitlines()) == 2 * 2
    assert run.maj is not None


def test_train_pairs_of_a_folder_whose_manifest_carries_a_payload_runs_nothing(sim_run, tmp_path):
    bigger = tmp_path / "bigger"
    api.run(agents=4, rounds=1, limit=20, out=bigger)  # enough disagreement to pair
    root, mark = tampered(bigger, tmp_path, "self", hash_ok=True)
    summary = api.train_pairs(root, tmp_path / "p.jsonl")
    assert (summary.rollouts, summary.prompts) == (80, 20)
    assert not mark.exists()


# --- the bounds leave ordinary templates alone -----------------------------------------


def test_long_quoted_responses_render_whole_the_size_bound_grows_with_the_data():
    """Three 1.5-million-character replies (past the fixed million) are quoted whole: the
    bound is a million characters more than 8 times what the template is given."""
    texts = [f"{'step ' * 300_000}\\boxed{{{i}}}" for i in range(3)]
    content = debate_messages("What is 1+1?", texts, agent=1)[-1]["content"]
    assert all(f'<response from="agent {i}">\n{texts[i]}\n</response>' in content for i in range(3))


def test_a_loop_up_to_the_range_bound_renders(tmp_path):
    path = tmp_path / "mine.toml"
    loop = "{% for i in range(10000) %}{% if i == 9999 %}last {{ i }}{% endif %}{% endfor %}"
    path.write_text(template_text(loop))
    template = load_template(str(path))
    assert "last 9999" in sample_prompt(template, 0, 0)[-1]["content"]


# --- experiment files that name a template ----------------------------------------------


@pytest.mark.parametrize("name", ["cycler", "huge range", "repeated question"])
def test_an_experiment_naming_a_hostile_template_is_refused_by_its_dry_run(tmp_path, name):
    """`experiment run --dry-run` plans every cell, template check included, so a shared
    experiment file that names a payload template runs nothing and asks nothing."""
    from mad_eval.experiments import load_experiment
    from mad_eval.experiments.run import dry_run

    path, mark = hostile(tmp_path, name, "debate")
    experiment = tmp_path / "shared.toml"
    experiment.write_text(
        '[models]\nbase = "sim"\n\n[grids.main]\nbenchmarks = ["arith"]\nagents = [2]\n'
        f'rounds = [1]\nprompt_templates = ["{path.name}"]\n'
    )
    with pytest.raises(UserError) as info:
        dry_run(load_experiment(experiment))
    one_sentence(str(info.value))
    assert "theirs.toml: debate[0]" in str(info.value)
    assert not mark.exists() and not (tmp_path / "results").exists()
