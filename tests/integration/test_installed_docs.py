"""#38 finding 4: help texts and example files point a pip user to what they have. The documentation ships with the
package (`scaler --docs [NAME]`), and no command's `-h`, nor any example file, names a `docs/*.md` or `config/...`
path of the repository (the example files name their own `scaler --example` line, and a clone's path only as such).
Run from a fresh environment with this tree's wheel and no clone on the path.

Checked by switching the mechanism off: without "docs/*.md" in the package data, `scaler --docs` lists no page and
the first test fails; with the help of --policy-content naming docs/scaling.md again, the second fails."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from scaler.config.completion import command_names
from scaler.config.example_files import EXAMPLES
from tests.integration.fresh_install import fresh_environment, run_wheel

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600), pytest.mark.xdist_group("test_installed_docs")]

#: a repository path a pip user does not have: docs/*.md or config/*.toml
REPOSITORY_PATH = re.compile(r"(?<![\w/])(docs/[\w/]+\.md|config/[\w.]+\.toml)")


#: a console script run by its entry point (the fresh environment has the wheel's files, not its scripts)
RUN_COMMAND = """
import sys
from importlib.metadata import entry_points

(script,) = [s for s in entry_points(group="console_scripts") if s.name == sys.argv[1]]
sys.argv = sys.argv[1:]
sys.exit(script.load()())
"""


@pytest.fixture(scope="module")
def fresh_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return fresh_environment(tmp_path_factory.mktemp("fresh-docs"), run_wheel(tmp_path_factory))


def scaler(python: Path, *argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(python), "-m", "scaler", *argv], capture_output=True, text=True, timeout=60, cwd=cwd)


def test_the_documentation_ships_with_the_package(fresh_python: Path, tmp_path: Path) -> None:
    listing = scaler(fresh_python, "--docs", cwd=tmp_path)
    assert listing.returncode == 0, listing.stderr
    for name in ("scaling", "worker_managers", "security", "guide/bursting", "guide/quick_start"):
        assert re.search(rf"^  {re.escape(name)} ", listing.stdout, flags=re.M), listing.stdout
    page = scaler(fresh_python, "--docs", "bursting", cwd=tmp_path)
    assert page.returncode == 0 and page.stdout.startswith("# Bursting from your laptop"), page.stderr
    wrong = scaler(fresh_python, "--docs", "scalin", cwd=tmp_path)
    assert wrong.returncode == 2 and 'did you mean "scaling"?' in wrong.stderr


def test_no_help_text_or_example_names_a_repository_path(fresh_python: Path, tmp_path: Path) -> None:
    found = {}
    for command in command_names():
        done = subprocess.run([str(fresh_python), "-c", RUN_COMMAND, command, "-h"], capture_output=True, text=True,
                              timeout=60, cwd=tmp_path)  # fmt: skip
        assert done.returncode == 0, (command, done.stderr)
        paths = REPOSITORY_PATH.findall(done.stdout)
        if paths:
            found[command] = paths
    for example in EXAMPLES:
        text = scaler(fresh_python, "--example", example.name, cwd=tmp_path).stdout
        clone = f"in a clone, config/{example.file_name}"
        assert f"`scaler --example {example.name} > {example.file_name}`" in text, example.name
        paths = REPOSITORY_PATH.findall(text.replace(clone, ""))
        if paths:
            found[example.file_name] = paths
    assert not found, found
