"""The documentation site as a reader meets it: `docs/build_site.py` (what `make docs` runs) builds it without a
warning, a local HTTP server serves the folder, and Debian's chromium (through Selenium, as the dashboard's tests
drive it) opens the first page and follows every link inside the site: every page of docs/ and docs/guide/, the API
reference and the try page are reached, every link leads to something the server has, every `#anchor` names an element
of its page, every picture loads, everything a page loads from the site (the try page: Pyodide, its wheels) answers,
and the search page finds a word.

The walk itself is checked on a small site of two pages with a broken link, a broken anchor, a broken picture and a
script that is not there: it reports each (`test_the_walk_reports_a_broken_link_anchor_and_picture`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import http.server
import shutil
import subprocess
import sys
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.conftest import wait_for
from tests.integration.fresh_install import ROOT
from tests.unit.test_docs_site import pages

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600), pytest.mark.xdist_group("test_docs_site")]

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
needs_browser = pytest.mark.skipif(
    CHROMIUM is None or CHROMEDRIVER is None,
    reason="chromium and chromedriver are not installed (make test installs them)",
)
needs_sphinx = pytest.mark.skipif(
    shutil.which("sphinx-build", path=str(Path(sys.executable).parent)) is None,
    reason="the docs extra is not installed (make test installs it: .[test,dev,docs])",
)

#: What a page tells the walk in one script call: its links (resolved), the ids of its elements, its pictures that
#: did not load, and what else it loaded (scripts, fetches: address and HTTP status; not its pictures, told already,
#: nor the browser's own request of a favicon).
PAGE_FACTS = """
return {
  links: [...document.querySelectorAll('a[href]')].map(a => a.href),
  ids: [...document.querySelectorAll('[id]')].map(e => e.id).concat(
       [...document.querySelectorAll('a[name]')].map(e => e.name)),
  broken_pictures: [...document.querySelectorAll('img')].filter(i => !(i.complete && i.naturalWidth > 0))
       .map(i => i.getAttribute('src')),
  loaded: performance.getEntriesByType('resource')
       .filter(e => e.initiatorType !== 'img' && !e.name.endsWith('/favicon.ico'))
       .map(e => [e.name, e.responseStatus]),
};
"""
#: A page that loads a program (the try page: `window.scalerPage.ready`) has loaded what it loads once that settles.
SETTLED = """
const done = arguments[arguments.length - 1];
if (!window.scalerPage) { done(true); } else { window.scalerPage.ready.then(() => done(true), () => done(false)); }
"""


@dataclasses.dataclass
class Walk:
    pages: set[str] = dataclasses.field(default_factory=set)  #: paths of the HTML pages opened
    links: int = 0  #: internal links followed (counting repeats)
    problems: list[str] = dataclasses.field(default_factory=list)


@pytest.fixture(scope="module")
def built_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    output = tmp_path_factory.mktemp("site") / "html"
    done = subprocess.run([sys.executable, str(ROOT / "docs" / "build_site.py"), str(output)], capture_output=True,
                          text=True, timeout=400, cwd=ROOT, stdin=subprocess.DEVNULL)  # fmt: skip
    assert done.returncode == 0 and done.stderr == "", done.stderr
    return output


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextlib.contextmanager
def serve(folder: Path) -> Iterator[str]:
    """A local HTTP server of `folder` on a free loopback port, for as long as the generator is open."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_QuietHandler, directory=str(folder)))
    thread = threading.Thread(target=server.serve_forever, name="docs-site-server", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One chromium for the module's walks (each of another site, on a port of its own): a start is seconds."""
    with chromium(tmp_path_factory.mktemp("browser")) as driver:
        yield driver


@contextlib.contextmanager
def chromium(tmp_path: Path) -> Iterator[Any]:
    """Headless chromium driven by Selenium, its profile in `tmp_path`."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service as DriverService

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    flags = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--window-size=1400,1000", f"--user-data-dir={tmp_path / 'chromium-profile'}"]  # fmt: skip
    for flag in flags:
        options.add_argument(flag)
    driver = webdriver.Chrome(service=DriverService(str(CHROMEDRIVER)), options=options)
    driver.set_script_timeout(300)  # a page that loads Python (the try page) settles in tens of seconds
    try:
        yield driver
    finally:
        driver.quit()


def fetched(url: str) -> int:
    """The HTTP status the server answers for `url`."""
    try:
        with urllib.request.urlopen(url, timeout=20) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as error:
        return int(error.code)


def walk(driver: Any, base: str) -> Walk:
    """Open `base` + index.html and every HTML page of the site its links reach, breadth first; check every link
    inside the site (its target exists; its anchor names an element there) and every picture."""
    walked = Walk()
    start = urllib.parse.urljoin(base, "index.html")
    queue, seen = [start], {start}
    ids: dict[str, set[str]] = {}
    anchors: list[tuple[str, str, str]] = []  # (page, anchor, the page linking)
    statuses: dict[str, int] = {}
    while queue:
        url = queue.pop(0)
        driver.get(url)
        wait_for(lambda: driver.execute_script("return document.readyState") == "complete", f"{url} loaded")
        driver.execute_async_script(SETTLED)
        facts = driver.execute_script(PAGE_FACTS)
        path = urllib.parse.urlsplit(url).path
        walked.pages.add(path)
        ids[url] = set(facts["ids"])
        walked.problems += [f"{path}: picture {src} did not load" for src in facts["broken_pictures"]]
        walked.problems += [f"{path}: loading {address} answered {status}" for address, status in facts["loaded"]
                            if address.startswith(base) and not 200 <= status < 400]  # fmt: skip
        for link in facts["links"]:
            target, _, anchor = link.partition("#")
            if not target.startswith(base):
                continue  # outside the site: not this walk's business
            walked.links += 1
            if target not in statuses:
                statuses[target] = fetched(target)
            if statuses[target] != 200:
                walked.problems.append(f"{path}: link to {link} answers {statuses[target]}")
                continue
            if anchor:
                anchors.append((target, urllib.parse.unquote(anchor), path))
            if target.endswith(".html") and target not in seen:
                seen.add(target)
                queue.append(target)
    for target, anchor, source in anchors:
        if target in ids and anchor not in ids[target]:
            walked.problems.append(f"{source}: link to {target}#{anchor}: no such anchor there")
    return walked


def expected_paths() -> set[str]:
    """The URL path of every page of docs/ and docs/guide/, the API reference's, and the try page's."""
    return {f"/{page}.html" for page in pages()} | {"/api/scaler.html", "/api/scaler/errors.html", "/try/index.html"}


@needs_browser
@needs_sphinx
def test_every_page_and_link_of_the_built_site_in_a_browser(built_site: Path, browser: Any) -> None:
    with serve(built_site) as base:
        walked = walk(browser, base)
        assert not walked.problems, "\n".join(walked.problems)
        unreached = expected_paths() - walked.pages
        assert not unreached, f"pages no link of the site reaches: {sorted(unreached)}"
        assert walked.links > 1000, walked.links  # the navigation alone links every page from every page

        browser.get(urllib.parse.urljoin(base, "search.html?q=scheduler"))
        results = "return [...document.querySelectorAll('#search-results li a')].map(a => a.href);"
        wait_for(lambda: len(browser.execute_script(results)) >= 5, "the search page lists pages with the word")
        found = browser.execute_script(results)
        assert any("/guide/" in href for href in found), found
        for href in found[:3]:
            assert fetched(href.partition("#")[0]) == 200, href


def small_site(folder: Path) -> Path:
    folder.mkdir()
    (folder / "index.html").write_text(
        '<h1 id="top">Index</h1><a href="a.html">a</a> <a href="a.html#here">here</a> <a href="a.html#gone">gone</a>'
        ' <a href="missing.html">missing</a> <a href="https://example.invalid/">outside</a>'
    )
    (folder / "a.html").write_text(
        '<h1 id="here">A</h1><img src="nope.png"><a href="index.html#top">back</a><script src="gone.js"></script>'
    )
    return folder


@needs_browser
def test_the_walk_reports_a_broken_link_anchor_and_picture(tmp_path: Path, browser: Any) -> None:
    with serve(small_site(tmp_path / "small")) as base:
        walked = walk(browser, base)
        assert walked.pages == {"/index.html", "/a.html"}
        assert len(walked.problems) == 4, walked.problems
        assert any("missing.html answers 404" in problem for problem in walked.problems)
        assert any(problem.endswith("gone.js answered 404") for problem in walked.problems)
        assert any("a.html#gone: no such anchor" in problem for problem in walked.problems)
        assert any("picture nope.png did not load" in problem for problem in walked.problems)
