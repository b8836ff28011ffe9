"""The run folder as an interface: RunStore's methods are what every reader outside store/
uses, each file's name is spelled once, and a folder written by an older version reads in
today's shape (store/upgrade.py)."""

from __future__ import annotations

import ast
import copy
import json
from pathlib import Path

import pytest
from factories import sim_run

from mad_eval.store import names
from mad_eval.store.folder import RunStore
from mad_eval.store.manifest import SCHEMA_VERSION, RunManifest
from mad_eval.store.upgrade import METRICS_VERSION, MetricsVersionError, upgrade_manifest

PACKAGE = Path(__file__).resolve().parents[1] / "mad_eval"
GOLDEN = Path(__file__).parent / "golden" / "tables"


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return sim_run(tmp_path_factory.mktemp("store") / "r", limit=3, agents=3, rounds=1)


def test_a_run_folder_is_read_through_its_methods(run: Path) -> None:
    store = RunStore(run)
    assert RunStore.holds_run(run) and not RunStore.holds_run(run.parent)
    manifest = store.manifest()
    questions, golds = store.questions(), store.golds()
    assert questions is not None and golds == {q: questions[q].gold for q in questions}
    assert list(golds) == list(manifest.benchmark.questions)
    turns = store.turns()
    assert len(turns) == 3 * 3 * 2 and store.has_turns()
    index = store.index()
    assert sorted(index) == sorted(t.key for t in turns)
    assert all(index[t.key] == t for t in turns)
    debates = store.debates(store.shape(manifest))
    assert debates.count == 3 and debates.runs == [0]
    assert sorted(t.key for d in debates.each for t in d) == sorted(index)
    assert store.verdicts() == []  # never judged
    assert store.size() == (run / names.TURNS_FILE).stat().st_size
    metrics = store.metrics()
    assert metrics is not None and metrics["schema_version"] == METRICS_VERSION
    assert store.alerts() == metrics["alerts"]


def test_an_empty_folder_holds_nothing(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    assert not store.has_turns() and store.size() == 0 and len(store.index()) == 0
    assert store.questions() is None and store.metrics() is None and store.alerts() is None


def test_metrics_json_reads_in_todays_shape_and_a_newer_one_is_refused(run, tmp_path) -> None:
    folder = tmp_path / "old"
    folder.mkdir()
    store = RunStore(folder)
    metrics = json.loads((run / names.METRICS_FILE).read_text())
    written = {k: v for k, v in metrics.items() if k not in ("schema_version", "alerts")}
    (folder / names.METRICS_FILE).write_text(json.dumps(written))  # before both existed
    assert store.metrics() == written
    assert store.alerts() is None  # the viewer says so with the recomputed ones
    (folder / names.METRICS_FILE).write_text(
        json.dumps({**metrics, "schema_version": METRICS_VERSION + 1})
    )
    with pytest.raises(MetricsVersionError, match=f"schema_version {METRICS_VERSION + 1}"):
        store.metrics()
    assert store.alerts() is None  # a newer layout is not read
    (folder / names.METRICS_FILE).write_text(json.dumps({**metrics, "alerts": ["a", " ", 3]}))
    assert store.alerts() == ["a"]  # one sentence each, nothing else


def test_a_version_1_manifest_upgrades_to_every_key_of_todays(run: Path) -> None:
    old = json.loads((GOLDEN / "alpha" / names.MANIFEST_FILE).read_text())
    kept = copy.deepcopy(old)
    upgraded = upgrade_manifest(old, GOLDEN / "alpha")
    assert old == kept  # what was read is not changed
    today = json.loads((run / names.MANIFEST_FILE).read_text())
    for section in ("benchmark", "protocol", "prompt"):
        assert set(today[section]) - {"orders"} <= set(upgraded[section]), section
    assert set(today) - {"schema_version"} <= set(upgraded)
    assert upgraded["benchmark"]["kind"] == "math" and upgraded["team"] == []
    assert upgraded["prompt"]["style"] == old["config"]["prompt_style"]
    manifest = RunManifest.from_dict(upgraded, GOLDEN / "alpha")
    assert manifest == RunManifest.read(GOLDEN / "alpha")
    assert manifest.schema_version == 1  # the version it was written in, as read


def test_a_current_manifest_is_unchanged_by_the_upgrade(run: Path) -> None:
    today = json.loads((run / names.MANIFEST_FILE).read_text())
    assert today["schema_version"] == SCHEMA_VERSION
    upgraded = upgrade_manifest(today, run)
    # As written, but for what the writer leaves out when it is none (no server, no orders).
    assert upgraded == {
        **today,
        "serving": None,
        "benchmark": {**today["benchmark"], "orders": {}},
    }


@pytest.mark.slow
def test_each_file_name_is_spelled_once() -> None:
    """A record file's name as a string of its own appears in store/names.py only."""
    spelled = {
        value for key, value in vars(names).items() if key.isupper() and isinstance(value, str)
    }
    found = []
    for path in PACKAGE.rglob("*.py"):
        if path == Path(names.__file__):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and node.value in spelled:
                found.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {node.value}")
    assert found == []
