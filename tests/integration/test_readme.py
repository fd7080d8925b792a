"""#34 item 1: every Python example of the README runs as it is on a fresh install, and prints what the README
says it prints: each block in a new interpreter of an environment that has only the package's wheel (and its
dependencies), started in an empty folder, so nothing of the clone helps. The README has no Python fragments
that are not run (no `py` blocks); shell commands are run by test_first_day.py (`scaler --example`).

Checked against the README before #34, whose first block connected to a cluster nobody had started: both tests
fail on it (the first example starts no cluster; the block fails with ConnectionError after its timeout)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.integration.fresh_install import ROOT, fresh_environment
from tests.integration.test_user_guide import BLOCK, expected_lines

#: its module fixtures are made once: its tests share one test process (make test: --dist loadgroup)
pytestmark = [pytest.mark.integration, pytest.mark.timeout(300), pytest.mark.xdist_group("test_readme")]

README = ROOT / "README.md"


def examples() -> list[tuple[str, str]]:
    return [(f"readme-{number}", match.group(1)) for number, match in enumerate(BLOCK.finditer(README.read_text()), 1)]


@pytest.fixture(scope="module")
def fresh_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return fresh_environment(tmp_path_factory.mktemp("readme-install"))


def test_the_readme_has_python_examples_and_no_fragment_left_unrun() -> None:
    text = README.read_text()
    assert examples(), "the README has no ```python block"
    assert not re.search(r"^```py\s*$", text, re.MULTILINE), "a ```py block in the README would not be run"
    first = examples()[0][1]
    assert "SchedulerClusterCombo" in first, "the first example starts the cluster it uses"


@pytest.mark.parametrize(("name", "code"), examples(), ids=[name for name, _ in examples()])
def test_a_readme_example_runs_on_a_fresh_install(name: str, code: str, fresh_python: Path, tmp_path: Path) -> None:
    script = tmp_path / f"{name}.py"
    script.write_text(code)
    finished = subprocess.run(
        [str(fresh_python), str(script)], capture_output=True, text=True, timeout=150, cwd=tmp_path,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert finished.returncode == 0, f"{name} failed:\n{finished.stderr[-3000:]}"
    lines = [line.strip() for line in finished.stdout.splitlines()]
    for expected in expected_lines(code):
        assert expected in lines, f"{name}: the README says it prints {expected!r}; it printed:\n{finished.stdout}"
