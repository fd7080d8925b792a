"""What a server of the page "Try it in your browser" adds to the site (scaler.browser.served_page): the wheels packed
from what is installed here and the manifest the page reads; with no Pyodide in the cache, the page is sent to the
CDN at the pinned version; a wheel that cannot be made is one line the page shows, naming what to do."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scaler.browser.served_page import PAGE_DISTRIBUTIONS, PYODIDE_CDN, PYODIDE_FILES, page_wheels, served_page


@pytest.fixture(autouse=True)
def user_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The packed wheels go to a cache of the test's, not the user's."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "user-cache"))


def test_without_a_cached_pyodide_the_page_loads_the_pinned_one_from_the_cdn(tmp_path: Path) -> None:
    page = served_page(tmp_path / "scratch", cache=tmp_path / "empty", server_python="3.13")
    assert not page.local_runtime and page.problem is None
    manifest = json.loads(page.files["try/wheels/manifest.json"].read_text())
    assert manifest["pyodide_url"] == PYODIDE_CDN
    assert manifest["pyodide_files"] == PYODIDE_FILES
    wheels = [wheel["name"] for wheel in manifest["wheels"]]
    assert [name.split("-")[0] for name in wheels] == [name.replace("-", "_") for name in PAGE_DISTRIBUTIONS]
    assert all(wheel["integrity"].startswith("sha256-") for wheel in manifest["wheels"])
    assert set(page.files) == {"try/wheels/manifest.json", *(f"try/wheels/{name}" for name in wheels)}


def test_a_wheel_that_cannot_be_made_is_one_line_for_the_page() -> None:
    wheels = page_wheels(("scaler-compute", "no-such-distribution"))
    assert wheels.files == {}
    assert wheels.problem == (
        "the page needs no-such-distribution, which is not installed beside this scaler: "
        "pip install no-such-distribution, then serve the page again"
    )
