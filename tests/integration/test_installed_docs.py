"""#38 finding 4: help texts and example files point a pip user to what they have. The documentation ships with the
package (`scaler --docs [NAME]`), and no command's `-h`, nor any example file, names a `docs/*.md` or `config/...`
path of the repository (the example files name their own `scaler --example` line, and a clone's path only as such).
Run from a fresh environment with this tree's wheel and no clone on the path.

Checked by switching the mechanism off: without "docs/*.md" in the package data, `scaler --docs` lists no page and
the first test fails; with the help of --policy-content naming docs/scaling.md again, the second fails."""

from __future__ import annotations

import os
import re
import signal
import subprocess
from pathlib import Path

import pytest

from scaler.browser.served_page import runtime_cache
from scaler.config.completion import command_names
from scaler.config.example_files import EXAMPLES
from tests.integration.fresh_install import RUN_COMMAND, fresh_environment, run_wheel
from tests.integration.test_docs_site import chromium, expected_paths, needs_browser, walk

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600), pytest.mark.xdist_group("test_installed_docs")]

#: a repository path a pip user does not have: docs/*.md or config/*.toml
REPOSITORY_PATH = re.compile(r"(?<![\w/])(docs/[\w/]+\.md|config/[\w.]+\.toml)")


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


def test_the_terminal_shows_pages_as_text(fresh_python: Path, tmp_path: Path) -> None:
    """issue 77, item 5: `scaler --docs api` printed raw HTML, `scaler --docs index` MyST's toctree blocks, and the
    index named no Kubernetes. Now text for a terminal."""
    api = scaler(fresh_python, "--docs", "api", cwd=tmp_path).stdout
    index = scaler(fresh_python, "--docs", "index", cwd=tmp_path).stdout
    assert "<a href" not in api and "<code>" not in api and "- the scaler package;" in api, api
    assert "```{toctree}" not in index and ":caption:" not in index, index
    assert "Kubernetes pods" in " ".join(index.split()) and "scaler --docs guide/kubernetes" in index, index


@needs_browser
def test_the_site_the_wheel_serves_in_a_browser(fresh_python: Path, tmp_path: Path) -> None:
    """issue 77, item 5: `scaler --docs --serve PORT` from the wheel (no clone, no docs toolchain) serves the whole
    site: a browser reaches every page of docs/ and docs/guide/, the API reference and the try page from the index,
    every link inside the site leads to something served, every anchor names an element of its page, every picture
    loads, and what the try page loads from the site (its wheels, Pyodide from the cache `make browser-tools` fills)
    answers. Checked to fail before: `--serve` was no flag (exit 2); and, before the wheel served the try page, the
    guide's link to it answered 404."""
    environment = {
        **os.environ,
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        "SCALER_BROWSER_CACHE": str(runtime_cache()),
    }
    server = subprocess.Popen([str(fresh_python), "-m", "scaler", "--docs", "--serve", "0"], cwd=tmp_path,
                              stdout=subprocess.PIPE, text=True, env=environment)  # fmt: skip
    try:
        assert server.stdout is not None
        said = server.stdout.readline()
        url = re.search(r"http://127\.0\.0\.1:\d+/", said)
        assert url is not None, said
        with chromium(tmp_path) as browser:
            walked = walk(browser, url.group(0))
        assert not walked.problems, "\n".join(walked.problems)
        unreached = expected_paths() - walked.pages
        assert not unreached, f"pages no link of the site reaches: {sorted(unreached)}"
    finally:
        server.send_signal(signal.SIGINT)
        code = server.wait(30)
        if server.stdout is not None:
            server.stdout.close()
    assert code == 0, "the server stops at Ctrl-C, exit 0"
    opened = subprocess.run([str(fresh_python), "-m", "scaler", "--docs", "guide/slurm", "--open"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=60,
                            env={**environment, "BROWSER": "true"})  # fmt: skip
    assert opened.returncode == 0 and "guide/slurm.html" in opened.stdout, opened.stdout + opened.stderr
