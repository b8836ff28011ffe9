"""What `mad-eval view` costs on a 10,000-turn run: the site's build time and its size, and
how long headless Chromium takes to show the overview and a debate from file:// (until the
page has drawn, app.js's data-ready), the median of repeated opens.

    .venv/bin/python perf/viewer.py                       # 100 questions x 5 runs, N=5, T=3
    .venv/bin/python perf/viewer.py --agents 10 --rounds 9 --runs 1   # fewer, larger debates

Needs /usr/bin/chromium and /usr/bin/chromedriver (apt-get install chromium chromium-driver).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import mad_eval
from mad_eval.store.folder import RunStore


def opened(driver, url: str) -> float:
    driver.get("about:blank")  # a fresh page each time, not a hash change of the last one
    start = time.perf_counter()
    driver.get(url)
    while not driver.execute_script("return document.body.getAttribute('data-ready')"):
        time.sleep(0.005)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--agents", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from viewer_helpers import chromium  # one way to start the browser, the tests' own

    with tempfile.TemporaryDirectory(prefix="viewer-bench-") as scratch:
        root = Path(scratch)
        run = root / "run"
        mad_eval.run(
            model="sim:p0=0.5,skill=0.3",
            benchmark="arith",
            agents=args.agents,
            rounds=args.rounds,
            runs=args.runs,
            out=run,
        )
        turns = len(RunStore(run).turns())
        start = time.perf_counter()
        index = mad_eval.view([run], root / "site")
        build = time.perf_counter() - start
        data = list((root / "site" / "data").rglob("*.js"))
        largest = max(p.stat().st_size for p in data if p.name != "index.js")
        print(
            f"{turns} turns: site built in {build:.2f} s, {len(data)} data files, "
            f"index {(index.parent / 'data' / 'index.js').stat().st_size / 1e3:.0f} kB, "
            f"largest debate file {largest / 1e3:.0f} kB"
        )
        driver = chromium(root / "profile")
        try:
            url = index.resolve().as_uri()
            for what, route in (("overview", "#/"), ("a debate", "#/q/0/0")):
                times = [opened(driver, url + route) for _ in range(args.repeat)]
                print(
                    f"open {what}: median {statistics.median(times):.3f} s, "
                    f"max {max(times):.3f} s ({args.repeat} opens)"
                )
        finally:
            driver.quit()


if __name__ == "__main__":
    main()
