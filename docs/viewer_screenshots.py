"""The docs' screenshots of `mad-eval view` (viewer-overview.png, viewer-debate.png,
viewer-compare.png), taken with headless Chromium from the offline demo. Run the demo in a
scratch folder, then this script on its results, from anywhere:

    cd "$(mktemp -d)" && cp -r /path/to/mad-eval/experiments .
    mad-eval experiment run experiments/offline_demo.toml
    python /path/to/mad-eval/docs/viewer_screenshots.py results/offline_demo /path/to/mad-eval/docs

The debate shot is a debate the vote got right by debating after a tie decided its first
vote (the vote row's tie mark), its round 1 picked (the five replies side by side) at an
agent that disagreed with the round's most common answer, the legend open. The compare shot
is the two runs side by side: their paired votes with McNemar's p, and the debates where
they differ.
Both are saved with 256 colors, to keep them small.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

from PIL import Image

import mad_eval

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from viewer_helpers import chromium


def ready(driver) -> None:
    while not driver.execute_script("return document.body.getAttribute('data-ready')"):
        time.sleep(0.02)


def save(driver, path: Path) -> None:
    driver.save_screenshot(str(path))
    Image.open(path).convert("RGB").quantize(256).save(path, optimize=True)


def main(demo: Path, docs: Path) -> None:
    runs = [demo / "arith-decentralized-n5-t2-Base", demo / "arith-decentralized-n5-t2-SDRL"]
    with tempfile.TemporaryDirectory(prefix="viewer-shots-") as scratch:
        index = mad_eval.view(runs, Path(scratch) / "site")
        rows = read(index.parent, "index")["runs"][1]["debates"]
        # A debate the vote got right by debating, a tie deciding its first vote, whose
        # round 1 has a most common answer and a dissent: that round's replies side by side.
        row = next(
            r
            for r in rows
            if "w2r" in r["tags"] and r["ties"][0] and dissent(read(index.parent, r["file"]), 1)
        )
        driver = chromium(Path(scratch) / "profile", window="1280,860")
        try:
            driver.get(index.resolve().as_uri() + "#/run/1")
            ready(driver)
            save(driver, docs / "viewer-overview.png")
            driver.set_window_size(1280, 1040)
            driver.get(index.resolve().as_uri() + "#/q/" + row["file"])
            ready(driver)
            agent = dissent(read(index.parent, row["file"]), 1)[0]
            driver.find_element("id", f"cell-{agent}-1").click()
            driver.find_element("css selector", "#legend summary").click()
            driver.execute_script("window.scrollTo(0, 0)")
            save(driver, docs / "viewer-debate.png")
            driver.set_window_size(1280, 900)
            driver.get(index.resolve().as_uri() + "#/compare")
            ready(driver)
            save(driver, docs / "viewer-compare.png")
        finally:
            driver.quit()


def read(site: Path, name: str) -> dict:
    """A data file of the site, its value."""
    text = (site / "data" / f"{name}.js").read_text()
    return json.loads(text[text.index("[") : text.rindex("]") + 1])[1]


def dissent(page: dict, round_: int) -> list[int]:
    """The agents whose answer in the round differs from its most common one."""
    if not page["majority"][round_]:
        return []
    return [t["agent"] for t in page["turns"] if t["round"] == round_ and (t["group"] or 0) > 0]


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
