"""The docs: the README stays short, its relative links name files of the repository and its
Python runs as written; the site builds with `mkdocs build --strict` (a broken link, anchor or
nav entry fails it); the extension pages show the examples test_extension_examples.py runs."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def relative_links(markdown: str) -> list[str]:
    """The targets of a Markdown text's links that are paths in the repository (no scheme,
    no mail address, no bare anchor), without their anchors; code blocks are skipped."""
    prose = re.sub(r"```.*?```", "", markdown, flags=re.DOTALL)
    found = []
    for target in LINK.findall(prose):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            continue
        found.append(target.split("#", 1)[0])
    return found


def test_relative_links_are_found_skipping_urls_anchors_and_code() -> None:
    text = (
        "[a](docs/x.md#part) [b](https://example.org/y.md) [c](#here) [d](mailto:a@b.c)\n"
        "```\n[e](not/a/link.md)\n```\n![f](docs/rounds.png)"
    )
    assert relative_links(text) == ["docs/x.md", "docs/rounds.png"]


def test_every_relative_link_of_the_readme_names_a_file_of_the_repository() -> None:
    links = relative_links((ROOT / "README.md").read_text(encoding="utf-8"))
    assert len(links) > 20  # the table of links, the figure, conformance/ and perf/
    missing = [link for link in links if not (ROOT / link).is_file()]
    assert not missing, f"README.md links to files that do not exist: {missing}"


def test_the_readme_stays_short() -> None:
    """What a newcomer needs first; the reference lives in docs/."""
    assert len((ROOT / "README.md").read_text(encoding="utf-8").splitlines()) <= 250


@pytest.mark.slow
def test_the_readmes_python_runs_as_written(tmp_path: Path) -> None:
    """The README's Python block, run as a script in a fresh folder: it needs no server, no
    network and no data, and writes what its comments say."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    [code] = re.findall(r"```python\n(.*?)```", readme, flags=re.DOTALL)
    (tmp_path / "readme.py").write_text(code, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "readme.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
        timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("Maj "), done.stdout
    assert "| Method |" in done.stdout  # the table, as text
    for written in ("results/sim-debate/metrics.json", "results/sim-single/metrics.json",
                    "results/plots/rounds.png", "results/view/sim-debate/index.html"):  # fmt: skip
        assert (tmp_path / written).is_file(), written


def test_the_extension_pages_show_the_tested_examples() -> None:
    """The code the extension pages show is what test_extension_examples.py builds."""
    pages = ROOT / "docs" / "how-to" / "extend"
    shown = {
        "benchmark.md": ['IntegerKind("integer"', '"final-line"', 'kind = "math"'],
        "protocol.md": ["class Star(Protocol)", 'name = "first-agent"'],
        "metric.md": [
            'FAMILY = Family(name="unparsed"',
            'percent(f"unparsed{r}")',
            'f"round{r}.hub_accuracy"',
        ],
    }
    for page, snippets in shown.items():
        text = (pages / page).read_text(encoding="utf-8")
        for snippet in snippets:
            assert snippet in text, f"{page} lacks {snippet!r}"


def build_site(out: Path) -> subprocess.CompletedProcess[str]:
    """`mkdocs build --strict` into `out`, as CI runs it."""
    pytest.importorskip("mkdocs", reason="the [test] extra brings mkdocs and its theme")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}  # material's notice is no warning
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.mark.slow
def test_the_site_builds_strictly_without_warnings(tmp_path: Path) -> None:
    """`mkdocs build --strict`, as CI runs it: any warning (a broken link or anchor, a page
    missing from the nav or a nav entry without its page) fails the build."""
    done = build_site(tmp_path / "site")
    log = done.stdout + done.stderr
    assert done.returncode == 0, log
    assert "WARNING" not in log, log
    pages = ["index.html", "tutorial/index.html", "reference/options/index.html"]
    for page in [*pages, "how-to/serve-a-checkpoint/index.html", "architecture/index.html"]:
        assert (tmp_path / "site" / page).is_file(), page
