"""Tables and summaries that say what they count: methods told apart by their answer
protocol, a clash refused before any turn is read, unusable run folders skipped by name,
alerts as footnotes, "-" where a layout has no value, the headline's intervals, the
experiment summary's signed Δ and run folders."""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path

import pytest
from cli_helpers import mad_eval
from factories import sim_run

from mad_eval import api
from mad_eval.errors import SkippedRun
from mad_eval.experiments.tables import folders_of
from mad_eval.reporting import results
from mad_eval.reporting.console import _footer, metrics_view
from mad_eval.reporting.paper import run_folders
from mad_eval.store.files import StoreError

GOLDEN = Path(__file__).parent / "golden" / "tables"


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    """results/: a debate run, the same debate read with another answer protocol, a single
    run, and a run that stopped before its first turn (a manifest and nothing else)."""
    root = tmp_path_factory.mktemp("results")
    sim_run(root / "a", limit=4, rounds=1, agents=3)
    sim_run(root / "b", limit=4, rounds=1, agents=3, answer_protocol="answer-line")
    api.single(model="sim:p0=0.5", benchmark="arith", limit=4, samples=3, out=root / "s")
    (root / "crashed").mkdir()
    shutil.copy(root / "a" / "manifest.json", root / "crashed" / "manifest.json")
    return root


@pytest.mark.slow
def test_the_answer_protocol_tells_methods_apart(folder):
    with pytest.warns(SkippedRun):
        text = api.table(folder, replicates=100)
    assert "| decentralized T=1 answer=answer-line |" in text
    assert "| decentralized T=1 |" in text


def test_only_the_answer_protocol_differing_names_the_model_beside_it(folder):
    runs = results.load_runs([folder / "a", folder / "b"])
    assert [run.label for run in runs] == ["sim:p0=0.5", "sim:p0=0.5 answer=answer-line"]


def test_a_clash_is_refused_before_any_turn_is_read(folder, tmp_path, monkeypatch):
    shutil.copytree(folder / "a", tmp_path / "x")
    shutil.copytree(folder / "a", tmp_path / "y")

    def unread(*args, **kwargs):
        raise AssertionError("a run was read before the clash was found")

    monkeypatch.setattr(results, "load_run", unread)
    with pytest.raises(StoreError, match=r"are both 'sim:p0=0\.5' on arith"):
        results.load_runs([tmp_path / "x", tmp_path / "y"])


def test_a_run_folder_without_turns_inside_a_folder_is_skipped_by_name(folder):
    with pytest.warns(SkippedRun, match="crashed: it holds no turns") as said:
        found = run_folders([folder])
    assert len(said) == 1
    assert folder / "crashed" not in found and folder / "a" in found


def test_a_run_folder_given_itself_is_never_skipped(folder):
    with warnings.catch_warnings():
        warnings.simplefilter("error", SkippedRun)
        assert run_folders([folder / "crashed"]) == [folder / "crashed"]
    with pytest.raises(StoreError, match="holds no turns yet"):
        api.table(folder / "crashed")


def test_the_critique_layout_skips_runs_without_verdicts_and_refuses_when_none_has(folder):
    refused = pytest.raises(StoreError, match="holds no run folder with turns and judge verdicts")
    with pytest.warns(SkippedRun) as said, refused:
        api.table(folder, "critique")
    assert sum("no judge verdicts" in str(w.message) for w in said) == 3  # a, b and s


def test_a_run_without_debate_has_no_debate_or_delta_in_the_debate_layout(folder):
    text = api.table([folder / "a", folder / "s"], replicates=100)
    [row] = [line for line in text.splitlines() if line.startswith("| single")]
    assert row.endswith("| - | - |")


def test_bold_only_where_a_column_has_values_that_differ(folder):
    text = api.table([GOLDEN / "alpha", GOLDEN / "beta"], replicates=100)
    assert "| alpha | 66.7 | 33.3 | -33.3 |" in text  # Maj is 66.7 in both rows: no best


def test_alerts_are_footnotes_naming_their_rows():
    text = api.table([GOLDEN / "alpha", GOLDEN / "beta"], replicates=100)
    assert "_Alert (alpha, beta on Golden): Its answers were counted right or wrong" in text
    latex = api.table([GOLDEN / "alpha", GOLDEN / "beta"], format="latex", replicates=100)
    assert "% Alert (alpha, beta on Golden): Its answers" in latex


def test_the_headline_carries_intervals_and_the_p_value_of_delta(folder):
    run = api.load_run(folder / "a")
    found = run.intervals(replicates=200)
    assert set(found) == {"maj", "debate", "delta"}
    assert found["delta"].p is not None and found["maj"].p is None
    from rich.console import Console

    console = Console(width=200, record=True)
    console.print(metrics_view(run.metrics, "a", run.escaping, found))
    text = console.export_text()
    low, high = found["delta"].low, found["delta"].high
    assert f"[{low:+.1f}, {high:+.1f}] p" in text
    assert "[ ] is a 95% bootstrap interval over questions" in text


def test_the_footer_says_its_unparsed_count_is_of_every_round(folder):
    run = api.load_run(folder / "a")
    assert "replies with no answer read (every round, every run):" in _footer(run.metrics, "")


def test_run_folders_are_counted_with_their_seeded_runs():
    assert folders_of([2, 2, 2]) == "3 run folders (2 seeded runs each)"
    assert folders_of([1]) == "1 run folder (1 seeded run each)"
    assert folders_of([1, 3, 2]) == "3 run folders (1, 2 or 3 seeded runs each)"


def test_the_experiment_summary_signs_delta_and_drops_columns_no_run_has(folder):
    from rich.console import Console

    from mad_eval.cli.experiment import runs_table

    debate = api.load_run(folder / "a")
    console = Console(width=200, record=True)
    console.print(runs_table({"a": debate}))
    text = console.export_text()
    assert "mean@K" not in text and "maj@K" not in text
    assert f"{debate.delta:+.1f}" in text
    console.print(runs_table({"a": debate, "s": api.load_run(folder / "s")}))
    assert "mean@K" in console.export_text()


@pytest.mark.slow
def test_the_command_line_names_each_skipped_run_and_makes_the_table(folder):
    result = mad_eval("table", str(folder), "--replicates", "100", cwd=folder)
    assert result.returncode == 0, result.stderr
    assert f"skipped: {folder / 'crashed'}: it holds no turns" in result.stderr
    assert "| Method |" in result.stdout
