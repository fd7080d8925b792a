"""The documentation tier's readers (tests/docs/readers.py): their pip installs without compiling to bytecode, and
their Python caches the bytecode of what it imports whatever the test session's PYTHONDONTWRITEBYTECODE.

Checked by switching each off: with `NO_COMPILE` empty, or spelled `PIP_NO_COMPILE=1` (which pip reads as "compile"),
the install leaves `.pyc` files and the first test fails; with PYTHONDONTWRITEBYTECODE left in the reader's
environment, the import leaves none and the second fails. And a reader's environment starts with its flavour's pip and
nothing else: with the bundled one, what `python -m venv` puts in it (ensurepip's wheels, which uv installs: the third
test fails if they are not all there, or if the current pip's environment is seeded in their place); with the current
one, the same with its pip upgraded (the fourth fails if the upgrade is dropped, or if uv's seeding of a current
pip, which adds wheel and packaging, makes it).

The pages' installs find what they install in the run's wheelhouse, with no index, and only they: a probe that no
index has installs from the wheelhouse (it fails with `install_environment` empty), and the step after the install
has neither of its variables (it fails when `_foreground` passes them on).
"""

from __future__ import annotations

import base64
import ensurepip
import hashlib
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from packaging.version import Version

from tests.docs.readers import Reader, bare_environment, install_requirements, installs_from
from tests.docs.runner import PageRun
from tests.docs.steps import page_steps

_MODULE = "def answer():\n    return 42\n"


@pytest.mark.integration
@pytest.mark.timeout(120)
def test_the_readers_pip_leaves_no_bytecode(tmp_path: Path) -> None:
    wheel = _small_wheel(tmp_path)
    reader = Reader("bundled", Path(sys.prefix), "", tmp_path)
    environment = reader.page_environment(tmp_path / "home")
    target = tmp_path / "target"
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", "--target", str(target),
         str(wheel)],
        capture_output=True, text=True, env=environment, timeout=100, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert (target / "doc_reader_probe.py").read_text() == _MODULE
    assert not sorted(target.rglob("*.pyc")), "the reader's pip compiled what it installed"


@pytest.mark.integration
@pytest.mark.timeout(120)
def test_the_readers_python_caches_what_it_imports(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")  # the test session's, not the reader's
    (tmp_path / "doc_reader_probe.py").write_text(_MODULE)
    environment = Reader("bundled", Path(sys.prefix), "", tmp_path).page_environment(tmp_path / "home")
    done = subprocess.run(
        [sys.executable, "-c", "import doc_reader_probe; print(doc_reader_probe.answer())"],
        capture_output=True, text=True, env=environment, cwd=tmp_path, timeout=100, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == 0 and done.stdout == "42\n", done.stderr
    assert sorted((tmp_path / "__pycache__").glob("doc_reader_probe.*.pyc")), "the reader's Python cached nothing"


@pytest.mark.integration
@pytest.mark.timeout(300)
def test_the_bundled_readers_environment_is_what_venv_makes(tmp_path: Path) -> None:
    bundled = sorted((Path(ensurepip.__file__).parent / "_bundled").glob("*.whl"))
    expected = {wheel.name.split("-")[0]: wheel.name.split("-")[1] for wheel in bundled}
    assert expected["pip"] == ensurepip.version()
    assert _distributions(bare_environment("bundled", tmp_path / "venv")) == expected


@pytest.mark.integration
@pytest.mark.timeout(300)
def test_the_current_readers_pip_is_newer_than_the_bundled_one(tmp_path: Path) -> None:
    installed = _distributions(bare_environment("current", tmp_path / "venv"))
    assert Version(installed.pop("pip")) > Version(ensurepip.version()), installed
    bundled = _distributions(bare_environment("bundled", tmp_path / "bundled"))
    del bundled["pip"]
    assert installed == bundled, "the current pip's environment differs from the bundled one by more than its pip"


def test_the_wheelhouse_has_what_the_pages_install() -> None:
    commands = [
        "pip install --quiet ~/scaler-wheels/scaler_compute-*.whl ~/scaler-wheels/scaler_rehearsal-*.whl",
        'pip install "scaler-compute[fake-cloud]"   # the local fake cloud',
        "pip install opengris-parfun pargraph && echo done",
        "scaler --example local > local.toml",
        'pip install "scaler-compute[fake-cloud]"',
    ]
    assert install_requirements(commands) == ["scaler-compute[fake-cloud]", "opengris-parfun", "pargraph"]


@pytest.mark.integration
@pytest.mark.timeout(120)
def test_a_pages_install_reads_the_wheelhouse_and_only_it(tmp_path: Path) -> None:
    wheelhouse = tmp_path / "wheelhouse"
    wheelhouse.mkdir()
    _small_wheel(wheelhouse)
    folder = tmp_path / "page"
    folder.mkdir()
    path = f"{Path(sys.executable).parent}:{os.environ['PATH']}"
    environment = {**os.environ, "PATH": path, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    environment.pop("PIP_NO_INDEX", None)
    run = PageRun("page.md", folder, environment, Path(sys.executable), install_environment=installs_from(wheelhouse))
    page = (
        "```bash\npip install --quiet --target probe doc_reader_probe\n```\n\n"
        "```python\nimport os\nprint(os.environ.get('PIP_NO_INDEX'), os.environ.get('PIP_FIND_LINKS') == "
        f"{str(wheelhouse)!r})  # None False\n```\n"
    )
    results = [run.run(step) for step in page_steps("page.md", page)]
    assert [result.outcome for result in results] == ["ran", "ran"], [result.detail for result in results]
    assert (folder / "probe" / "doc_reader_probe.py").read_text() == _MODULE
    assert run.finish() == []


def _distributions(python: Path) -> dict[str, str]:
    """The distributions an environment has, by name (its pip's own account)."""
    done = subprocess.run([str(python), "-m", "pip", "list", "--format", "json"], capture_output=True, text=True,
                          timeout=100, stdin=subprocess.DEVNULL)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return {entry["name"]: entry["version"] for entry in json.loads(done.stdout)}


def _small_wheel(folder: Path) -> Path:
    """A wheel of one module, written here (no index, no build)."""
    name, version = "doc_reader_probe", "1.0"
    info = f"{name}-{version}.dist-info"
    files = {
        f"{name}.py": _MODULE,
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = [f"{path},sha256={_digest(text)},{len(text.encode())}" for path, text in files.items()]
    files[f"{info}/RECORD"] = "\n".join([*record, f"{info}/RECORD,,"]) + "\n"
    wheel = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, text in files.items():
            archive.writestr(path, text)
    return wheel


def _digest(text: str) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
