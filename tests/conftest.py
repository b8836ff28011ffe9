"""Fixtures shared by the whole test suite."""

import os
import shutil
from pathlib import Path

import pytest


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
