"""A package installed beside mad-eval adds a protocol, a backend, a metric family, a table
layout and a tracker through entry points, without editing mad-eval: tests/plugin_pkg holds it
as pip would install it (its module and its .dist-info with entry_points.txt), and each part is
used end to end, from Python and from the command line. A plug-in that takes a name already taken is
refused in one sentence naming both."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from cli_helpers import mad_eval as command

import mad_eval as api
import mad_eval.cli  # its --help is made at import: here, before the plug-in is installed
from mad_eval.backends import BACKENDS
from mad_eval.measure.families import FAMILIES
from mad_eval.protocols import PROTOCOLS, ProtocolError, catalogue, resolve
from mad_eval.registry import RegistryError
from mad_eval.reporting.layouts import LAYOUTS
from mad_eval.tracking import TRACKERS

PACKAGE = Path(__file__).parent / "plugin_pkg"
DISTRIBUTION = "the package mad-eval-demo-plugin"


@pytest.fixture
def plugin(installed) -> None:
    installed(PACKAGE)


def test_each_entry_point_group_adds_to_its_registry(plugin) -> None:
    for registry, name in ((PROTOCOLS, "wheel"), (BACKENDS, "fixed"), (FAMILIES, "boxes"),
                           (LAYOUTS, "boxed"), (TRACKERS, "notebook")):  # fmt: skip
        assert registry.names()[-1] == name
        assert registry.owner(name) == DISTRIBUTION
    assert (
        "wheel",
        PROTOCOLS.get("wheel").description,
        "entry point mad_eval_demo_plugin:Wheel",
    ) in (catalogue())


def _check_run(out: Path) -> None:
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["protocol"]["name"] == "wheel"
    assert manifest["protocol"]["sees"] == [[0, 1, 2], [0, 1], [0, 2]]
    turns = [json.loads(line) for line in (out / "turns.jsonl").read_text().splitlines()]
    assert len(turns) == 2 * 3 * 2  # questions x agents x rounds
    assert all(t["answer"] == "7" and t["model"] == "fixed:7" for t in turns)
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["boxes"]["share"] == 100.0  # the plug-in's metric family, counted
    assert metrics["per_run"][0]["boxes"]["share"] == 100.0


def test_the_plugin_protocol_backend_and_family_serve_a_run_from_python(
    plugin, tmp_path: Path
) -> None:
    api.run(protocol="wheel", model="fixed:7", agents=3, rounds=1, benchmark="arith", limit=2,
            out=tmp_path / "r")  # fmt: skip
    _check_run(tmp_path / "r")


def test_the_plugin_tracker_takes_a_finished_run_and_its_files(plugin, tmp_path: Path) -> None:
    api.run(model="fixed:7", agents=2, rounds=1, benchmark="arith", limit=2, out=tmp_path / "r",
            log=f"notebook:path={tmp_path / 'kept'}")  # fmt: skip
    (kept,) = (tmp_path / "kept").glob("*.json")
    sent = json.loads(kept.read_text())
    metrics = json.loads((tmp_path / "r" / "metrics.json").read_text())
    assert sent["name"] == "r" and sent["metrics"]["maj"] == metrics["maj"]
    assert {"turns.jsonl", "manifest.json", "site/index.html"} <= set(sent["files"])
    entry = json.loads((tmp_path / "r" / "tracked.json").read_text())["logged"]
    assert [e["tracker"] for e in entry.values()] == ["notebook"]


def test_the_plugin_serves_the_command_line_and_its_layout_makes_a_table(
    plugin, tmp_path: Path
) -> None:
    ran = command("run", "--protocol", "wheel", "--model", "fixed:7", "--agents", "3",
                   "--rounds", "1", "--benchmark", "arith", "--limit", "2", "--out", "r",
                   cwd=tmp_path)  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    _check_run(tmp_path / "r")
    table = command("table", "r", "--layout", "boxed", cwd=tmp_path)
    assert table.returncode == 0, table.stderr
    header, _, row = table.stdout.strip().splitlines()[:3]
    assert "Boxed %" in header and "Maj" in header
    maj = json.loads((tmp_path / "r" / "metrics.json").read_text())["maj"]
    assert "100.0" in row and f"{maj:.1f}" in row


def test_without_the_package_its_names_are_unknown(tmp_path: Path) -> None:
    """The registries forget the package after the fixture: nothing leaks between tests."""
    assert "wheel" not in PROTOCOLS and "fixed" not in BACKENDS
    assert "boxes" not in FAMILIES and "boxed" not in LAYOUTS
    with pytest.raises(ProtocolError, match="unknown protocol 'wheel'"):
        resolve("wheel")


def test_a_plugin_taking_a_built_in_name_is_refused_naming_both(installed, tmp_path: Path) -> None:
    info = tmp_path / "clashing-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: clashing\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        textwrap.dedent(
            """\
            [mad_eval.layouts]
            debate = mad_eval_demo_plugin:BOXED
            """
        )
    )
    installed(tmp_path)
    with pytest.raises(RegistryError) as caught:
        LAYOUTS.get("rounds")
    assert str(caught.value) == (
        "the package clashing registers a table layout named 'debate', which mad-eval already "
        "registers; one of them must take another name."
    )
    table = command("table", str(tmp_path), "--layout", "rounds", cwd=tmp_path)
    assert table.returncode != 0 and str(caught.value) in " ".join(table.stderr.split())
