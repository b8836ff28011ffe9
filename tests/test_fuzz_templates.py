"""1,000 mutated template files (tests/template_mutator.py, a fixed seed) at the loader and the
renderer: each one loads and renders its sample prompts, or is refused in one sentence
naming the file; never a traceback. They run in a process of their own with a memory
bound, a CPU bound and a hang guard, so a broken bound fails this test, not the machine."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

SEED, FILES = 41, 1000
TESTS = Path(__file__).resolve().parent

# Run in the child: one JSON line per file, its seed and what came of it.
RUN = """
import json, sys, traceback
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from template_mutator import mutated
from mad_eval.settings.templates import TemplateError, _load, sample_prompt

folder, seed, count = Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
for i in range(count):
    path = folder / f"t{i}.toml"
    path.write_text(mutated(seed * 1_000_003 + i), encoding="utf-8")
    print(json.dumps({"file": i, "started": True}), flush=True)
    try:
        template = _load(path, path.stem)
        for agent, round_ in ((0, 0), (1, 1), (2, 2)):
            sample_prompt(template, agent, round_)
        outcome = {"file": i, "loaded": True}
    except TemplateError as exc:
        outcome = {"file": i, "refused": str(exc)}
    except BaseException:
        outcome = {"file": i, "traceback": traceback.format_exc()}
    print(json.dumps(outcome), flush=True)
"""


def limits() -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
    resource.setrlimit(resource.RLIMIT_CPU, (900, 900))


def test_every_mutated_template_loads_or_is_refused_in_one_sentence(tmp_path):
    pytest.importorskip("resource")
    try:
        done = subprocess.run(
            [sys.executable, "-c", RUN, str(TESTS), str(tmp_path), str(SEED), str(FILES)],
            capture_output=True,
            text=True,
            timeout=1200,  # a hang guard: the files take about a minute
            preexec_fn=limits,
            env={**os.environ, "PYTHONHASHSEED": "0"},
        )
        lines, why = done.stdout.splitlines(), f"exit {done.returncode}: {done.stderr[-2000:]}"
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else exc.stdout or ""
        lines, why = out.splitlines(), "a hang"
    outcomes = [json.loads(line) for line in lines]
    ended = [o for o in outcomes if "started" not in o]
    last = outcomes[-1]["file"] if outcomes else 0
    assert len(ended) == FILES, f"stopped at file {last} ({why}): {tmp_path / f't{last}.toml'}"
    tracebacks = [o for o in ended if "traceback" in o]
    assert not tracebacks, tracebacks[0]["traceback"]
    for outcome in ended:
        if "refused" in outcome:
            said = outcome["refused"]
            assert "\n" not in said and "Traceback" not in said and len(said) < 700, said
            assert str(tmp_path / f"t{outcome['file']}.toml") in said, said
    loaded = sum(1 for o in ended if o.get("loaded"))
    assert 50 <= loaded < FILES  # the mutations reach the renderer, and bite
