"""The page "Try it in your browser" as a pip user meets it, in Debian's chromium, headless: from a fresh environment
of the page's Python (3.13) with this tree's wheel and nothing of the clone, `scaler --docs try --serve` serves the
documentation site with the page, its wheels made from what that environment has installed, and Pyodide from the cache
`make browser-tools` fills (nothing is fetched from outside); the same environment runs `scaler --example web`'s stack.
The guide's link leads to the page, which loads Python and the client, checking every file against its digest, and
its cells run on the stack over its ws:// addresses: connect (with the two key files `scaler_keygen export --role
client` writes, picked in the page's file fields), a map of a function of the standard library, a map of a function
defined in the page, an object stored once and read by a task. Without keys, and at an address nothing answers at,
the first cell fails in one line.

What stops the page is said in one line: a copy of Pyodide that is not the pinned one, Pyodide from the CDN where the
browser cannot reach it (here: no internet; where there is, the page loads from the CDN instead), the page opened
from a file.

Checked with the mechanism off: from the wheel of main before the page was served (no docs/try in the package, no
`--docs try`), the guide's link answered 404 and the test failed there; with the server's extra files left out
(`served_page` not passed to `serve`), the page said "this site has no wheels/manifest.json (HTTP 404)"; with the
fetch of the pinned lock file unchecked (no `integrity`), the altered copy loaded and the second test failed.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from scaler.browser.served_page import (
    PYODIDE_CDN,
    PYODIDE_FILES,
    PYODIDE_PYTHON,
    PYODIDE_VERSION,
    has_runtime,
    pyodide_folder,
    runtime_cache,
)
from scaler.config.example_files import example_text
from scaler.io.address import free_tcp_port_block
from tests.integration.conftest import COLD_START_SECONDS, ProcessWatch, wait_for
from tests.integration.fresh_install import ROOT, RUN_COMMAND, fresh_environment, run_wheel
from tests.integration.test_docs_site import CHROMEDRIVER, CHROMIUM, chromium

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600), pytest.mark.xdist_group("test_browser_page")]

#: The environment of the page's Python that `make browser-tools` makes: its interpreter and installed dependencies
#: make the fresh one.
PAGE_ENVIRONMENT = ROOT / f".venv-{PYODIDE_PYTHON}" / "bin" / "python"
#: The ports the web example binds, in order: replaced by a free block.
EXAMPLE_PORTS = (8521, 8522, 8523, 50002)
CACHE = runtime_cache()

if CHROMIUM is None or CHROMEDRIVER is None:
    pytest.skip("chromium and chromedriver are not installed (make test installs them)", allow_module_level=True)
if not has_runtime(CACHE):
    pytest.skip(f"no Pyodide in {CACHE} (make browser-tools, part of make test, fetches it)", allow_module_level=True)
if not PAGE_ENVIRONMENT.is_file():
    pytest.skip(f"no {PAGE_ENVIRONMENT} for the page's cluster (make browser-tools makes it where Python "
                f"{PYODIDE_PYTHON} is installed)", allow_module_level=True)  # fmt: skip


@pytest.fixture(scope="module")
def page_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return fresh_environment(tmp_path_factory.mktemp("fresh-page"), run_wheel(tmp_path_factory), PAGE_ENVIRONMENT)


@pytest.fixture(scope="module")
def user_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The user's cache folder of the servers here (the rendered site, the page's wheels), shared by them."""
    return tmp_path_factory.mktemp("user-cache")


@contextlib.contextmanager
def served_site(python: Path, user_cache: Path, pyodide_cache: Path) -> Iterator[str]:
    """`scaler --docs try --serve 0`, Pyodide taken from `pyodide_cache`: the try page's address, until Ctrl-C."""
    environment = {**os.environ, "XDG_CACHE_HOME": str(user_cache), "SCALER_BROWSER_CACHE": str(pyodide_cache)}
    server = subprocess.Popen([str(python), "-m", "scaler", "--docs", "try", "--serve", "0"], cwd=user_cache,
                              stdout=subprocess.PIPE, text=True, env=environment)  # fmt: skip
    try:
        assert server.stdout is not None
        said = server.stdout.readline() + server.stdout.readline()
        url = re.search(r"http://127\.0\.0\.1:\d+/try/index\.html", said)
        assert url is not None, said
        assert f"loads Pyodide from {pyodide_folder(pyodide_cache)}" in said or PYODIDE_CDN in said, said
        yield url.group(0)
    finally:
        server.send_signal(signal.SIGINT)
        try:
            code = server.wait(30)
        finally:
            server.kill()
            if server.stdout is not None:
                server.stdout.close()
    assert code == 0, "the server stops at Ctrl-C, exit 0"


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    with chromium(tmp_path_factory.mktemp("chromium")) as driver:
        yield driver


def web_stack_file(folder: Path) -> tuple[Path, str]:
    """`scaler --example web` on free ports; the file and its scheduler's ws:// address."""
    text = example_text("web")
    base = free_tcp_port_block(len(EXAMPLE_PORTS))
    for index, port in enumerate(EXAMPLE_PORTS):
        text = re.sub(rf"(?<=:){port}\b", str(base + index), text)
    path = folder / "web.toml"
    path.write_text(text)
    scheduler = f"ws://127.0.0.1:{base}"
    assert f'bind_address = "{scheduler}"' in text, text
    return path, scheduler


@pytest.fixture
def web_stack(page_python: Path, processes: ProcessWatch, tmp_path: Path) -> Iterator[str]:
    path, scheduler = web_stack_file(tmp_path)
    log = tmp_path / "web-stack.log"
    with log.open("wb") as output:
        stack = subprocess.Popen([str(page_python), "-m", "scaler", str(path)], cwd=tmp_path, stdout=output,
                                 stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)  # fmt: skip
    processes.add(stack)
    wait_for(lambda: "worker manager" in log.read_text() or stack.poll() is not None, "the web stack to start",
             COLD_START_SECONDS)  # fmt: skip
    assert stack.poll() is None, log.read_text()[-4000:]
    yield scheduler
    stack.terminate()


def key_files(python: Path, folder: Path) -> Path:
    """The page's two key files, as the guide makes them (`scaler_keygen export browser-keys --role client`)."""
    keys = folder / "browser-keys"
    subprocess.run([str(python), "-c", RUN_COMMAND, "scaler_keygen", "export", str(keys), "--role", "client"],
                   check=True, capture_output=True, timeout=60)  # fmt: skip
    return keys


def settled(driver: Any) -> Any:
    """True once the page has loaded the client, else the reason it gives. The page's script may run after the
    document is loaded (a module script): the wait starts once it has defined `window.scalerPage`."""
    return driver.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "const settle = () => window.scalerPage === undefined ? setTimeout(settle, 50)"
        " : window.scalerPage.ready.then(done, (e) => done(String(e)));"
        "settle();"
    )


def status(driver: Any) -> str:
    return str(driver.find_element("id", "status").text)


def run_code(driver: Any, code: str) -> dict[str, Any]:
    """What the page gives for `code`, run as a cell runs it: {"output": printed text, "error": its last line}."""
    result = driver.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "window.scalerPage.run(arguments[0]).then(done, (error) => done({output: '', error: String(error)}));",
        code,
    )
    assert isinstance(result, dict), result
    return result


def run_cell(driver: Any, name: str) -> str:
    """Click the Run button of the page's cell `name` and return what it shows once done."""
    cell = driver.find_element("css selector", f'.cell[data-cell="{name}"]')
    button = cell.find_element("tag name", "button")
    button.click()
    wait_for(lambda: button.is_enabled() and cell.find_element("class name", "output").text != "running...",
             f"the cell {name} to finish", 300)  # fmt: skip
    output = cell.find_element("class name", "output")
    assert "failed" not in (output.get_attribute("class") or ""), (name, output.text)
    return str(output.text)


def collatz_steps(n: int) -> int:
    steps = 0
    while n != 1:
        n = n // 2 if n % 2 == 0 else 3 * n + 1
        steps += 1
    return steps


def test_the_guides_page_runs_its_cells_on_the_web_stack(
    page_python: Path, user_cache: Path, web_stack: str, browser: Any, tmp_path: Path
) -> None:
    scheduler = web_stack
    keys = key_files(page_python, tmp_path)
    with served_site(page_python, user_cache, CACHE) as page:
        browser.get(page.replace("/try/index.html", "/guide/browser.html"))
        browser.find_element("link text", "Try scaler in your browser").click()
        assert browser.current_url == page
        assert settled(browser) is True, status(browser)
        assert f"The cluster must run Python {PYODIDE_PYTHON}." in status(browser), status(browser)
        assert "served by Python" not in status(browser)
        site = page.removesuffix("try/index.html")
        loaded = browser.execute_script("return performance.getEntriesByType('resource').map(e => e.name)")
        assert {f"{site}try/pyodide/{name}" for name in PYODIDE_FILES} <= set(loaded), loaded
        assert not [name for name in loaded if not name.startswith((site, "blob:"))], loaded

        unkeyed = f"from scaler.browser import Client\nClient({scheduler!r}, connect_timeout_seconds=10)"
        assert "secured with keys (CURVE)" in run_code(browser, unkeyed)["error"]
        address = browser.find_element("id", "address")
        address.clear()
        address.send_keys(scheduler)
        browser.find_element("id", "client-key").send_keys(str(keys / "client.key_secret"))
        browser.find_element("id", "server-key").send_keys(str(keys / "server.key"))
        assert scheduler in run_cell(browser, "connect")
        boxes = "from scaler.browser.js_boxes import page_boxes\nprint(type(page_boxes()).__name__)"
        assert run_code(browser, boxes) == {"output": "TweetNaclBoxes", "error": None}
        factorials = [1, 1, 2, 6, 24, 120, 720, 5040, 40320, 362880]
        assert run_cell(browser, "map") == str(factorials)
        assert run_cell(browser, "define") == str(max(collatz_steps(n) for n in range(1, 10_000)))
        assert run_cell(browser, "objects") == str(sum(range(100_000)))
        assert run_code(browser, "client.disconnect()")["error"] is None
        port = free_tcp_port_block(1)
        nowhere = run_code(browser, f"Client('ws://127.0.0.1:{port}/', connect_timeout_seconds=5)")
        assert nowhere["error"] == f"ConnectionError: could not open a WebSocket to ws://127.0.0.1:{port}/"


def copy_of_the_cache(folder: Path) -> Path:
    """The Pyodide cache as links to its files, in `folder`."""
    for source in CACHE.rglob("*"):
        if source.is_file():
            target = folder / source.relative_to(CACHE)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.symlink_to(source)
    return folder


def test_what_stops_the_page_is_said_in_one_line(
    page_python: Path, user_cache: Path, browser: Any, tmp_path: Path
) -> None:
    altered = copy_of_the_cache(tmp_path / "altered")
    lock = pyodide_folder(altered) / "pyodide-lock.json"
    text = lock.read_text()
    lock.unlink()
    lock.write_text(text + " ")  # still a lock file Pyodide reads, but not the pinned one
    with served_site(page_python, user_cache, altered) as page:
        browser.get(page)
        assert settled(browser) is not True, "an altered copy of Pyodide was run"
        assert status(browser) == (
            f"The client could not be loaded: Pyodide's pyodide-lock.json from {page.replace('index.html', '')}"
            f"pyodide/pyodide-lock.json is not the file this page pins (its SHA-384 digest differs); the copy in "
            f"{lock.parent} is damaged or of another build: put the npm package pyodide@{PYODIDE_VERSION} "
            f"(`npm pack pyodide@{PYODIDE_VERSION}`, its package/ folder) there, or remove it (the page then "
            "loads Pyodide from the CDN)"
        )

    with served_site(page_python, user_cache, tmp_path / "empty") as page:
        browser.get(page)
        if settled(browser) is True:  # this machine reaches the CDN: the page loaded Pyodide from it, checked
            loaded = browser.execute_script("return performance.getEntriesByType('resource').map(e => e.name)")
            assert {f"{PYODIDE_CDN}{name}" for name in PYODIDE_FILES} <= set(loaded), loaded
        else:
            assert status(browser).startswith("The client could not be loaded: Pyodide's "), status(browser)
            assert f"could not be fetched from {PYODIDE_CDN}" in status(browser), status(browser)
            assert (
                "this browser cannot reach it (offline, or blocked by a proxy or a policy); let this browser "
                "reach cdn.jsdelivr.net, or serve Pyodide from this machine" in status(browser)
            ), status(browser)

    (site,) = (user_cache / "scaler" / "docs").glob("*/try/index.html")
    browser.get(site.as_uri())
    assert status(browser) == (
        "This page runs only when served: run `scaler --docs try --open` (or `scaler --docs try --serve 8765` and open "
        "http://127.0.0.1:8765/try/index.html)."
    )
    shutil.rmtree(altered)
