"""The README's screenshots of `mad-eval view`, taken with headless Chromium from the
offline demo (run it first, in a scratch folder):

    mad-eval experiment run experiments/offline_demo.toml
    python docs/viewer_screenshots.py results/offline_demo docs/

Writes viewer-overview.png and viewer-debate.png (256 colors, to keep them small).
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
        text = (index.parent / "data" / "index.js").read_text()
        rows = json.loads(text[text.index("[") : text.rindex("]") + 1])[1]["runs"][1]["debates"]
        row = next(r for r in rows if "w2r" in r["tags"] and "split" not in r["tags"])
        driver = chromium(Path(scratch) / "profile", window="1280,860")
        try:
            driver.get(index.resolve().as_uri() + "#/run/1")
            ready(driver)
            save(driver, docs / "viewer-overview.png")
            driver.get(index.resolve().as_uri() + "#/q/" + row["file"])
            ready(driver)
            driver.find_element("id", "cell-1-1").click()
            save(driver, docs / "viewer-debate.png")
        finally:
            driver.quit()


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
