"""The docs site read on a laptop: the built site in headless Chromium at 1280 px, where no
code block, console output or table of the tutorial, the how-to pages or the architecture page
hides text behind a horizontal scroll bar, wraps a line it shows as written, or has its copy
button over text. Skipped where /usr/bin/chromium is missing; CI installs it (.ci/run)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from test_docs_site import build_site
from viewer_helpers import chromium, needs_chromium

ROOT = Path(__file__).resolve().parents[1]
WIDTH = 1280
SHOWN = ".md-content pre > code, .md-content table"

pytestmark = [pytest.mark.slow, needs_chromium]

# What is wrong on the open page, one entry per element: its kind, its first text, the fault.
FAULTS = r"""
const faults = [];
const first = (el) => el.textContent.trim().replace(/\s+/g, ' ').slice(0, 60);
const fault = (kind, el, what) => faults.push([kind, el ? first(el) : '', what]);
const over = (el) => el.scrollWidth > el.clientWidth + 1;
const sizes = (el) => `(${el.scrollWidth} px in ${el.clientWidth})`;
const hits = (r, b) => r.right > b.left && r.left < b.right && r.bottom > b.top && r.top < b.bottom;
const root = document.documentElement;
if (over(root)) fault('page', null, `scrolls sideways ${sizes(root)}`);
for (const code of document.querySelectorAll('.md-content pre > code')) {
  if (over(code)) fault('code block', code, `scrolls ${sizes(code)}`);
  const style = getComputedStyle(code);
  const height = code.clientHeight - parseFloat(style.paddingTop)
    - parseFloat(style.paddingBottom);
  const shown = Math.round(height / parseFloat(style.lineHeight));
  const written = code.textContent.replace(/\n$/, '').split('\n').length;
  if (shown > written) fault('code block', code, `wraps (${written} lines shown as ${shown})`);
  const button = code.parentElement.querySelector('.md-code__nav');
  if (!button) continue;
  const b = button.getBoundingClientRect();
  const walker = document.createTreeWalker(code, NodeFilter.SHOW_TEXT);
  let covered = null;
  while (!covered && walker.nextNode()) {
    const node = walker.currentNode;
    if (!node.textContent.trim()) continue;
    const range = document.createRange();
    range.selectNodeContents(node);
    if ([...range.getClientRects()].some((r) => hits(r, b))) covered = first(node);
  }
  if (covered) fault('code block', code, `its copy button covers "${covered.slice(0, 30)}"`);
}
for (const table of document.querySelectorAll('.md-content table')) {
  const box = [table, table.closest('.md-typeset__scrollwrap')].find((el) => el && over(el));
  if (box) fault('table', table, `scrolls ${sizes(box)}`);
}
return faults;
"""


def pages() -> list[str]:
    """The tutorial, every how-to page and the architecture, as paths in the built site."""
    docs = ROOT / "docs"
    how_to = sorted((docs / "how-to").rglob("*.md"))
    found = [docs / "tutorial.md", *how_to, docs / "architecture.md"]
    return [str(page.relative_to(docs).with_suffix("") / "index.html") for page in found]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("docs-width") / "site"
    done = build_site(out)
    assert done.returncode == 0, done.stdout + done.stderr
    return out


def test_no_code_block_or_table_scrolls_at_a_laptops_width(
    site: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    pytest.importorskip("selenium.webdriver")
    profile = tmp_path_factory.mktemp("chromium-profile")
    driver = chromium(profile, window=f"{WIDTH},900")
    try:
        assert driver.execute_script("return window.innerWidth") == WIDTH
        faults, seen = [], 0
        for page in pages():
            driver.get((site / page).as_uri())
            found = driver.execute_script(FAULTS)
            seen += driver.execute_script(f"return document.querySelectorAll('{SHOWN}').length")
            faults += [f"{page}: {kind} {text!r} {fault}" for kind, text, fault in found]
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)
    assert seen > 50  # the pages were there and drawn
    assert not faults, f"at {WIDTH} px:\n" + "\n".join(faults)
