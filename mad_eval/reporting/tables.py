"""The seed paper's tables from finished runs: one tidy frame (a row per method, benchmark
and number, with its spread, bootstrap interval and test), rendered as CSV, LaTeX
(booktabs) or Markdown. Every value is a number of the run's metrics.json."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from mad_eval.measure.bootstrap import REPLICATES, Resampled
from mad_eval.measure.families import differences
from mad_eval.measure.schema import lookup
from mad_eval.reporting.layouts import LAYOUTS, Column
from mad_eval.reporting.results import Run
from mad_eval.sanitize import valid_value
from mad_eval.voting.rules import RULES, default_rule
from mad_eval.words import counted

if TYPE_CHECKING:  # pandas loads when a table is made, not when the CLI starts
    import pandas as pd


COLUMNS = [
    "layout",
    "method",
    "part",
    "benchmark",
    "metric",
    "key",
    "value",
    "std",
    "runs",
    "agents",
    "score",
    "ci_low",
    "ci_high",
    "questions",
    "p_value",
    "p_test",
    "better",
    "digits",
    "signed",
    "run_dir",
]


def tidy(
    runs: list[Run], layout: str, baseline: str | None = None, replicates: int = REPLICATES
) -> pd.DataFrame:
    """One row per method x benchmark x number (x round part), in the runs' order.

    `value` and `std` are metrics.json's mean and std over runs; `ci_low`/`ci_high` a 95%
    bootstrap interval over questions. `p_value` tests a Δ against zero (Debate against
    Maj on the same questions; I→C against C→I), and any other number against the
    baseline method's on the questions both answered (the first method unless named).
    `score` names the scoring rule (mad_eval.voting.rules) behind a number that is the system's
    answer (Maj, Debate, the vote by round, the picked summary's ROUGE); it is empty for the
    agents' own numbers. Markdown and LaTeX name a rule in the row label where it is not the
    usual one (plurality; consensus for summaries).
    """
    return tidy_all(runs, [layout], baseline, replicates)[0]


def tidy_all(
    runs: list[Run], layouts: list[str], baseline: str | None = None, replicates: int = REPLICATES
) -> list[pd.DataFrame]:
    """tidy's frame of each layout, their intervals and tests worked out together: each
    set of tallies' replicates drawn once for all of them, a block at a time."""
    resampled = Resampled(replicates)
    asked = [_asked(runs, layout, baseline, resampled) for layout in layouts]
    resampled.compute()
    return [_frame(runs, *waiting) for waiting in asked]


# A row of a table, its interval and its p-value, read once the replicates are drawn.
Waiting = list[tuple[dict, Callable[[], tuple[float | None, float | None]], "Pending"]]


def _asked(
    runs: list[Run], layout: str, baseline: str | None, resampled: Resampled
) -> tuple[Waiting, set[str]]:
    """tidy's rows of `layout`, each with the interval and test it asked `resampled` for,
    and the layout's optional keys."""
    base = baseline or runs[0].label
    if baseline and baseline not in {run.label for run in runs}:
        known = ", ".join(dict.fromkeys(run.label for run in runs))
        raise ValueError(f"--baseline '{baseline}' is not one of the methods: {known}.")
    by_key = {(run.label, run.benchmark, run.group): run for run in runs}
    waiting: Waiting = []
    optional: set[str] = set()
    for run in runs:
        formulas = run.formulas
        # Summaries are scored with ROUGE, not voted: rouge is theirs alone; critique is anyone's.
        if layout != "critique" and (layout == "rouge") == run.voted:
            what = f"a {run.kind}"
            wanted = "another layout (debate, ...)" if run.voted else "--layout rouge"
            raise ValueError(
                f"{run.root} ran {run.benchmark}, {what} benchmark: --layout {layout} does not "
                f"apply to it; use {wanted}."
            )
        if layout == "single-bootstrap" and run.rounds > 0:
            raise ValueError(
                f"{run.root} is a debate ({counted(run.rounds, 'round')}): verl's bootstrap "
                "maj@K is kept for runs without debate (mad-eval single); use --layout single for "
                "its exact maj@K."
            )
        if layout == "critique" and not run.verdicts:
            raise ValueError(
                f"{run.root} has no judge verdicts; score it first with "
                f"`mad-eval judge {run.root} --judge MODEL`."
            )
        for part, columns in LAYOUTS.get(layout).columns(run.rounds, len(run.scoring.voters)):
            for column in columns:
                if column.optional:
                    optional.add(column.key)
                    if column.key not in formulas:  # not judged, not priced
                        continue
                if column.key not in formulas:
                    raise ValueError(
                        f"{run.root} has no {column.key} for the {layout} layout's "
                        f"{column.header} column."
                    )
                value, std = lookup(run.metrics, column.key)
                tallies = run.tallies_of(column.key)
                ci = resampled.interval(tallies, formulas[column.key])
                p_value, p_test, questions = _test(run, column, by_key, base, resampled)
                row = {
                    "layout": layout,
                    "method": run.label,
                    "part": part,
                    "benchmark": run.column,
                    "metric": column.header,
                    "key": column.key,
                    "value": value,
                    "std": std,
                    "runs": run.metrics["runs"],
                    "agents": run.scoring.agents,
                    "score": run.score if column.scored else None,
                    "questions": questions,
                    "p_test": p_test,
                    "better": column.better,
                    "digits": column.digits,
                    "signed": column.signed,
                    "run_dir": str(run.root),
                }
                waiting.append((row, ci, p_value))
    return waiting, optional


def _frame(runs: list[Run], waiting: Waiting, optional: set[str]) -> pd.DataFrame:
    """The rows, their intervals and p-values filled in, as tidy's frame (an optional
    number no run has is left out)."""
    import pandas as pd

    rows = []
    for row, ci, p_value in waiting:
        row["ci_low"], row["ci_high"] = ci()
        row["p_value"] = p_value()
        rows.append(row)
    frame = pd.DataFrame(valid_value(rows), columns=COLUMNS)  # a foreign label may hold one
    empty = [k for k in optional if frame.loc[frame["key"] == k, "value"].isna().all()]
    frame = frame[~frame["key"].isin(empty)].reset_index(drop=True)
    if not any(run.group for run in runs):  # an average over N = 3, 5, 7 would mean nothing
        frame = pd.concat([frame, _average(frame)], ignore_index=True)
    numbers = ("value", "std", "ci_low", "ci_high", "p_value")
    frame = frame.astype({c: float for c in numbers})
    frame = frame.assign(**{c: frame[c].map(clean) for c in numbers})
    frame.attrs["notes"] = [*_pools(runs), *_alerts(runs)]  # Markdown and LaTeX print them
    return frame


def _pools(runs: list[Run]) -> list[str]:
    """For compute-matched numbers, what K, the ceiling of m, is: the samples per question
    a single folder pools over its seeded runs."""
    singles = {run.paired.root: run.paired for run in runs if run.paired is not None}
    sizes: dict[tuple[int, int], list[str]] = {}  # (K, seeded runs) -> single folders
    for single in singles.values():
        sizes.setdefault((single.scoring.agents, single.metrics["runs"]), []).append(
            single.root.name
        )
    notes = []
    for (k, seeded), names in sizes.items():
        each = f"{names[0]}'s" if len(names) == 1 else f"each of {', '.join(names)}:"
        notes.append(
            f"K = {k * seeded}: {each} {k} samples per question x "
            f"{counted(seeded, 'seeded run')}, pooled"
        )
    return notes


def _alerts(runs: list[Run]) -> list[str]:
    """Each run's alerts (metrics.json's: why its numbers may mislead), once per sentence,
    naming the rows it is about."""
    about: dict[str, dict[str, list[str]]] = {}  # sentence -> benchmark column -> methods
    for run in runs:
        for sentence in run.alerts:
            found = about.setdefault(sentence.rstrip("."), {})
            found.setdefault(run.column, []).append(run.label)
    notes = []
    for sentence, rows in about.items():
        where = "; ".join(f"{', '.join(methods)} on {column}" for column, methods in rows.items())
        notes.append(f"Alert ({where}): {sentence}")
    return notes


# Significant digits a table's number keeps: all a metric has, none of the float arithmetic's
# noise (a rate summed in another order reads 6.499999999999997 for 6.5).
SIGNIFICANT = 12


def clean(value: float) -> float:
    """The number every format of a table prints (CSV as written, LaTeX and Markdown rounded
    further): `value` to SIGNIFICANT digits, so a p-value of 0.0004997... keeps its own."""
    return float(f"{value:.{SIGNIFICANT}g}")


# A p-value, read once the table's replicates are drawn (Resampled.compute).
Pending = Callable[[], float | None]


def _untested() -> None:
    return None


def _test(
    run: Run,
    column: Column,
    by_key: dict[tuple[str, str, str], Run],
    base: str,
    resampled: Resampled,
) -> tuple[Pending, str | None, int]:
    """A difference (Δ, drift, ...: families.differences) is tested against zero on the
    run's own questions; a number whose column names another of its run (`against`),
    against that; any other number against the baseline method's."""
    formulas, key = run.formulas, column.key
    if column.against is not None:
        mine, theirs = run.tallies_of(key), run.tallies_of(column.against)
        found = formulas[column.against]
        p, n = resampled.paired(mine, formulas[key], theirs, found)
        return p, f"vs {column.against}", n
    pairs = differences(run.scoring)
    if key in pairs:
        first, second = pairs[key]
        p, n = resampled.paired(run.tallies, formulas[first], run.tallies, formulas[second])
        return p, f"{_side(first)} vs {_side(second)}", n
    other = by_key.get((base, run.benchmark, run.group))
    if other is None or other is run or key not in other.formulas:
        return _untested, None, len(run.tallies_of(key).questions)
    mine, theirs = run.tallies_of(key), other.tallies_of(key)
    p, n = resampled.paired(mine, formulas[key], theirs, other.formulas[key])
    return p, f"vs {base}", n


def _side(name: str) -> str:
    """How the p_test column names one side of a tested difference."""
    return {"i2c": "I→C", "c2i": "C→I"}.get(name.rpartition(".")[2], name)


def _average(frame: pd.DataFrame) -> pd.DataFrame:
    """The paper's Avg group: each method's mean over benchmarks, for methods that have
    every benchmark of the table (an average over fewer would not compare)."""
    benchmarks = frame["benchmark"].unique()
    if len(benchmarks) < 2:
        return frame.iloc[0:0]
    rows = []
    for _, group in frame.groupby(["method", "part", "metric"], sort=False):
        if set(group["benchmark"]) != set(benchmarks) or group["value"].isna().any():
            continue
        first = group.iloc[0]
        rows.append(
            {
                **{c: None for c in COLUMNS},
                **first[["layout", "method", "part", "metric", "key", "score", "better", "digits"]],
                "signed": first["signed"],
                "benchmark": "Avg",
                "value": float(np.mean(group["value"])),
                "runs": int(group["runs"].min()),
            }
        )
    import pandas as pd

    return pd.DataFrame(rows, columns=COLUMNS)


# A text cell a spreadsheet would read as a formula (OWASP's CSV injection: = + - @, tab,
# carriage return first), unless it is a plain number, which a spreadsheet reads as one.
_FORMULA = re.compile(r"[=+\-@\t\r]")
_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")


def spreadsheet_text(value: object) -> object:
    """A cell as a spreadsheet shows it, never runs it: text starting like a formula gets a
    leading ' (the spreadsheet's mark for text); numbers and other text stay as they are."""
    if isinstance(value, str) and _FORMULA.match(value) and not _NUMBER.fullmatch(value):
        return "'" + value
    return value


def to_csv(frame: pd.DataFrame) -> str:
    """The tidy frame as CSV; a label from a run folder (a model, a method) is someone
    else's text, so a cell that would start a formula is escaped (spreadsheet_text)."""
    frame = frame.drop(columns=["better", "digits", "signed"])
    text = frame.select_dtypes(exclude="number").columns
    frame[text] = frame[text].map(spreadsheet_text)
    return frame.to_csv(index=False)


@dataclass
class Grid:
    """The printed table: benchmarks as column groups, methods (x parts) as rows."""

    benchmarks: list[str]
    metrics: list[str]  # headers within a group, in layout order
    rows: list[tuple[str, str]]  # (method, part)
    cells: dict[tuple[str, str, str, str], pd.Series]  # (method, part, benchmark, metric)
    scores: dict[str, list[str]]  # method -> the scoring rules it used other than the default

    @functools.cached_property
    def best(self) -> set[tuple[str, str, str, str]]:
        return _best(self)


def grid(frame: pd.DataFrame) -> Grid:
    benchmarks = list(dict.fromkeys(frame["benchmark"]))
    metrics = list(dict.fromkeys(frame["metric"]))
    # Rows of a per-round layout go round by round, so each round's methods stand together.
    pairs = list(dict.fromkeys(zip(frame["method"], frame["part"], strict=True)))
    parts = list(dict.fromkeys(p for _, p in pairs))
    rows = sorted(pairs, key=lambda pair: parts.index(pair[1]))
    cells = {(r["method"], r["part"], r["benchmark"], r["metric"]): r for _, r in frame.iterrows()}
    # The rouge layout is the summaries'; every other one scores answers.
    usual = default_rule("summary" if frame["layout"].iloc[0] == "rouge" else "math")
    scores: dict[str, list[str]] = {}
    for _, r in frame.iterrows():
        if isinstance(r["score"], str) and r["score"] != usual:
            found = scores.setdefault(r["method"], [])
            found += [] if r["score"] in found else [r["score"]]
    return Grid(benchmarks, metrics, rows, cells, scores)


def _row_cells(g: Grid, method: str, part: str, error: str) -> list[tuple[str, str | None, bool]]:
    """A row's printed cells, a benchmark's columns after another: the value ("-" when
    missing), its error bar, and whether it is the best of its column."""
    cells = []
    for benchmark in g.benchmarks:
        for metric in g.metrics:
            key = (method, part, benchmark, metric)
            if key in g.cells:
                cells.append((*_number(g.cells[key], error), key in g.best))
            else:
                cells.append(("-", None, False))
    return cells


def _best(g: Grid) -> set[tuple[str, str, str, str]]:
    """Cells holding the best printed value of their column within their part (ties too)."""
    best = set()
    for benchmark in g.benchmarks:
        for metric in g.metrics:
            for part in dict.fromkeys(p for _, p in g.rows):
                cells = [
                    g.cells[key]
                    for m, p in g.rows
                    if p == part and (key := (m, p, benchmark, metric)) in g.cells
                ]
                shown = {
                    (c["method"], part, benchmark, metric): round(c["value"], int(c["digits"]))
                    for c in cells
                    # A frame holds a column's missing `better` as NaN or None.
                    if c["better"] in ("max", "min") and _present(c["value"])
                }
                if len(set(shown.values())) < 2:  # all equal (all 0.0): none stands out
                    continue
                pick = max if cells[0]["better"] == "max" else min
                top = pick(shown.values())
                best |= {key for key, v in shown.items() if v == top}
    return best


def _present(value: object) -> bool:
    return value is not None and not (isinstance(value, float) and np.isnan(value))


def _number(cell: pd.Series, error: str) -> tuple[str, str | None]:
    """The value as printed, and its error bar (std over runs, or the CI's half-width)."""
    if not _present(cell["value"]):
        return "-", None
    digits = int(cell["digits"])
    sign = "+" if cell["signed"] else ""
    text = f"{cell['value']:{sign}.{digits}f}"
    if error == "std" and _present(cell["std"]):
        return text, f"{cell['std']:.{digits}f}"
    if error == "ci" and _present(cell["ci_low"]):
        return text, f"{(cell['ci_high'] - cell['ci_low']) / 2:.{digits}f}"
    return text, None


def _group_title(frame: pd.DataFrame, benchmark: str) -> str:
    """The benchmark, and for the single layout the K its runs sampled (when they agree)."""
    ks = frame.loc[frame["benchmark"] == benchmark, "agents"].dropna().unique()
    if frame["layout"].iloc[0].startswith("single") and len(ks) == 1:
        return f"{benchmark} (K={int(ks[0])})"
    return benchmark


def _row_label(g: Grid, method: str, part: str) -> str:
    """The method, its row part, and the scoring rule its numbers used where it is not the
    usual one (score=hub)."""
    inside = [part] if part else []
    inside += [
        f"score={rule}"
        for rule in g.scores.get(method, [])
        # A label naming the rule already (a "centralized (hub scores)" row) says it once.
        if not re.search(rf"\b{re.escape(rule)}\b", method, re.IGNORECASE)
    ]
    return f"{method} ({'; '.join(inside)})" if inside else method


def _notes(frame: pd.DataFrame, g: Grid) -> list[str]:
    """What the layout's numbers are (its note) and what each unusual rule named in a
    row label does, as sentences without their full stop."""
    layout = frame["layout"].iloc[0]
    note = LAYOUTS.get(layout).note
    notes = [note] if note else []
    rules = dict.fromkeys(rule for found in g.scores.values() for rule in found)
    notes += [f"score={rule}: {RULES.get(rule).description}" for rule in rules]
    return notes + list(frame.attrs.get("notes", []))


def _has_bars(g: Grid, error: str) -> bool:
    """Whether any cell prints a ± (one-run tables have no std): its footnote only then."""
    return any(bar for method, part in g.rows for _, bar, _ in _row_cells(g, method, part, error))


def _error_note(error: str) -> str:
    if error == "std":
        return "± is the sample std over seeded runs (none with one run)"
    return "± is half the width of a 95% bootstrap interval over questions"


LATEX_SPECIAL = {c: f"\\{c}" for c in "&%$#_{}"} | {
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "\\": r"\textbackslash{}",
}
LATEX_SYMBOLS = {"Δ": r"$\Delta$", "→": r"$\to$", "ρ": r"$\rho$", "±": r"$\pm$"}


def latex_escape(text: str) -> str:
    escaped = "".join(LATEX_SPECIAL.get(c, c) for c in text)
    for symbol, command in LATEX_SYMBOLS.items():
        escaped = escaped.replace(symbol, command)
    return escaped.replace("N_eff", r"$N_\mathrm{eff}$").replace(r"N\_eff", r"$N_\mathrm{eff}$")


def to_latex(frame: pd.DataFrame, error: str = "std") -> str:
    """A booktabs tabular: a column group per benchmark, the best value of each column bold."""
    g = grid(frame)
    width = len(g.metrics)
    spec = "l" + ("@{\\hspace{1em}}" + "r" * width) * len(g.benchmarks)
    what = f": {_error_note(error)}" if _has_bars(g, error) else ""
    lines = [
        f"% mad-eval table --layout {frame['layout'].iloc[0]}{what}.",
        *(f"% {note}." for note in _notes(frame, g)),
        "% Needs \\usepackage{booktabs}.",
        f"\\begin{{tabular}}{{{spec}}}",
        "\\toprule",
        " & "
        + " & ".join(
            f"\\multicolumn{{{width}}}{{c}}{{{latex_escape(_group_title(frame, b))}}}"
            for b in g.benchmarks
        )
        + " \\\\",
        " ".join(
            f"\\cmidrule(lr){{{2 + i * width}-{1 + (i + 1) * width}}}"
            for i in range(len(g.benchmarks))
        ),
        "Method & " + " & ".join(latex_escape(m) for m in g.metrics * len(g.benchmarks)) + " \\\\",
        "\\midrule",
    ]
    previous = g.rows[0][1]
    for method, part in g.rows:
        cells = [latex_escape(_row_label(g, method, part))]
        for text, bar, bold in _row_cells(g, method, part, error):
            text = text.replace("-", "$-$") if text != "-" else text
            text = f"\\textbf{{{text}}}" if bold else text
            cells.append(text + (f"{{\\tiny $\\pm${bar}}}" if bar else ""))
        if lines[-1] != "\\midrule" and part != previous:
            lines.append("\\midrule")
        previous = part
        lines.append(" & ".join(cells) + " \\\\")
    lines += ["\\bottomrule", "\\end{tabular}", ""]
    return "\n".join(lines)


def to_markdown(frame: pd.DataFrame, error: str = "std") -> str:
    """A GitHub table: one header row naming benchmark and number, best values bold."""
    g = grid(frame)
    header = ["Method"] + [f"{_group_title(frame, b)} {m}" for b in g.benchmarks for m in g.metrics]
    lines = [
        "| " + " | ".join(h.replace("|", "\\|") for h in header) + " |",
        "|" + "---|" + "---:|" * (len(header) - 1),
    ]
    for method, part in g.rows:
        cells = [_row_label(g, method, part).replace("|", "\\|")]
        for text, bar, bold in _row_cells(g, method, part, error):
            cells.append((f"**{text}**" if bold else text) + (f" ± {bar}" if bar else ""))
        lines.append("| " + " | ".join(cells) + " |")
    notes = [_error_note(error).capitalize()] if _has_bars(g, error) else []
    notes += _notes(frame, g)
    lines += ["", *(f"_{note}._" for note in notes)] if notes else []
    return "\n".join(lines) + "\n"


def render(frame: pd.DataFrame, fmt: str, error: str = "std") -> str:
    if fmt == "csv":
        return to_csv(frame)
    if fmt == "latex":
        return to_latex(frame, error)
    return to_markdown(frame, error)
