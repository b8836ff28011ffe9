"""A hostile template's bounds hold: every bytes, text, list and table it makes is sized from
its inputs before it is made (a part shared by reference as often as its text repeats it),
a filter that does much in one call looks at the clock or has its own bound, and the
commands that load or replay a template end in bounded time, stopping within about a second
on Ctrl-C or SIGTERM. Each payload here ran to gigabytes or hung before (issue 41); each test
runs with a memory bound, and the commands with a hang guard."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import time
import tomllib
from pathlib import Path

import pytest
from bound_helpers import guarded, memory_bound, peak_memory, start_guarded, wait_until_it_handles
from test_hostile_templates import one_sentence, site_text, template_text

import mad_eval as api
from mad_eval.debate import replay
from mad_eval.settings.templates import TemplateError, load_template, parse_template, sample_prompt

MB = 1 << 20
SHIPPED = Path(api.__file__).resolve().parents[1] / "templates"
# What a refused payload may hold at its peak: under 3 MB here, from 5 MB to 6.6 GB before.
SMALL = 8 * MB


@pytest.fixture(autouse=True)
def bounded_memory():
    with memory_bound():
        yield


def refused(tmp_path: Path, payload: str, where: str = "round0") -> str:
    """The sentence loading a template holding `payload` ends in, checked to be made without
    holding much memory."""
    path = tmp_path / "theirs.toml"
    path.write_text(template_text(payload, where))
    said: list[str] = []

    def load() -> None:
        with pytest.raises(TemplateError) as info:
            load_template(str(path))
        said.append(str(info.value))

    assert peak_memory(load) < SMALL
    one_sentence(said[0])
    assert said[0].startswith(f"{path}: {where}[0].content: "), said[0]
    return said[0]


# Built up by reference: each level repeats the one below ten times, so d's text is 18 MB
# while d holds four lists of ten items.
SHARED = (
    "{% set a = [question * 1000] %}{% set b = [a, a, a, a, a, a, a, a, a, a] %}"
    "{% set c = [b, b, b, b, b, b, b, b, b, b] %}{% set d = [c, c, c, c, c, c, c, c, c, c] %}"
)

BYTES = {
    "repeated": "{{ question.encode() * 100000000 }}",
    "centered": "{{ question.encode().center(1000000000) }}",
    "formatted": "{{ '%999999999d'.encode() % 1 }}",
    "replaced": "{{ question.encode().replace(''.encode(), question.encode() * 50000) }}",
}


@pytest.mark.parametrize("name", sorted(BYTES))
def test_bytes_are_sized_before_they_are_made(tmp_path, name):
    said = refused(tmp_path, BYTES[name])
    assert "it would make a text of over" in said


@pytest.mark.parametrize("made", ["d|string", "d|tojson", "d|pprint"])
def test_shared_references_are_sized_as_often_as_their_text_repeats_them(tmp_path, made):
    said = refused(tmp_path, SHARED + "{{ (" + made + ")|length }}")
    assert "it would make a text of over" in said


LARGE = {
    "indented json": "{{ (range(10000)|list)|tojson(indent=10000) }}",
    "pretty printed": "{% set k = question * 1000 %}{{ {k: {k: range(1000)|list}}|pprint }}",
    "batch filled": "{{ [1]|batch(1000000, fill_with=question * 1000)|list }}",
    "slices filled": "{{ [1]|slice(1000000, fill_with=question * 1000)|list }}",
    "text joined from a generator": (
        "{{ ''.join(range(10000)|map(attribute='x', default=question * 1000)) }}"
    ),
    "upper": "{{ ('ß' * 400000)|upper|upper }}",
    "table written": "{% set a = question * 50000 %}{{ {1: a, 2: a, 3: a}|string }}",
}


@pytest.mark.parametrize("name", sorted(LARGE))
def test_every_filter_and_operator_sizes_what_it_would_make(tmp_path, name):
    said = refused(tmp_path, LARGE[name])
    assert "it would make a text of over" in said, said


@pytest.mark.parametrize(
    ("payload", "called"),
    [
        ("{{ (1).to_bytes(1000000000, 'big') }}", "int.to_bytes()"),
        ("{{ {}.fromkeys(range(10000), question * 1000)|string }}", "dict.fromkeys()"),
        ("{{ (''|safe).escape([question * 1000] * 50) }}", "Markup.escape()"),
    ],
)
def test_a_template_calls_only_the_methods_that_read(tmp_path, payload, called):
    said = refused(tmp_path, payload)
    assert f"a template cannot call {called}" in said, said


@pytest.mark.slow
def test_a_sum_of_lists_stops_before_it_copies_too_much(tmp_path):
    said = refused(tmp_path, "{{ [[1]]|batch(5000, fill_with=[1])|first|sum(start=[])|length }}")
    assert "sum() of these lists copies more than 10,000,000 items" in said


def test_ordinary_uses_of_the_bounded_filters_render_as_before(tmp_path):
    path = tmp_path / "mine.toml"
    path.write_text(
        template_text(
            "{{ [[1, 2], [3]]|sum(start=[]) }} {{ range(7)|batch(3, fill_with=0)|list }} "
            "{{ 'a b'|wordwrap(1) }} {{ {'k': question}|tojson }} {{ [question]|pprint }} "
            "{{ question.encode().hex()|length }} {{ ['x', 'y']|join(', ') }} "
            "{{ values.items()|list|length }} {{ question.split()|length }}"
        )
    )
    text = sample_prompt(load_template(str(path)), 0, 0)[-1]["content"]
    assert "[1, 2, 3] [[0, 1, 2], [3, 4, 5], [6, 0, 0]] a\nb" in text
    assert '{"k": "What is 6 times 7?"}' in text and "['What is 6 times 7?']" in text
    assert " 36 x, y 0 5" in text


@pytest.mark.parametrize("name", sorted(path.stem for path in SHIPPED.glob("*.toml")))
def test_a_shipped_template_renders_the_same_in_the_sandbox(tmp_path, name):
    """The project's own templates (their exact text) render as plain Jinja, every turn;
    the same messages from anyone else's file render in the sandbox, to the same prompts."""
    ours = load_template(name)
    assert all(message.ours for message in (*ours.round0, *ours.debate))
    theirs = parse_template(ours.data, ours.source + "\n# a copy\n", tmp_path / "c.toml", name)
    assert not any(message.ours for message in (*theirs.round0, *theirs.debate))
    for agent in range(3):
        for round_ in range(3):
            assert sample_prompt(theirs, agent, round_) == sample_prompt(ours, agent, round_)


# --- the commands that load or replay a template ---------------------------------------

# Each ran past 120 s in one filter call, where the clock was not looked at.
HANGS = {
    "quadratic": "{{ [[1]]|batch(100000, fill_with=[1])|first|sum(start=[])|length }}",
    "long word": "{{ ('x' * 400000)|wordwrap(1)|length }}",
}
# The issue's own: 5 x 10**11 items copied in one call of sum() (before, 20 minutes or more).
FOREVER = "{{ [[1]]|batch(1000000, fill_with=[1])|first|sum(start=[])|length }}"
SENTENCES = {
    "quadratic": "sum() of these lists copies more than",
    "long word": "wordwrap at width 1 copies more than",
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(HANGS))
def test_a_filter_that_works_long_in_one_call_is_stopped(tmp_path, name):
    (tmp_path / "theirs.toml").write_text(template_text(HANGS[name]))
    shown = guarded(["templates", "theirs.toml"], tmp_path)
    assert shown.returncode == 2, shown.stderr
    one_sentence(shown.stderr.strip())
    assert SENTENCES[name] in shown.stderr


@pytest.mark.slow
def test_templates_lists_each_hostile_file_as_unusable_in_bounded_time(tmp_path):
    (tmp_path / "templates").mkdir()
    payloads = {**HANGS, "bytes": BYTES["repeated"], "shared": SHARED + "{{ d|string }}"}
    for name, payload in payloads.items():
        (tmp_path / "templates" / f"{name.replace(' ', '-')}.toml").write_text(
            template_text(payload)
        )
    if hasattr(os, "mkfifo"):  # a reader of it waits for a writer that never comes
        os.mkfifo(tmp_path / "templates" / "fifo.toml")
        payloads["fifo"] = ""
    listed = guarded(["templates"], tmp_path)
    assert listed.returncode == 0, listed.stderr
    out = " ".join(listed.stdout.split())
    for name in payloads:
        assert f"│ {name.replace(' ', '-')} │ unusable: " in out, out
    assert "weigh the other responses" in out  # the built-in ones are listed as ever


@pytest.fixture(scope="module")
def sim_run(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("sim") / "r"
    api.run(agents=2, rounds=1, limit=2, out=root)
    return root


def recording(sim_run: Path, tmp_path: Path, payload: str) -> Path:
    """A copy of the sim run whose manifest.json records a debate template holding
    `payload`, with its table and its hash recomputed to match, as anyone can."""
    root = tmp_path / "shared"
    shutil.copytree(sim_run, root)
    text = template_text(payload)
    manifest = json.loads((root / "manifest.json").read_text())
    recorded = manifest["prompt"]["prompt_templates"]["debate"]
    recorded["text"], recorded["data"] = text, tomllib.loads(text)
    recorded["sha256"] = hashlib.sha256(text.encode()).hexdigest()
    (root / "manifest.json").write_text(json.dumps(manifest))
    return root


# The commands that rebuild a folder's recorded prompts, on the folder `recording` makes.
READERS = {
    "judge": ["judge", "shared", "--judge", "sim-judge"],
    "report": ["report", "shared"],
    "view": ["view", "shared", "--out", "site"],
}


@pytest.mark.slow
@pytest.mark.parametrize("command", ["judge", "report", "view"])
def test_a_folder_recording_a_hostile_template_ends_in_bounded_time(sim_run, tmp_path, command):
    root = recording(sim_run, tmp_path, FOREVER)
    args = READERS[command]
    done = guarded(args, tmp_path)
    if command == "judge":  # nothing judged: the prompts it would judge cannot be rebuilt
        assert done.returncode == 2, done.stderr
        one_sentence(done.stderr.strip())
        assert "it would make a text of over" in done.stderr
        assert not (root / "judge.jsonl").exists()
    else:  # the numbers stand; what needs the prompts says it cannot have them
        assert done.returncode == 0, done.stderr
        assert "Traceback" not in done.stderr
    if command == "view":
        assert "its prompt template cannot be loaded" in site_text(tmp_path / "site")


def test_a_template_that_cannot_be_loaded_is_tried_once_per_replay(sim_run, tmp_path, monkeypatch):
    """A view rebuilds every turn's prompt: an unusable template is refused once, not once
    per turn (each try may take the render's whole time bound)."""
    root = recording(sim_run, tmp_path, "{{ question * 100000000 }}")
    tries = []
    real = replay.recorded_template

    def counted(*args, **kwargs):
        tries.append(args[0])
        return real(*args, **kwargs)

    monkeypatch.setattr(replay, "recorded_template", counted)
    api.view([root], out=tmp_path / "site")
    assert tries == ["debate"]


def test_a_template_failing_on_the_real_data_is_noted_and_not_tried_again(sim_run, tmp_path):
    """A template passes its check on sample data and goes past a bound on the run's own
    questions (arith's say "Evaluate"): view notes it on each prompt, rendering it once."""
    payload = "{% if 'Evaluate' in question %}{{ question * 100000000 }}{% endif %}"
    root = recording(sim_run, tmp_path, payload)
    renders = []
    real = replay.read_prompt

    def counted(*args, **kwargs):
        renders.append(1)
        return real(*args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(replay, "read_prompt", counted)
        api.view([root], out=tmp_path / "site")
    assert len(renders) == 1
    assert "its prompt template cannot be used (" in site_text(tmp_path / "site")
    assert "it would make a text of over" in site_text(tmp_path / "site")


def test_a_template_slow_on_every_prompt_is_refused_for_the_rest_of_a_replay(
    sim_run, tmp_path, monkeypatch
):
    """Each render is bounded; a folder whose every prompt renders just within the bound is
    not replayed for hours: past SLOW_TOTAL seconds at over SLOW_EACH a prompt, the rest of
    its prompts are refused (both made tiny here, so any render is slow)."""
    root = tmp_path / "shared"
    shutil.copytree(sim_run, root)
    monkeypatch.setattr(replay, "SLOW_TOTAL", 0.0)
    monkeypatch.setattr(replay, "SLOW_EACH", 0.0)
    api.view([root], out=tmp_path / "site")
    text = site_text(tmp_path / "site")
    assert "s a prompt to rebuild, too slow to replay its turns" in text


def test_a_templates_sample_prompts_share_one_time_bound(tmp_path, monkeypatch):
    """Loading a template renders nine sample prompts: together they take no longer than
    one may (a clock that moves 3 s at each look stands in for a slow render)."""
    from mad_eval.settings import bounds

    now = [0.0]

    def clock() -> float:
        now[0] += 3
        return now[0]

    monkeypatch.setattr(bounds.time, "monotonic", clock)
    path = tmp_path / "mine.toml"
    path.write_text(template_text("{% for i in range(64) %}{% endfor %}"))
    with pytest.raises(TemplateError, match="it takes more than 10 seconds to render"):
        load_template(str(path))


# A render that works within its bounds for its whole ten seconds: 30,000 searches of a
# 900,000-character text, no text made beyond it.
SLOW = (
    "{% set s = question * 50000 %}{% for i in range(10000) %}{% for j in range(3) %}"
    "{% if s.count('What') %}{% endif %}{% endfor %}{% endfor %}"
)


@pytest.mark.slow
@pytest.mark.parametrize("command", ["judge", "report", "view"])
@pytest.mark.parametrize(
    ("sig", "said"),
    [(signal.SIGTERM, "Stopped by SIGTERM"), (signal.SIGINT, "Interrupted (Ctrl-C)")],
)
def test_a_signal_stops_the_command_while_a_render_runs(sim_run, tmp_path, command, sig, said):
    recording(sim_run, tmp_path, SLOW)
    args = READERS[command]
    proc = start_guarded(args, tmp_path)
    wait_until_it_handles(proc, signal.SIGTERM)
    time.sleep(1)  # well inside the ten-second render
    os.killpg(proc.pid, sig)
    try:
        _, stderr = proc.communicate(timeout=60)  # a hang guard; it stops within a second
    except Exception:
        proc.kill()
        raise
    assert proc.returncode == 128 + sig, stderr
    lines = [line for line in stderr.splitlines() if line and not line.startswith("warning:")]
    assert len(lines) == 1 and lines[0].startswith(said), stderr
    assert "run the same command again" in lines[0]
