"""mad-eval view, its Python side: the index's numbers and filter sets are the run's own,
hostile text stays inert data in the .js files, and a user's mistakes are one sentence."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from cli_helpers import mad_eval
from factories import sim_run
from viewer_helpers import HOSTILE, LATEX, expected_sets, hostile_run, read_data

from mad_eval import api
from mad_eval.grading.rubric import JUDGE_CRITERIA
from mad_eval.viewer.markup import render_markdown, text_html
from mad_eval.viewer.site import ViewError, as_script


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("viewer")
    run = sim_run(root / "run", limit=30, agents=5, rounds=2, runs=2)
    site = api.view([run], root / "site").parent
    return run, site


@pytest.mark.slow
def test_overview_numbers_are_metrics_json(demo) -> None:
    run, site = demo
    metrics = json.loads((run / "metrics.json").read_text())
    summary = read_data(site, "index")["runs"][0]["summary"]
    for name in ("maj", "debate", "delta"):
        assert summary[name] == metrics[name]
    assert [r["vote_accuracy"] for r in summary["rounds"]] == [
        r["vote_accuracy"] for r in metrics["rounds"]
    ]
    assert [(t["c2i"], t["i2c"]) for t in summary["transitions"]] == [
        (t["c2i"], t["i2c"]) for t in metrics["transitions"]
    ]


def test_filter_sets_are_the_tallies(demo) -> None:
    run, site = demo
    rows = read_data(site, "index")["runs"][0]["debates"]
    assert len(rows) == 60  # 30 questions x 2 seeded runs
    expected = expected_sets(run)
    assert expected["r2w"] and expected["w2r"] and expected["split"]  # the test means something
    for tag, keys in expected.items():
        assert {row["key"] for row in rows if tag in row["tags"]} == keys, tag


def test_a_debate_page_holds_every_turn_with_its_prompt(demo) -> None:
    _, site = demo
    row = read_data(site, "index")["runs"][0]["debates"][0]
    page = read_data(site, row["file"])
    assert len(page["turns"]) == 5 * 3
    assert all(t["prompt"] and t["prompt_note"] is None for t in page["turns"])
    assert page["votes"] == row["votes"]
    later = [t for t in page["turns"] if t["round"] > 0]
    assert all(t["sees"] for t in later)


def test_hostile_text_stays_data(tmp_path) -> None:
    run, turn = hostile_run(tmp_path / "run")
    site = api.view([run], tmp_path / "site").parent
    for path in (site / "data").rglob("*.js"):
        text = path.read_bytes()
        assert text.isascii()
        for bad in (b"<", b">", b"\x00", b"\xe2\x80\xa8"):
            assert bad not in text, (path, bad)
    index = read_data(site, "index")["runs"][0]["debates"]
    row = next(r for r in index if r["question"] == turn.question)
    page = read_data(site, row["file"])
    hostile = next(t for t in page["turns"] if (t["round"], t["agent"]) == (1, 0))
    assert hostile["text"] == HOSTILE  # every character back, the lone surrogate too
    html = hostile["text_html"]
    assert "<img" not in html and "<script" not in html and "<b " not in html
    assert "<a" not in html and "href=" not in html  # the javascript: link is left as text
    assert "&lt;script&gt;" in html
    # Its formulas are escaped text in math spans, for KaTeX (trust off) to typeset.
    assert '<span class="math inline boxed">\\boxed{7}</span>' in html
    assert "<span class=\"math inline\">\\href{javascript:window.__pwned='href'}{x}</span>" in html
    assert '<span class="math display">&lt;img src=x' in html


def test_question_text_keeps_formulas_whole_and_escapes_the_rest(tmp_path) -> None:
    run, turn = hostile_run(tmp_path / "run", question=True)
    site = api.view([run], tmp_path / "site").parent
    row = next(
        r for r in read_data(site, "index")["runs"][0]["debates"] if r["question"] == turn.question
    )
    question = read_data(site, row["file"])["question"]
    assert question["text"] == LATEX
    assert question["text_html"] == text_html(LATEX)
    assert "&lt;b&gt;bold?&lt;/b&gt;" in question["text_html"]
    assert "This costs $5 and $6." in question["text_html"]  # dollars of money stay text


@pytest.mark.parametrize(
    ("text", "spans"),
    [
        ("$x_1 * y_2 * z$", [("inline", "x_1 * y_2 * z")]),  # no emphasis inside math
        ("$$\\{a\\}\\\\ b$$", [("display", "\\{a\\}\\\\ b")]),  # escapes kept
        ("so \\(a<b\\) and \\[c\\]", [("inline", "a&lt;b"), ("display", "c")]),
        ("I get \\boxed{\\frac{1}{2}}.", [("inline boxed", "\\boxed{\\frac{1}{2}}")]),
        ("$5 and $6, or \\$7.", []),
        ("`$a$` in code", []),
        ("$a$b$", [("inline", "a")]),
    ],
)
def test_markdown_keeps_formulas_whole(text: str, spans: list[tuple[str, str]]) -> None:
    import re

    html = render_markdown(text)
    found = re.findall(r'<span class="math ([a-z ]+)">(.*?)</span>', html)
    assert found == spans


def test_debates_are_listed_in_question_order(tmp_path) -> None:
    run = sim_run(tmp_path / "run", limit=12, agents=3, rounds=1, runs=2)
    site = api.view([run], tmp_path / "site").parent
    rows = read_data(site, "index")["runs"][0]["debates"]
    order = [(int(r["question"].split("-")[1]), r["seed_run"]) for r in rows]
    assert order == sorted(order) and order[2] == (1, 0) and order[-1] == (11, 1)
    assert sorted(r["done"] for r in rows) == list(range(24))  # completion order kept too


def test_a_round_marks_answers_apart_from_its_most_common(demo) -> None:
    _, site = demo
    seen_minority = False
    for row in read_data(site, "index")["runs"][0]["debates"]:
        page = read_data(site, row["file"])
        for r in range(page["rounds"] + 1):
            turns = [t for t in page["turns"] if t["round"] == r and t["answer"] is not None]
            sizes = {}
            for t in turns:
                sizes[t["group"]] = sizes.get(t["group"], 0) + 1
            # Group 0 is the most common answer, and answers of one group are alike.
            assert sizes[0] == max(sizes.values())
            for t in turns:
                mates = [u["answer"] for u in turns if u["group"] == t["group"]]
                assert all(float(a) == float(t["answer"]) for a in mates)
            top = sorted(sizes.values(), reverse=True)
            assert page["majority"][r] == (len(top) == 1 or top[0] > top[1])
            seen_minority |= page["majority"][r] and len(top) > 1
    assert seen_minority  # the test means something


@pytest.mark.slow
def test_alerts_are_the_runs_own(tmp_path, demo) -> None:
    import shutil

    run, _ = demo
    old = tmp_path / "old"
    shutil.copytree(run, old)
    metrics = json.loads((old / "metrics.json").read_text())
    metrics.pop("alerts", None)  # a folder written before alerts existed
    (old / "metrics.json").write_text(json.dumps(metrics))
    loud = tmp_path / "loud"
    shutil.copytree(run, loud)
    alerts = ["Most answers are unparsed: <b>check</b> the answer protocol."]
    (loud / "metrics.json").write_text(json.dumps({**metrics, "alerts": alerts}))
    site = api.view([old, loud], tmp_path / "site").parent
    runs = read_data(site, "index")["runs"]
    assert runs[0]["alerts"] == [] and runs[1]["alerts"] == alerts
    assert runs[0]["summary"] == runs[1]["summary"]  # the same numbers, alerts or none


def test_as_script_escapes_what_ends_a_script() -> None:
    text = as_script("x", {"t": "</script><!-- \u2028\u2029\x00\ud800 é"})
    assert text.isascii() and "<" not in text and ">" not in text
    assert json.loads(text[len("MADV.loaded.apply(null, ") : -3]) == [
        "x",
        {"t": "</script><!-- \u2028\u2029\x00\ud800 é"},
    ]


def test_markdown_keeps_only_http_links() -> None:
    html = render_markdown(
        "[a](https://example.org) [b](javascript:alert(1)) [c](data:text/html,x)"
    )
    assert 'href="https://example.org"' in html
    assert "javascript:" not in html.split("[b]")[0] and html.count("href") == 1
    assert render_markdown("![x](https://example.org/x.png)").count("<img") == 0


def test_out_folder_of_other_files_is_refused(tmp_path, demo) -> None:
    run, _ = demo
    (tmp_path / "mine.txt").write_text("keep me")
    with pytest.raises(ViewError, match="not written by mad-eval view"):
        api.view([run], tmp_path)
    assert (tmp_path / "mine.txt").read_text() == "keep me"


@pytest.mark.slow
def test_cli_errors_are_one_sentence(tmp_path, demo) -> None:
    run, _ = demo
    missing = mad_eval("view", str(tmp_path / "nope"), cwd=tmp_path)
    assert missing.returncode == 2 and "is not a folder" in missing.stderr
    assert "Traceback" not in missing.stderr
    not_run = mad_eval("view", str(tmp_path), cwd=tmp_path)
    assert not_run.returncode == 2 and "not a run directory" in not_run.stderr
    (tmp_path / "file").write_text("x")
    blocked = mad_eval("view", str(run), "--out", str(tmp_path / "file" / "site"), cwd=tmp_path)
    assert blocked.returncode == 2 and "cannot write the site" in blocked.stderr
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        busy = mad_eval("view", str(run), "--out", "s", "--serve", str(port), cwd=tmp_path)
    assert busy.returncode == 2 and f"cannot serve on 127.0.0.1:{port}" in busy.stderr
    made = mad_eval("view", str(run), "--out", "s", cwd=tmp_path)
    assert made.returncode == 0 and (tmp_path / "s" / "index.html").exists()


@pytest.mark.slow
def test_judged_run_carries_verdicts_and_critique(tmp_path) -> None:
    run = sim_run(tmp_path / "run", limit=4, agents=3, rounds=1)
    api.judge(run, "sim-judge")
    site = api.view([run], tmp_path / "site").parent
    index = read_data(site, "index")["runs"][0]
    assert index["judged"]
    row = index["debates"][0]
    page = read_data(site, row["file"])
    judged = [t for t in page["turns"] if t["verdict"] and t["verdict"]["total"] is not None]
    assert judged and all(t["round"] == 1 for t in judged)
    totals = [t["verdict"]["total"] for t in judged]
    assert row["critique_min"] == min(totals)
    assert row["critique"] == pytest.approx(sum(totals) / len(totals))
    assert set(judged[0]["verdict"]["scores"]) == set(JUDGE_CRITERIA)  # the four scores


def test_the_site_carries_katex_and_every_font_its_stylesheet_names(demo) -> None:
    import re

    _, site = demo
    css = (site / "katex" / "katex.min.css").read_text(encoding="utf-8")
    fonts = set(re.findall(r"url\((fonts/[^)]+\.woff2)\)", css))
    assert len(fonts) == 20 and all((site / "katex" / font).is_file() for font in fonts)
    assert (site / "katex" / "katex.min.js").is_file() and (site / "katex" / "LICENSE").is_file()
    page = (site / "index.html").read_text(encoding="utf-8")
    assert re.findall(r'(?:src|href)="([^"]+)"', page) == [
        "katex/katex.min.css",
        "style.css",
        "#/",
        "katex/katex.min.js",
        "app.js",
    ]  # nothing from anywhere but the site's folder


def test_markdown_tables_render_with_their_formulas() -> None:
    html = render_markdown("| x | y |\n|---|---|\n| $a^2$ | <b>b</b> |")
    assert "<table>" in html and '<td><span class="math inline">a^2</span></td>' in html
    assert "<td>&lt;b&gt;b&lt;/b&gt;</td>" in html


@pytest.mark.slow
def test_a_folder_of_runs_shows_every_run_below_it(tmp_path) -> None:
    for name in ("b", "a"):
        sim_run(tmp_path / "results" / "exp" / name, limit=3, agents=2, rounds=1)
    index = api.view([tmp_path / "results"], tmp_path / "site")
    runs = read_data(index.parent, "index")["runs"]
    assert [Path(r["folder"]).name for r in runs] == ["a", "b"]  # every run, in name order
    result = mad_eval("view", "results", "--out", "v", cwd=tmp_path)
    assert result.returncode == 0 and "(2 runs)" in result.stdout


def test_a_vote_a_tie_decided_carries_its_tie(demo) -> None:
    from collections import Counter

    from mad_eval.store.folder import RunStore

    run, site = demo
    rows = read_data(site, "index")["runs"][0]["debates"]
    turns: dict[tuple, list] = {}
    for t in RunStore(run).turns():
        turns.setdefault((t.run, t.question, t.round), []).append(t)
    tied = [0, 0, 0]
    for row in rows:
        page = read_data(site, row["file"])
        assert page["ties"] == row["ties"]
        for r, tie in enumerate(row["ties"]):
            live = turns[(row["seed_run"], row["question"], r)]
            sizes = Counter(t.answer_class for t in live if not t.failed and t.answer is not None)
            top = sorted(sizes.values(), reverse=True)
            assert (tie is not None) == (len(top) > 1 and top[0] == top[1]), (row["key"], r)
            if tie is not None:
                tied[r] += 1
                assert tie.startswith(f"tie {top[0]}×")
                assert tie.endswith(f" → {row['answers'][r]} by seeded draw")
    assert all(tied)  # the test means something
    metrics = json.loads((run / "metrics.json").read_text())
    for r, n in enumerate(tied):  # metrics.json counts the same ties (2 runs of 30 questions)
        assert metrics["rounds"][r]["ties"] == pytest.approx(100 * n / len(rows))


def test_the_console_marks_tied_rounds_with_a_footnote(demo) -> None:
    from rich.console import Console

    from mad_eval.reporting.console import metrics_view

    run, _ = demo
    metrics = json.loads((run / "metrics.json").read_text())
    console = Console(width=200, record=True)
    console.print(metrics_view(metrics, "run"))
    text = " ".join(console.export_text().split())  # the caption wraps at the table's width
    shares = ", ".join(f"round {r['round']} {r['ties']:.1f}%" for r in metrics["rounds"])
    assert f"seeded draw decided this share of the round's votes: {shares}." in text
    for row in metrics["rounds"]:
        row["ties"] = 0.0 if row["round"] else row["ties"]
    console.print(metrics_view(metrics, "run"))
    marked = " † │"  # a vote cell's mark, not the footnote's
    assert text.count(marked) == 3 and console.export_text().count(marked) == 1


@pytest.mark.slow
def test_paired_votes_are_the_runs_own_with_mcnemars_exact_p(tmp_path, demo) -> None:
    from viewer_helpers import votes_after_debate

    from mad_eval.measure.mcnemar import mcnemar_p

    assert mcnemar_p(10, 3) == mcnemar_p(3, 10) == pytest.approx(2 * 378 / 2**13)
    assert mcnemar_p(0, 6) == pytest.approx(1 / 32) and mcnemar_p(4, 4) == 1.0
    assert mcnemar_p(0, 0) is None
    run, _ = demo
    other = sim_run(tmp_path / "b", model="sim:p0=0.6,skill=0.6", limit=30, agents=5, rounds=2)
    site = api.view([run, other], tmp_path / "site").parent
    paired = read_data(site, "index")["pairs"]["0,1"]["debate"]
    a, b = votes_after_debate(run), votes_after_debate(other)
    shared = [k for k in a if k in b and a[k] is not None and b[k] is not None]
    cells = {
        "both_right": sum(a[k] and b[k] for k in shared),
        "a_only": sum(a[k] and not b[k] for k in shared),
        "b_only": sum(b[k] and not a[k] for k in shared),
        "both_wrong": sum(not a[k] and not b[k] for k in shared),
    }
    assert len(shared) == 30 and {k: paired[k] for k in cells} == cells
    assert paired["p"] == mcnemar_p(cells["a_only"], cells["b_only"])


@pytest.mark.slow
def test_view_never_replaces_a_site_of_other_runs_unasked(tmp_path) -> None:
    run = sim_run(tmp_path / "run", limit=3, agents=2, rounds=1)
    other = sim_run(tmp_path / "other", limit=3, agents=2, rounds=1)
    first = mad_eval("view", str(run), cwd=tmp_path)  # a folder named for its runs
    assert first.returncode == 0
    assert first.stdout.split() == ["Wrote", "results/view/run/index.html", "(1", "run)."]
    again = mad_eval("view", str(run), cwd=tmp_path)
    assert "it replaced the site of the same 1 run written there before." in again.stdout
    both = mad_eval("view", str(run), str(other), cwd=tmp_path)
    assert "Wrote results/view/run+other/index.html (2 runs)." in both.stdout
    refused = mad_eval("view", str(other), "--out", "results/view/run", cwd=tmp_path)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    said = " ".join(refused.stderr.split())
    assert "holds a site of 1 run (run); give another --out folder, or --force" in said
    assert read_data(tmp_path / "results/view/run", "index")["runs"][0]["folder"] == str(run)
    forced = mad_eval("view", str(other), "--out", "results/view/run", "--force", cwd=tmp_path)
    assert "it replaced a site of 1 run (run)." in " ".join(forced.stdout.split())
    with pytest.raises(ViewError, match="or force to replace it"):  # the API: its keyword
        api.view([run], tmp_path / "results/view/run")
    api.view([run], tmp_path / "results/view/run", force=True)
