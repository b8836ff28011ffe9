"""Links planted where mad-eval writes (a cloned repository, a shared run folder or site):
every file mad-eval creates, appends to or rewrites is opened without following a link at
its name, in a folder whose mad-eval-chosen name is no link either, and a file appended to
in place that has other names (a hard link) is refused too. Each case plants a link to a
file outside whose bytes must survive, and expects one sentence naming the link."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import textwrap
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest
from serving_helpers import checkpoint, install_stand_in

import mad_eval
from mad_eval.backends.cache import RequestCache
from mad_eval.cli import reference
from mad_eval.errors import UserError
from mad_eval.serving import parse_serve
from mad_eval.serving.launch import LocalServer
from mad_eval.training import write_rows

KEEP = b"the victim's own bytes\n"
QUICK_START = dict(protocol="decentralized", agents=5, rounds=3)  # README's quick start
RUN = dict(agents=2, rounds=1, limit=3)


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("links") / "run"
    mad_eval.run(out=root, **RUN)
    return root


@pytest.fixture()
def run_dir(finished: Path, tmp_path: Path) -> Path:
    """A copy of a finished simulated run, for a case to plant its link in."""
    return Path(shutil.copytree(finished, tmp_path / "run"))


@pytest.fixture()
def victim(tmp_path: Path) -> Path:
    """A file outside every folder mad-eval writes, which no command may change."""
    path = tmp_path / "outside" / "victim.txt"
    path.parent.mkdir()
    path.write_bytes(KEEP)
    return path


def plant(link: Path, target: Path) -> Path:
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(target)
    return link


def refused(link: Path, says: str = "is a symbolic link") -> AbstractContextManager[Any]:
    """The one sentence that names `link` and says what to do (remove it)."""
    return pytest.raises(
        UserError, match=rf"^{re.escape(str(link))} {says}.*; (remove|make) [^.]*\.$"
    )


# --- a run's own files: .lock, turns.jsonl, judge.jsonl, superseded/ ----------------------


def test_the_readme_quick_start_in_a_clone_shipping_a_lock_link_writes_nothing_through_it(
    tmp_path, monkeypatch, victim
):
    monkeypatch.chdir(tmp_path)
    link = plant(Path("results/arith-decentralized-n5-t3-sim/.lock"), victim)
    with refused(link):
        mad_eval.run(**QUICK_START)
    assert victim.read_bytes() == KEEP
    assert not Path("results/arith-decentralized-n5-t3-sim/manifest.json").exists()


def test_judge_refuses_a_lock_link_in_the_run_folder(run_dir, victim):
    (run_dir / ".lock").unlink(missing_ok=True)
    link = plant(run_dir / ".lock", victim)
    with refused(link):
        mad_eval.judge(run_dir, "sim-judge")
    assert victim.read_bytes() == KEEP and not (run_dir / "judge.jsonl").exists()


def test_a_lock_with_another_name_elsewhere_is_refused(run_dir, victim):
    """A hard link: truncating .lock to write its holder would empty the other name too."""
    (run_dir / ".lock").unlink(missing_ok=True)
    os.link(victim, run_dir / ".lock")
    with refused(run_dir / ".lock", "is a hard link"):
        mad_eval.run(out=run_dir, **RUN)
    assert victim.read_bytes() == KEEP


def test_a_dangling_turns_link_gets_no_turn(tmp_path):
    outside = tmp_path / "elsewhere.jsonl"
    link = plant(tmp_path / "run" / "turns.jsonl", outside)
    with refused(link):
        mad_eval.run(out=tmp_path / "run", **RUN)
    assert not outside.exists()


def test_a_resumed_runs_turns_link_is_neither_cut_nor_appended_to(run_dir, victim):
    """A partial last line is cut off on resume: through a link it would cut the victim."""
    victim.write_bytes(KEEP + b'{"run": 0, "quest')
    kept = victim.read_bytes()
    (run_dir / "turns.jsonl").unlink()
    link = plant(run_dir / "turns.jsonl", victim)
    with refused(link):
        mad_eval.run(out=run_dir, **RUN)
    assert victim.read_bytes() == kept


def test_a_turns_file_with_another_name_is_refused(run_dir, tmp_path):
    """A hard link: the turns a resume appends would land under the other name too."""
    turns = run_dir / "turns.jsonl"
    turns.write_bytes(b"".join(turns.read_bytes().splitlines(keepends=True)[:-2]))
    other = tmp_path / "other-name.jsonl"
    os.link(turns, other)
    before = other.read_bytes()
    with refused(turns, "is a hard link"):
        mad_eval.run(out=run_dir, **RUN)
    assert other.read_bytes() == before


def test_a_dangling_judge_log_link_gets_no_verdict(run_dir, tmp_path):
    outside = tmp_path / "verdicts.jsonl"
    link = plant(run_dir / "judge.jsonl", outside)
    with refused(link):
        mad_eval.judge(run_dir, "sim-judge")
    assert not outside.exists()


def _fail_first_turn(turns: Path) -> None:
    lines = turns.read_text().splitlines()
    first = json.loads(lines[0]) | {"error": "APITimeoutError: gone", "text": "", "answer": None}
    turns.write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n")


@pytest.mark.parametrize("planted", ["folder", "file"])
def test_retry_failed_moves_no_record_through_a_superseded_link(run_dir, tmp_path, planted):
    _fail_first_turn(run_dir / "turns.jsonl")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "turns.jsonl").write_bytes(KEEP)
    if planted == "folder":
        link = plant(run_dir / "superseded", outside)
    else:
        link = plant(run_dir / "superseded" / "turns.jsonl", outside / "turns.jsonl")
    with refused(link):
        mad_eval.run(out=run_dir, retry_failed=True, **RUN)
    assert sorted(os.listdir(outside)) == ["turns.jsonl"]
    assert (outside / "turns.jsonl").read_bytes() == KEEP


# --- run folders: a name mad-eval chose is no link; one the caller names may be ----------


def test_a_default_run_folder_that_is_a_link_is_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    link = plant(Path("results/arith-decentralized-n5-t3-sim"), outside)
    with refused(link):
        mad_eval.run(**QUICK_START)
    assert not any(outside.iterdir())


def test_a_run_folder_the_caller_names_may_be_a_link(tmp_path):
    """--out given on the command line is the user's: a run kept on another disk."""
    disk = tmp_path / "scratch"
    disk.mkdir()
    link = plant(tmp_path / "run", disk)
    mad_eval.run(out=link, **RUN)
    assert (disk / "turns.jsonl").is_file() and (disk / "metrics.json").is_file()


# --- the viewer's site --------------------------------------------------------------------


def site_of(tmp_path: Path, run_dir: Path) -> Path:
    """A site written before (its marker is there), for a link to be planted in."""
    return mad_eval.view([run_dir], tmp_path / "site").parent


def test_a_planted_app_js_does_not_replace_another_runs_turns(run_dir, finished, tmp_path):
    """The attack seen: one planted app.js in a site folder replaced a run's turns.jsonl."""
    site = site_of(tmp_path, run_dir)
    other = Path(shutil.copytree(finished, tmp_path / "other"))
    turns = (other / "turns.jsonl").read_bytes()
    (site / "app.js").unlink()
    link = plant(site / "app.js", other / "turns.jsonl")
    with refused(link):
        mad_eval.view([run_dir], site)
    assert (other / "turns.jsonl").read_bytes() == turns


@pytest.mark.parametrize("name", [".mad-eval-view", "index.html", "style.css"])
def test_no_file_of_the_site_is_written_through_a_link(run_dir, tmp_path, victim, name):
    site = site_of(tmp_path, run_dir)
    (site / name).unlink()
    link = plant(site / name, victim)
    with refused(link):
        mad_eval.view([run_dir], site)
    assert victim.read_bytes() == KEEP


@pytest.mark.parametrize("name", ["data", "katex", "katex/fonts"])
def test_no_folder_of_the_site_is_a_link(run_dir, tmp_path, name):
    site = site_of(tmp_path, run_dir)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_bytes(KEEP)
    shutil.rmtree(site / name)
    link = plant(site / name, outside)
    with refused(link):
        mad_eval.view([run_dir], site)
    assert sorted(os.listdir(outside)) == ["keep.txt"]
    assert (outside / "keep.txt").read_bytes() == KEEP


# --- tables, figures, training rows, the request cache, a server's log -------------------


def test_a_table_out_that_is_a_link_is_refused(run_dir, tmp_path, victim):
    link = plant(tmp_path / "paper" / "table.md", victim)
    with refused(link):
        mad_eval.table([run_dir], out=link)
    assert victim.read_bytes() == KEEP


def test_no_figure_is_written_through_a_link(run_dir, tmp_path, victim):
    link = plant(tmp_path / "plots" / "rounds.png", victim)
    with refused(link):
        mad_eval.plot([run_dir], out=tmp_path / "plots", replicates=200)
    assert victim.read_bytes() == KEEP


def test_training_rows_are_never_written_through_a_link_at_a_temporary_name(tmp_path, victim):
    """The rows went to OUT.tmp, then renamed: a link planted there took them outside."""
    plant(tmp_path / "pairs.jsonl.tmp", victim)
    write_rows([{"prompt": "x"}], tmp_path / "pairs.jsonl")
    assert victim.read_bytes() == KEEP
    assert json.loads((tmp_path / "pairs.jsonl").read_text()) == {"prompt": "x"}
    link = plant(tmp_path / "rows.jsonl", victim)
    with refused(link):
        write_rows([{"prompt": "x"}], link)


@pytest.mark.parametrize("suffix", ["", "-journal", "-wal"])
def test_a_cache_or_its_sqlite_companions_that_are_links_are_refused(tmp_path, suffix):
    outside = tmp_path / "outside.db"
    outside.write_bytes(b"")
    link = plant(tmp_path / f"cache.sqlite{suffix}", outside)
    with refused(link):
        RequestCache(tmp_path / "cache.sqlite").close()
    assert outside.read_bytes() == b""


def test_a_cache_with_another_name_is_refused(tmp_path):
    cache = tmp_path / "cache.sqlite"
    RequestCache(cache).close()
    os.link(cache, tmp_path / "elsewhere.sqlite")
    with refused(cache, "is a hard link"):
        RequestCache(cache)


def test_a_servers_log_is_not_appended_through_a_link(tmp_path, monkeypatch, victim):
    for name, value in install_stand_in(tmp_path).items():
        monkeypatch.setenv(name, value)
    spec = parse_serve(f"serve:{checkpoint(tmp_path / 'ckpts' / 'm')}")
    link = plant(tmp_path / "run" / "server-m-0.log", victim)

    async def start() -> None:
        server = LocalServer(spec, [0], link, start_timeout=60, grace=5)
        try:
            with refused(link):
                await server.start()
        finally:
            await server.stop()

    asyncio.run(start())
    assert victim.read_bytes() == KEEP


def test_the_options_page_is_not_written_through_a_link(tmp_path, victim):
    link = plant(tmp_path / "options.md", victim)
    with refused(link):
        reference.main([str(link)])
    assert victim.read_bytes() == KEEP


# --- an experiment's folder: cells, tables, figures ---------------------------------------

EXPERIMENT = """
[experiment]
out = "out"

[settings]
limit = 2
runs = 1
rounds = 1

[models]
weak = "sim:p0=0.4"

[grids.main]
benchmarks = ["arith"]
agents = [2]

[[tables]]
name = "main"

[[figures]]
name = "fig"
"""
CELL = "arith-decentralized-n2-t1-weak"


@pytest.fixture(scope="module")
def experiment(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An experiment whose cell has run, without its tables."""
    root = tmp_path_factory.mktemp("experiment")
    path = root / "exp.toml"
    path.write_text(textwrap.dedent(EXPERIMENT))
    here = Path.cwd()
    os.chdir(root)  # the file's out = "out" is the working directory's
    try:
        mad_eval.experiment(path)
    finally:
        os.chdir(here)
    return root


@pytest.fixture()
def copied(experiment: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = Path(shutil.copytree(experiment, tmp_path / "exp"))
    monkeypatch.chdir(root)
    return root / "exp.toml"


@pytest.mark.parametrize("where", ["figures", "figures/fig", "tables"])
def test_no_table_or_figure_lands_outside_the_experiment_through_a_folder_link(
    copied, tmp_path, where
):
    outside = tmp_path / "outside"
    outside.mkdir()
    plant(copied.parent / "out" / where, outside)
    with refused(Path("out", where)):
        mad_eval.experiment_tables(copied, replicates=200)
    assert not any(outside.iterdir())


def test_no_figure_of_an_experiment_is_written_through_a_link(copied, victim):
    plant(copied.parent / "out" / "figures" / "fig" / "rounds.png", victim)
    with refused(Path("out/figures/fig/rounds.png")):
        mad_eval.experiment_tables(copied, replicates=200)
    assert victim.read_bytes() == KEEP


def test_an_experiment_cell_folder_that_is_a_link_is_refused(copied, tmp_path):
    outside = tmp_path / "outside"
    shutil.move(copied.parent / "out" / CELL, outside)
    before = sorted(os.listdir(outside))
    plant(copied.parent / "out" / CELL, outside)
    with refused(Path("out", CELL)):
        mad_eval.experiment(copied)
    assert sorted(os.listdir(outside)) == before
