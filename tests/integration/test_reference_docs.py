"""#34 item 7: the API reference builds from the docstrings without a warning (`make docs` runs the same script),
and documents every public name; the Troubleshooting page names every exception of `scaler.errors`; the
guide's index links every page of the guide.

Checked by switching the gate off: with `build` no longer recording warnings, the warning test fails; a class
added to `scaler.errors` without a word on the Troubleshooting page fails that test.
"""

from __future__ import annotations

import importlib.util
import inspect
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

import scaler
import scaler.errors
from tests.integration.fresh_install import ROOT

pytestmark = pytest.mark.integration

SCRIPT = ROOT / "docs" / "build_api_reference.py"
GUIDE = ROOT / "docs" / "guide"


def builder() -> ModuleType:
    spec = importlib.util.spec_from_file_location("build_api_reference", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def anchors(page: Path) -> set[str]:
    return set(re.findall(r'id="([A-Za-z_][\w.]*)"', page.read_text()))


def exception_classes() -> list[str]:
    return [
        name for name, value in vars(scaler.errors).items() if inspect.isclass(value) and issubclass(value, Exception)
    ]


@pytest.mark.timeout(120)
def test_the_api_reference_builds_without_warnings_and_documents_every_public_name(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), str(tmp_path / "api")], capture_output=True, text=True, timeout=100,
        cwd=ROOT, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == 0 and done.stderr == "", done.stderr
    documented = anchors(tmp_path / "api" / "scaler.html")
    assert set(scaler.__all__) <= documented, set(scaler.__all__) - documented
    assert {"Client.submit", "Client.map", "ScalerFuture.result", "SchedulerClusterCombo.get_address"} <= documented
    errors = anchors(tmp_path / "api" / "scaler" / "errors.html")
    assert set(exception_classes()) <= errors, set(exception_classes()) - errors


def test_a_warning_fails_the_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = tmp_path / "warned"
    package.mkdir()
    (package / "__init__.py").write_text(
        '"""A module pdoc warns about."""\n\n\ndef f(x: "not python (") -> None:\n    """y"""\n'
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    problems = builder().build(tmp_path / "out", ("warned",))
    assert problems and "Error parsing type annotation" in problems[0]


def test_troubleshooting_names_every_exception_scaler_raises() -> None:
    page = (GUIDE / "troubleshooting.md").read_text()
    missing = [name for name in exception_classes() if f"`{name}" not in page]
    assert not missing, f"docs/guide/troubleshooting.md does not name {missing}"


def test_the_guide_index_links_every_page() -> None:
    index = (GUIDE / "README.md").read_text()
    pages = sorted(page.name for page in GUIDE.glob("*.md") if page.name != "README.md")
    assert [page for page in pages if f"]({page})" not in index] == []
