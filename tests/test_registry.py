"""The one registry every extension point uses: clashes refused naming both owners, near names
suggested, `module:attr` entries imported on first use, entry points read as plug-ins."""

from __future__ import annotations

from importlib.metadata import EntryPoint

import pytest

from mad_eval import registry as registry_module
from mad_eval.registry import Registry, RegistryError, reread_plugins


def test_a_name_taken_twice_is_refused_naming_both_owners():
    things: Registry[int] = Registry("widget")
    things.add("a", 1)
    with pytest.raises(RegistryError) as caught:
        things.add("a", 2, owner="the package widgets-extra")
    assert str(caught.value) == (
        "the package widgets-extra registers a widget named 'a', which mad-eval already "
        "registers; one of them must take another name."
    )
    assert things.get("a") == 1


def test_an_unknown_name_gets_the_nearest_one_and_the_list():
    things: Registry[int] = Registry("widget")
    things.add("plurality", 1)
    things.add("hub", 2)
    with pytest.raises(
        RegistryError,
        match=r"unknown widget 'plurlity' \(did you mean "
        r"'plurality'\?\); known: plurality, hub\.",
    ):
        things.get("plurlity")


def test_a_module_attr_entry_is_imported_only_when_asked_for():
    things: Registry[object] = Registry("widget")
    things.add("dumps", "json:dumps")
    things.add("missing", "no_such_module_here:thing")
    assert "missing" in things  # listing imports nothing
    import json

    assert things.get("dumps") is json.dumps
    with pytest.raises(RegistryError, match="widget 'missing' from mad-eval cannot be loaded"):
        things.get("missing")


def test_check_refuses_a_value_that_cannot_serve_and_keeps_the_name_free():
    def positive(name: str, value: int) -> None:
        if value <= 0:
            raise RegistryError(f"widget '{name}' must be positive.")

    things: Registry[int] = Registry("widget", check=positive)
    with pytest.raises(RegistryError, match="must be positive"):
        things.add("a", -1)
    things.add("a", 1)
    assert things.get("a") == 1


def test_entry_points_add_to_the_registry_and_may_not_take_a_built_in_name(monkeypatch):
    points = {
        "mad_eval.widgets": [
            EntryPoint("loads", "json:loads", "mad_eval.widgets"),
            EntryPoint("a", "json:dumps", "mad_eval.widgets"),
        ]
    }
    monkeypatch.setattr(registry_module, "entry_points", lambda group: points.get(group, []))
    things: Registry[object] = Registry("widget", "mad_eval.widgets")
    things.add("b", 2)
    import json

    assert things.get("loads") is json.loads
    clashing: Registry[object] = Registry("widget", "mad_eval.widgets")
    clashing.add("a", 1)
    with pytest.raises(RegistryError, match="registers a widget named 'a', which mad-eval"):
        clashing.names()
    with pytest.raises(RegistryError, match="registers a widget named 'a'"):
        clashing.get("a")  # refused again, not forgotten after the first time


def test_a_hostile_name_is_quoted_short_and_gets_no_suggestion():
    things: Registry[int] = Registry("widget")
    things.add("plurality", 1)
    with pytest.raises(RegistryError) as caught:
        things.get("plurality" * 1000)
    assert "did you mean" not in str(caught.value) and len(str(caught.value)) < 200
    with pytest.raises(RegistryError, match=r"unknown widget '\\u202e'"):
        things.get("\u202e")


def test_reread_plugins_reads_packages_installed_since_the_first_lookup(monkeypatch):
    points: list[EntryPoint] = []
    monkeypatch.setattr(registry_module, "entry_points", lambda group: list(points))
    things: Registry[object] = Registry("widget", "mad_eval.widgets")
    things.add("a", 1)
    assert things.names() == ["a"]
    points.append(EntryPoint("loads", "json:loads", "mad_eval.widgets"))
    assert things.names() == ["a"]  # read once per process
    reread_plugins()
    assert things.names() == ["a", "loads"]
    points.clear()
    reread_plugins()
    assert things.names() == ["a"]  # what the package added left with it; built-ins stay


def test_a_registry_that_holds_a_type_refuses_another_value_or_another_name():
    class Widget:
        def __init__(self, name: str) -> None:
            self.name = name

        def __repr__(self) -> str:
            return f"Widget({self.name!r})"

    things: Registry[Widget] = Registry("widget", holds=Widget)
    things.add("a", Widget("a"))
    with pytest.raises(
        RegistryError, match=r"widget 'b' must be a .*Widget named 'b', not Widget\('c'\)"
    ):
        things.add("b", Widget("c"))
    with pytest.raises(RegistryError, match=r"widget 'd' must be a .*Widget named 'd', not 4"):
        things.add("d", 4)  # type: ignore[arg-type]
    assert things.names() == ["a"]
