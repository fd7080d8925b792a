"""A `map` of 1,000 tiny tasks from the browser (scaler.browser.Client on Pyodide, in headless chromium) against the
same from CPython (scaler.Client), both over the ws:// address of one stack: the `web` example (`scaler --example
web`: CURVE with the user's keys, as every stack) on free ports, run by the page's Python (3.13, .venv-3.13). Each side
maps once to warm up (workers start), then the two take turns, `--repeat` maps each (a shared machine's load moves
both alike); the medians and their ratio are printed, with the machine's load.

    python benchmarks/browser_map.py [--tasks 1000] [--repeat 5]

Needs what the browser page's test needs: `make browser-tools` (Pyodide in the cache, .venv-3.13), chromium and
chromedriver. Not a test.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import http.server
import os
import re
import statistics
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from scaler.browser.served_page import PYODIDE_PYTHON, PYODIDE_VERSION, assemble
from scaler.config.example_files import example_text
from scaler.io.address import free_tcp_port_block

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE_PORTS = (8521, 8522, 8523, 50002)

PAGE_SETUP = """
import time
def inc(x):
    return x + 1
def timed_map():
    began = time.perf_counter()
    assert client.map(inc, range({tasks}))[-1] == {tasks}
    return time.perf_counter() - began
timed_map()
"""

#: A CPython client that maps once per line it reads, printing each map's seconds.
NATIVE_MAP = """
import sys, time
from scaler import Client
def inc(x):
    return x + 1
with Client(sys.argv[1]) as client:
    client.map(inc, range({tasks}))
    print("ready", flush=True)
    for _ in sys.stdin:
        began = time.perf_counter()
        assert client.map(inc, range({tasks}))[-1] == {tasks}
        print(time.perf_counter() - began, flush=True)
"""


@contextlib.contextmanager
def web_stack(python: Path, folder: Path) -> Iterator[str]:
    """The web example on free ports: its scheduler's ws:// address."""
    text = example_text("web")
    base = free_tcp_port_block(len(EXAMPLE_PORTS))
    for index, port in enumerate(EXAMPLE_PORTS):
        text = re.sub(rf"(?<=:){port}\b", str(base + index), text)
    (folder / "web.toml").write_text(text)
    log = folder / "web.log"
    with log.open("wb") as output:
        stack = subprocess.Popen([str(python), "-m", "scaler", "web.toml"], cwd=folder, stdout=output,
                                 stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while "worker manager" not in log.read_text() and stack.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        yield f"ws://127.0.0.1:{base}"
    finally:
        stack.terminate()
        stack.wait(60)


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextlib.contextmanager
def served(folder: Path) -> Iterator[str]:
    handler = functools.partial(_QuietHandler, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def open_page(url: str, scheduler: str, keys: Path, tasks: int, profile: Path) -> Any:
    """The page, connected, with `timed_map()` defined and warmed."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 f"--user-data-dir={profile}"):  # fmt: skip
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    driver.set_script_timeout(600)
    driver.get(url)
    driver.execute_async_script("const done = arguments[arguments.length - 1]; window.scalerPage.ready.then(done);")
    driver.find_element("id", "client-key").send_keys(str(keys / "client.key_secret"))
    driver.find_element("id", "server-key").send_keys(str(keys / "server.key"))
    connect = (
        f"from scaler.browser import Client\n"
        f"client = Client({scheduler!r}, curve_secret_key=CLIENT_KEY, curve_server_key=SERVER_KEY)"
    )
    assert run(driver, connect)["error"] is None
    assert run(driver, PAGE_SETUP.format(tasks=tasks))["error"] is None
    return driver


def run(driver: Any, code: str) -> dict[str, Any]:
    script = "const done = arguments[arguments.length - 1]; window.scalerPage.run(arguments[0]).then(done);"
    result: dict[str, Any] = driver.execute_async_script(script, code)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5)
    arguments = parser.parse_args()
    python = ROOT / f".venv-{PYODIDE_PYTHON}" / "bin" / "python"
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        problem = assemble(folder / "site" / "try").problem  # wheels of this environment's scaler and dependencies
        if problem is not None:
            raise SystemExit(f"browser_map: the page cannot run: {problem}")
        keys = folder / "browser-keys"
        subprocess.run([str(python.parent / "scaler_keygen"), "export", str(keys), "--role", "client"],
                       check=True, capture_output=True)  # fmt: skip
        with web_stack(python, folder) as scheduler, served(folder / "site") as base:
            driver = open_page(f"{base}try/index.html", scheduler, keys, arguments.tasks, folder / "profile")
            native = subprocess.Popen([str(python), "-c", NATIVE_MAP.format(tasks=arguments.tasks), scheduler],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=folder)  # fmt: skip
            assert native.stdin is not None and native.stdout is not None
            assert native.stdout.readline().strip() == "ready"
            browser, cpython, loads = [], [], []
            for _ in range(arguments.repeat):
                loads.append(os.getloadavg()[0])
                result = run(driver, "print(timed_map())")
                assert result["error"] is None, result
                browser.append(float(result["output"]))
                native.stdin.write("map\n")
                native.stdin.flush()
                cpython.append(float(native.stdout.readline()))
            native.stdin.close()
            native.wait(60)
            run(driver, "client.disconnect()")
            driver.quit()
            load = statistics.median(loads)
    page_median, native_median = statistics.median(browser), statistics.median(cpython)
    print(f"map of {arguments.tasks:,} tiny tasks, median of {arguments.repeat} alternated (load average {load:.1f}):")
    print(f"  browser (Pyodide {PYODIDE_VERSION}, chromium): {page_median * 1000:.0f} ms  "
          f"{[round(value * 1000) for value in browser]}")  # fmt: skip
    print(f"  CPython (scaler.Client):            {native_median * 1000:.0f} ms  "
          f"{[round(value * 1000) for value in cpython]}")  # fmt: skip
    print(f"  ratio: {page_median / native_median:.2f}x")


if __name__ == "__main__":
    main()
