"""Tables and statistics on golden runs whose numbers were worked out by hand
(tests/golden/tables/README.md), and the CLI that prints them."""

from __future__ import annotations

import io
import json
import re
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest
from cli_helpers import mad_eval

import mad_eval as api
from mad_eval.measure.bootstrap import bootstrap_ci, paired_test
from mad_eval.reporting.results import load_run, load_runs
from mad_eval.reporting.tables import render, tidy
from mad_eval.store.files import StoreError

GOLDEN = Path(__file__).parent / "golden" / "tables"
EXPECTED = json.loads((GOLDEN / "expected.json").read_text())
EXACT = 20000  # replicates: enough for the bootstrap to sit within 0.01 of its exact value


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    """The golden run folders copied where the CLI may write metrics.json beside them."""
    for name in ("alpha", "beta", "single"):
        shutil.copytree(GOLDEN / name, tmp_path / name)
    return tmp_path


def variant(runs: Path, name: str, **changes: dict) -> Path:
    """A copy of the alpha run with manifest sections updated (e.g. config={...})."""
    folder = runs / name
    shutil.copytree(runs / "alpha", folder)
    manifest = json.loads((folder / "manifest.json").read_text())
    for section, values in changes.items():
        manifest[section].update(values)
    (folder / "manifest.json").write_text(json.dumps(manifest))
    return folder


def approx(value):
    return None if value is None else pytest.approx(value, abs=1e-4)


@pytest.mark.parametrize("name", ["alpha", "beta", "single"])
def test_golden_metrics_match_the_hand_computed_numbers(name):
    metrics = load_run(GOLDEN / name).metrics
    expected = EXPECTED[name]
    for key in ("maj", "debate", "delta", "mean_at_k", "maj_at_k", "unparsed"):
        if key in expected:
            assert metrics[key] == approx(expected[key]), key
    for got, want in zip(metrics["rounds"], expected["rounds"], strict=True):
        assert {k: got[k] for k in want} == {k: approx(v) for k, v in want.items()}
    for got, want in zip(metrics["transitions"], expected["transitions"], strict=True):
        assert {k: got[k] for k in want} == {k: approx(v) for k, v in want.items()}


def test_bootstrap_intervals_and_paired_tests_match_their_exact_values():
    alpha, beta = load_run(GOLDEN / "alpha"), load_run(GOLDEN / "beta")
    want = EXPECTED["bootstrap"]
    f, g = alpha.formulas, beta.formulas
    assert bootstrap_ci(alpha.tallies, f["maj"], EXACT) == pytest.approx(want["alpha maj ci"])
    assert bootstrap_ci(alpha.tallies, f["delta"], EXACT) == pytest.approx(want["alpha delta ci"])
    checks = [
        (alpha, f["debate"], alpha, f["maj"], "alpha delta p (debate vs maj)"),
        (alpha, f["move1.i2c"], alpha, f["move1.c2i"], "alpha move p (i2c vs c2i)"),
        (beta, g["debate"], beta, g["maj"], "beta delta p (debate vs maj)"),
        (beta, g["debate"], alpha, f["debate"], "beta debate p (vs alpha)"),
        (beta, g["maj"], alpha, f["maj"], "beta maj p (vs alpha)"),
    ]
    for a, fa, b, fb, name in checks:
        p, questions = paired_test(a.tallies, fa, b.tallies, fb, EXACT)
        assert p == pytest.approx(want[name], abs=0.01), name
        assert questions == 3


def test_debate_table_in_markdown_is_exactly_the_golden_text(runs):
    result = mad_eval("table", "alpha", "beta", "--format", "md", cwd=runs)
    assert result.returncode == 0, result.stderr
    assert result.stdout == (GOLDEN / "debate.md").read_text()


def test_csv_is_tidy_and_its_values_are_metrics_json(runs):
    for name in ("alpha", "beta"):
        api.report(runs / name)
    text = api.table([runs / "alpha", runs / "beta"], format="csv", replicates=5000)
    frame = pd.read_csv(io.StringIO(text))
    assert len(frame) == 6  # 2 methods x 1 benchmark x 3 numbers, nothing else
    wide = frame.pivot(index="method", columns="metric", values="value")
    for method in ("alpha", "beta"):
        metrics = json.loads((runs / method / "metrics.json").read_text())
        assert wide.loc[method, "Maj"] == pytest.approx(metrics["maj"])
        assert wide.loc[method, "Debate"] == pytest.approx(metrics["debate"])
        assert wide.loc[method, "Δ"] == pytest.approx(metrics["delta"])
    beta = frame[frame["method"] == "beta"].set_index("metric")
    assert beta.loc["Debate", "p_test"] == "vs alpha"
    assert beta.loc["Debate", "p_value"] == pytest.approx(1 / 27, abs=0.02)
    assert beta.loc["Δ", "p_test"] == "debate vs maj"
    assert beta.loc["Δ", "ci_low"] == pytest.approx(0.0)
    assert beta.loc["Δ", "ci_high"] == pytest.approx(100.0)
    alpha = frame[frame["method"] == "alpha"].set_index("metric")
    assert pd.isna(alpha.loc["Debate", "p_value"])  # the baseline is not tested against itself
    assert set(frame["run_dir"]) == {str(runs / "alpha"), str(runs / "beta")}


def test_average_group_covers_methods_with_every_benchmark(runs):
    other = variant(runs, "alpha-other", benchmark={"name": "other", "title": "Other"})
    frame = tidy(load_runs([runs / "alpha", other, runs / "beta"]), "debate", replicates=200)
    avg = frame[frame["benchmark"] == "Avg"].set_index("metric")
    assert list(avg["method"].unique()) == ["alpha"]  # beta has no "Other" run
    assert avg.loc["Δ", "value"] == pytest.approx(-100 / 3)
    text = render(frame, "md")
    assert text.splitlines()[0].endswith("| Avg Maj | Avg Debate | Avg Δ |")


def test_single_layout_names_k_and_gives_mean_and_maj_at_k(runs):
    result = mad_eval("table", "single", "--layout", "single", cwd=runs)
    assert result.returncode == 0, result.stderr
    header, _, row = result.stdout.splitlines()[:3]
    assert header == "| Method | Golden (K=4) mean@K | Golden (K=4) maj@K |"
    assert row == "| alpha | 37.5 | 50.0 |"


def test_per_round_layouts_have_a_row_per_round(runs):
    frame = tidy(load_runs([runs / "alpha", runs / "beta"]), "transitions", replicates=200)
    assert list(frame["part"].unique()) == ["0→1"]
    beta = frame[frame["method"] == "beta"].set_index("metric")["value"]
    assert beta.to_dict() == pytest.approx({"C→I": 0.0, "I→C": 500 / 9, "Δ": 500 / 9})
    lengths = tidy(load_runs([runs / "alpha"]), "lengths", replicates=200)
    assert lengths["value"].tolist() == pytest.approx([107.5, 1112.0, 212.5, 1208.0])
    text = render(tidy(load_runs([runs / "alpha"]), "diversity", replicates=200), "md")
    assert "| alpha (round 1) | 66.7 | 0.31 | 0.55 | 1.43 |" in text


@pytest.mark.slow
def test_latex_uses_booktabs_bolds_the_best_and_compiles(runs, tmp_path):
    result = mad_eval("table", "alpha", "beta", "--format", "latex", cwd=runs)
    assert result.returncode == 0, result.stderr
    tex = result.stdout
    for rule in ("\\toprule", "\\midrule", "\\bottomrule", "\\cmidrule(lr){2-4}"):
        assert rule in tex
    assert "\\multicolumn{3}{c}{Golden}" in tex
    # Maj is 66.7 for both: a column whose values are all equal has no best to bold.
    assert "beta & 66.7 & \\textbf{100.0} & \\textbf{+33.3} \\\\" in tex
    assert "alpha & 66.7 & 33.3 & $-$33.3 \\\\" in tex
    if shutil.which("pdflatex") is None:
        pytest.skip("no pdflatex here; .ci/run installs one")
    (tmp_path / "table.tex").write_text(tex)
    (tmp_path / "doc.tex").write_text(
        "\\documentclass{article}\\usepackage{booktabs}\\begin{document}"
        "\\input{table.tex}\\end{document}\n"
    )
    compiled = subprocess.run(
        ["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "doc.tex"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert compiled.returncode == 0, compiled.stdout[-2000:]
    assert (tmp_path / "doc.pdf").stat().st_size > 1000


@pytest.mark.slow
def test_labels_name_methods_and_clashes_are_refused(runs):
    alpha, beta = runs / "alpha", runs / "beta"
    text = api.table([alpha, beta], label=[f"{alpha}=MAD", f"{beta}=MAD+SDRL"])
    assert "| MAD+SDRL |" in text
    assert api.table([alpha, beta], label={str(alpha): "MAD", str(beta): "MAD+SDRL"}) == text
    shutil.copytree(alpha, runs / "again")
    with pytest.raises(StoreError, match="are both 'alpha' on golden; name them apart with"):
        api.table([alpha, runs / "again"])
    # The command names the runs as given; a label names one of them.
    unknown = mad_eval("table", "alpha", "--label", "gamma=X", cwd=runs)
    assert "--label names gamma, which is not one of the runs given (alpha);" in unknown.stderr


@pytest.mark.parametrize(
    "args, message",
    [
        (["--layout", "ablation"], "--layout must be one of debate, single, rounds"),
        (["--format", "xlsx"], "--format must be one of csv, latex, md, got 'xlsx'."),
        (["--baseline", "gamma"], "--baseline 'gamma' is not one of the methods: alpha, beta."),
        (["--label", "alpha"], "--label 'alpha' must look like RUN_DIR=NAME."),
    ],
)
def test_bad_table_options_get_one_sentence(runs, args, message):
    result = mad_eval("table", "alpha", "beta", *args, cwd=runs)
    assert result.returncode == 2
    assert message in result.stderr
    assert "Traceback" not in result.stderr


def test_a_folder_that_is_no_run_is_named(runs):
    result = mad_eval("table", "alpha", "nowhere", cwd=runs)
    assert result.returncode == 2
    assert "nowhere is not a run directory (no manifest.json)." in result.stderr


def test_methods_are_named_by_the_fewest_settings_that_tell_them_apart(runs):
    gamma = variant(runs, "gamma", config={"protocol": "sparse", "prompt_style": "verification"})
    found = load_runs([runs / "alpha", runs / "beta", gamma])
    # The model alone leaves alpha and gamma alike; model and protocol tell all three apart,
    # so the prompt style, which differs too, is not needed.
    assert [run.label for run in found] == [
        "alpha decentralized",
        "beta decentralized",
        "alpha sparse",
    ]


def test_the_error_bar_note_is_printed_only_under_a_table_that_shows_one(runs):
    frame = tidy(load_runs([runs / "alpha", runs / "beta"]), "debate", replicates=200)
    for fmt in ("md", "latex"):  # one run each: no std, no ±, no note
        text = render(frame, fmt)
        assert "±" not in text and "pm" not in text and "sample std" not in text
        assert "bootstrap interval" in render(frame, fmt, "ci")  # intervals exist
    shown = frame.copy()
    shown.loc[0, "std"] = 1.5  # as a method of two seeded runs would have
    for fmt in ("md", "latex"):
        assert "sample std over seeded runs" in render(shown, fmt)
    assert "± 1.5" in render(shown, "md")


def test_csv_numbers_carry_no_float_noise(runs):
    """Every number keeps 12 significant digits, all a metric has: a rate summed in
    another order reads 2.2, not 2.1999999999999997, and a small p-value keeps its own."""
    from mad_eval.reporting.tables import clean

    assert repr(clean(2.1999999999999997)) == "2.2"
    assert repr(clean(6.499999999999997)) == "6.5"
    assert clean(0.0004997501249375312) == 0.000499750124938
    text = api.table([runs / "alpha", runs / "beta"], format="csv", replicates=200)
    numbers = re.findall(r"(?<![\w/.-])-?\d+\.\d+(?![\w/])", text)
    assert numbers  # 66.66666666666667 before, written to 12 digits
    for number in numbers:
        digits = number.lstrip("-").replace(".", "").lstrip("0")
        assert len(digits) <= 12, number


@pytest.mark.slow
def test_a_folder_of_run_folders_is_read_as_the_runs_inside(runs):
    """`mad-eval table results`: every run folder below, in name order, none inside a run."""
    (runs / "results" / "exp").mkdir(parents=True)
    shutil.move(runs / "alpha", runs / "results" / "exp" / "alpha")
    shutil.move(runs / "beta", runs / "results" / "beta")
    (runs / "results" / "exp" / "tables").mkdir()  # an experiment's other folders
    found = mad_eval("table", "results", cwd=runs)
    assert found.returncode == 0, found.stderr
    named = mad_eval("table", "results/beta", "results/exp/alpha", cwd=runs)
    assert found.stdout == named.stdout and "| alpha |" in found.stdout
    wrote = mad_eval("table", "results", "--out", "t.md", cwd=runs)
    assert "Wrote t.md (debate layout, 2 run folders)." in wrote.stdout
    (runs / "empty" / "deeper").mkdir(parents=True)
    none = mad_eval("table", "empty", cwd=runs)
    assert none.returncode == 2
    assert "empty is not a run directory (no manifest.json) and holds none below it." in (
        none.stderr
    )
