"""Fixtures shared by the whole test suite."""

import os
import shutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from mad_eval.registry import Registry, reread_plugins


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The offline benchmark data: $MAD_EVAL_DATA, else ../shared/data next to the repo."""
    default = Path(__file__).resolve().parents[1].parent / "shared" / "data"
    path = Path(os.environ.get("MAD_EVAL_DATA", default))
    if not path.is_dir():
        message = f"benchmark data directory {path} is missing; set MAD_EVAL_DATA to it"
        if os.environ.get("CI"):  # CI always has shared/ beside the clone: never skip there
            pytest.fail(message)
        pytest.skip(message)
    return path


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory):
    """One headless Chromium for a module's browser tests, with a fresh profile and no
    network chatter."""
    pytest.importorskip("selenium.webdriver")
    from viewer_helpers import chromium

    profile = tmp_path_factory.mktemp("chromium-profile")
    driver = chromium(profile)
    yield driver
    driver.quit()
    shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture
def registered() -> Iterator[Callable[[Registry[Any], str, Any], None]]:
    """`registered(REGISTRY, name, value)`: an entry of the test's own, removed after it."""
    added: list[tuple[Registry[Any], str]] = []

    def add(registry: Registry[Any], name: str, value: Any) -> None:
        registry.add(name, value, owner="a test")
        added.append((registry, name))

    yield add
    for registry, name in reversed(added):
        registry.remove(name)


@pytest.fixture
def installed(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[Path], None]]:
    """`installed(folder)`: a folder of modules and `.dist-info` folders on sys.path, as a
    pip-installed package is, its entry points read by every registry at its next lookup; after
    the test the registries forget them and its modules are unloaded."""
    folders: list[Path] = []

    def install(folder: Path) -> None:
        monkeypatch.syspath_prepend(str(folder))
        folders.append(folder.resolve())
        reread_plugins()

    yield install
    for name, module in list(sys.modules.items()):
        where = getattr(module, "__file__", None)
        if where and any(Path(where).resolve().is_relative_to(f) for f in folders):
            del sys.modules[name]
    reread_plugins()  # read again, without the folders, at the next lookup
