"""The public API: what a training loop or a notebook calls, without the command line."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap

import pytest

import mad_eval
from mad_eval.errors import Interrupted
from mad_eval.settings.config import ConfigError


@pytest.mark.slow
def test_a_plain_script_without_a_main_guard_runs_judges_and_reads(tmp_path):
    script = tmp_path / "loop.py"
    script.write_text(
        textwrap.dedent(
            """
            import json
            import mad_eval

            run = mad_eval.run(agents=3, rounds=1, limit=4, benchmark="arith", out="r")
            single = mad_eval.single(samples=4, limit=4, out="s")
            judged = mad_eval.judge("r", "sim-judge")
            turns = run.turns()
            print(json.dumps({
                "maj": run.maj, "debate": run.debate, "delta": run.delta,
                "mean_at_k": single.metrics["mean_at_k"],
                "critique": judged.metrics["critique_total"],
                "turns": len(turns), "columns": list(turns.columns),
            }))
            """
        )
    )
    out = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stderr == ""  # quiet: no progress bars, no console lines
    found = json.loads(out.stdout)
    metrics = json.loads((tmp_path / "r" / "metrics.json").read_text())
    assert (found["maj"], found["debate"], found["delta"]) == (
        metrics["maj"],
        metrics["debate"],
        metrics["delta"],
    )
    assert found["turns"] == 4 * 3 * 2
    assert {"question", "round", "agent", "answer", "correct"} <= set(found["columns"])
    assert found["critique"] is not None
    assert (
        json.loads((tmp_path / "s" / "metrics.json").read_text())["mean_at_k"] == found["mean_at_k"]
    )


def test_the_api_runs_from_inside_a_running_event_loop(tmp_path):
    """A notebook's cell runs inside an event loop: the call must not need one of its own."""

    async def cell() -> float | None:
        return mad_eval.run(agents=2, rounds=1, limit=2, out=tmp_path / "nb").maj

    assert asyncio.run(cell()) == mad_eval.load_run(tmp_path / "nb").maj


def test_a_mistyped_or_mistaken_setting_is_one_sentence(tmp_path):
    with pytest.raises(ConfigError, match=r"'temprature' is not a setting of a run.*'temperature'"):
        mad_eval.run(temprature=0.5, out=tmp_path / "x")
    with pytest.raises(ConfigError, match="'agents' must be int, got 'five'"):
        mad_eval.run(agents="five", out=tmp_path / "x")
    with pytest.raises(ConfigError, match="single takes no 'rounds'"):
        mad_eval.single(rounds=2, out=tmp_path / "x")
    assert not (tmp_path / "x").exists()


def test_a_stop_is_a_keyboard_interrupt_that_names_the_records():
    stop = Interrupted(__import__("signal").SIGTERM, "r/turns.jsonl")
    assert isinstance(stop, KeyboardInterrupt)
    assert (stop.records, stop.what) == ("r/turns.jsonl", "turn")


def test_load_runs_names_runs_apart(tmp_path):
    mad_eval.run(agents=2, rounds=1, limit=2, out=tmp_path / "a")
    mad_eval.run(agents=3, rounds=1, limit=2, out=tmp_path / "b")
    runs = mad_eval.load_runs([tmp_path / "a", tmp_path / "b"])
    assert [run.label for run in runs] == ["N=2", "N=3"]


def test_the_calls_stay_calls_after_every_module_is_imported():
    """A submodule named like a call would replace it on the package once imported."""
    import importlib
    import pkgutil

    for module in pkgutil.walk_packages(mad_eval.__path__, "mad_eval."):
        # vllm and the trainer hooks import their own heavy dependencies: their own tests.
        skipped = ("mad_eval.backends.vllm", "mad_eval.cli", "mad_eval.training.trl_grpo",
                   "mad_eval.training.verl_loop")  # fmt: skip
        if not module.name.startswith(skipped):
            importlib.import_module(module.name)
    for name in mad_eval.__all__:
        assert callable(getattr(mad_eval, name)), name
