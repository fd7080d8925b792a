"""The page "Try it in your browser" in Debian's chromium, headless, as a reader uses it: the page (docs/try, assembled
by docs/try_page.py with this tree's wheel and the Pyodide of `make browser-tools`' cache, served from a local folder:
nothing is fetched from outside) loads Python and the browser client, and its cells run on the stack `scaler --example
web` starts (under the page's Python, 3.13, from .venv-3.13) over its ws:// addresses: a map of a function of the
standard library, a map of a function defined in the page, an object stored once and read by a task, a disconnect.
The stack is secured with the user's keys, as every stack is by default; the page reads the client's keys from the two
files `scaler_keygen export --role client` writes, picked in its file fields. Without keys, and at an address nothing
answers at, the first cell fails in one line.

Checked by hand with the mechanism off: without the WebSocket's subprotocol the server refuses the upgrade and the
connect cell fails; without the ZMTP identity the scheduler refuses the page's tasks.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from scaler.config.example_files import example_text
from scaler.io.address import free_tcp_port_block
from tests.integration.conftest import BIN_DIR, COLD_START_SECONDS, ProcessWatch, wait_for
from tests.integration.fresh_install import ROOT, run_wheel
from tests.integration.test_docs_site import CHROMEDRIVER, CHROMIUM, serve

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600), pytest.mark.xdist_group("test_browser_page")]


def try_page() -> ModuleType:
    spec = importlib.util.spec_from_file_location("try_page", ROOT / "docs" / "try_page.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


PAGE = try_page()
PAGE_PYTHON = ROOT / f".venv-{PAGE.PYODIDE_PYTHON}" / "bin" / "python"
#: The ports the web example binds, in order: replaced by a free block.
EXAMPLE_PORTS = (8521, 8522, 8523, 50002)

if CHROMIUM is None or CHROMEDRIVER is None:
    pytest.skip("chromium and chromedriver are not installed (make test installs them)", allow_module_level=True)
if not PAGE.fetched():
    pytest.skip(f"no Pyodide in {PAGE.CACHE} (make browser-tools, part of make test, fetches it)",
                allow_module_level=True)  # fmt: skip
if not PAGE_PYTHON.is_file():
    pytest.skip(f"no {PAGE_PYTHON} for the page's cluster (make browser-tools makes it where Python "
                f"{PAGE.PYODIDE_PYTHON} is installed)", allow_module_level=True)  # fmt: skip


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
def web_stack(processes: ProcessWatch, tmp_path: Path) -> Iterator[str]:
    path, scheduler = web_stack_file(tmp_path)
    log = tmp_path / "web-stack.log"
    with log.open("wb") as output:
        stack = subprocess.Popen([str(PAGE_PYTHON), "-m", "scaler", str(path)], cwd=tmp_path, stdout=output,
                                 stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)  # fmt: skip
    processes.add(stack)
    wait_for(lambda: "worker manager" in log.read_text() or stack.poll() is not None, "the web stack to start",
             COLD_START_SECONDS)  # fmt: skip
    assert stack.poll() is None, log.read_text()[-4000:]
    yield scheduler
    stack.terminate()


@pytest.fixture
def page_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    folder = tmp_path_factory.mktemp("try-site")
    PAGE.assemble(folder / "try", run_wheel(tmp_path_factory))
    with serve(folder) as base:
        yield f"{base}try/index.html"


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service as DriverService

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 f"--user-data-dir={tmp_path / 'chromium-profile'}"):  # fmt: skip
        options.add_argument(flag)
    driver = webdriver.Chrome(service=DriverService(str(CHROMEDRIVER)), options=options)
    driver.set_script_timeout(300)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture
def key_files(tmp_path: Path) -> Path:
    folder = tmp_path / "browser-keys"
    subprocess.run([str(BIN_DIR / "scaler_keygen"), "export", str(folder), "--role", "client"], check=True,
                   capture_output=True, timeout=60)  # fmt: skip
    return folder


def run_cell(driver: Any, code: str) -> dict[str, Any]:
    """What the page's cell gives for `code`: {"output": printed text, "error": the exception's last line}."""
    result = driver.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "window.scalerPage.run(arguments[0]).then(done, (error) => done({output: '', error: String(error)}));",
        code,
    )
    assert isinstance(result, dict), result
    return result


def test_the_pages_cells_run_on_the_web_stack(web_stack: str, page_site: str, browser: Any, key_files: Path) -> None:
    scheduler = web_stack
    browser.get(page_site)
    loaded = browser.execute_async_script(
        "const done = arguments[arguments.length - 1]; window.scalerPage.ready.then(done, (e) => done(String(e)));"
    )
    assert loaded is True, browser.find_element("id", "status").text
    assert f"The cluster must run Python {PAGE.PYODIDE_PYTHON}" in browser.find_element("id", "status").text
    unkeyed = f"from scaler.browser import Client\nClient({scheduler!r}, connect_timeout_seconds=10)"
    assert "secured with keys (CURVE)" in run_cell(browser, unkeyed)["error"]
    browser.find_element("id", "client-key").send_keys(str(key_files / "client.key_secret"))
    browser.find_element("id", "server-key").send_keys(str(key_files / "server.key"))
    connect = (
        f"client = Client({scheduler!r}, curve_secret_key=CLIENT_KEY, curve_server_key=SERVER_KEY)\n"
        "from scaler.browser.js_boxes import page_boxes\n"
        "print(type(page_boxes()).__name__)"
    )
    assert run_cell(browser, connect) == {"output": "TweetNaclBoxes", "error": None}
    assert run_cell(browser, "import math\nprint(client.map(math.factorial, range(8)))") == {
        "output": "[1, 1, 2, 6, 24, 120, 720, 5040]", "error": None,
    }  # fmt: skip
    defined = "def cube(x):\n    return x ** 3\n\nprint(sum(client.map(cube, range(300))))"
    assert run_cell(browser, defined) == {"output": str(sum(x**3 for x in range(300))), "error": None}
    stored = "numbers = client.send_object(list(range(100_000)))\nprint(client.submit(sum, numbers).result())"
    assert run_cell(browser, stored) == {"output": str(sum(range(100_000))), "error": None}
    assert run_cell(browser, "client.disconnect()")["error"] is None
    port = free_tcp_port_block(1)
    nowhere = run_cell(browser, f"Client('ws://127.0.0.1:{port}/', connect_timeout_seconds=5)")
    assert nowhere["error"] == f"ConnectionError: could not open a WebSocket to ws://127.0.0.1:{port}/"
