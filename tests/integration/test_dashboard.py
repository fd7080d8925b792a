"""The web dashboard in a real headless browser (Debian's chromium through Selenium), its /metrics parsed
with prometheus-client's parser, and `scaler FILE` starting it from a [webui] section.

Set SCALER_SCREENSHOTS=docs/images to refresh the screenshots docs/monitoring.md shows.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import os
import shutil
import signal
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from scaler import Client
from scaler.io.address import free_tcp_port_block
from tests.integration.conftest import (
    Addresses,
    Launcher,
    Service,
    monitor,
    running_stack,
    session_security,
    wait_for,
)
from tests.integration.test_launcher import Stack

#: its module fixtures (a chromium, a stack) are made once: its tests share one test process (make test: --dist
#: loadgroup)
pytestmark = [pytest.mark.integration, pytest.mark.timeout(180), pytest.mark.xdist_group("test_dashboard")]

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
needs_browser = pytest.mark.skipif(
    CHROMIUM is None or CHROMEDRIVER is None,
    reason="chromium and chromedriver are not installed (make test installs them)",
)


def start_dashboard(launcher: Launcher, addresses: Addresses) -> tuple[Service, str]:
    port = free_tcp_port_block(1)
    service = launcher.start("scaler_gui", addresses.monitor, "--gui-address", f"127.0.0.1:{port}", "-bi", "0.2")
    service.wait_for_log("dashboard at")
    return service, f"http://127.0.0.1:{port}/"


def fetch(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as answer:
        return str(answer.read().decode())


def slow_square(x: int) -> int:
    import time

    time.sleep(0.05)
    return x * x


@contextlib.contextmanager
def headless_chromium(folder: Path) -> Iterator[Any]:
    """A headless chromium driven by Selenium, its profile in `folder`; quit on the way out."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service as DriverService

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    profile = folder / "chromium-profile"
    flags = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--window-size=1400,1000", f"--user-data-dir={profile}"]  # fmt: skip
    for flag in flags:
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=DriverService(str(CHROMEDRIVER)), options=options)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture(scope="module")
def metrics_port() -> int:
    """The port of the module stack's scheduler's own /metrics (`--metrics-address`)."""
    return free_tcp_port_block(1)


@pytest.fixture(scope="module")
def module_stack(tmp_path_factory: pytest.TempPathFactory, metrics_port: int) -> Iterator[Addresses]:
    """One stack of two workers for the module's tests that run tasks and read them on a dashboard of their own
    (a fresh dashboard's task log holds only the test's tasks; the scheduler's counters run on over the module, so
    these tests count from the figures they find); its scheduler serves /metrics itself on `metrics_port`."""
    arguments = ("--metrics-address", f"127.0.0.1:{metrics_port}")
    with running_stack(tmp_path_factory.mktemp("dashboard-stack"), workers=2, scheduler_args=arguments) as addresses:
        yield addresses


@pytest.fixture
def idle_stack(module_stack: Addresses) -> Addresses:
    """The module's stack once no task is queued or running (the tasks a test before cancelled are over, and
    cannot move the counters a test reads)."""
    with monitor(module_stack.monitor) as next_snapshot:
        next_snapshot(lambda snapshot: snapshot.scheduler.queued == 0 and snapshot.scheduler.running == 0)
    return module_stack


@pytest.fixture(scope="module")
def module_chromium(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One chromium for the module's tests (a start is seconds); `browser` hands it to each test as new."""
    with headless_chromium(tmp_path_factory.mktemp("browser")) as driver:
        yield driver


@pytest.fixture
def browser(module_chromium: Any) -> Any:
    """The module's chromium on a blank page, its log read out and its window at the size it starts with, so a
    test sees nothing of the one before."""
    module_chromium.get("about:blank")
    module_chromium.get_log("browser")
    module_chromium.set_window_size(1400, 1000)
    return module_chromium


def card(driver: Any, name: str) -> str:
    """A card's value, read in one script call (the page redraws its elements on every update)."""
    found = driver.execute_script(f"const e = document.querySelector('.card[data-name=\"{name}\"] b'); "
                                  "return e ? e.textContent : '';")  # fmt: skip
    return str(found)


def texts(driver: Any, selector: str) -> list[str]:
    return list(driver.execute_script(f"return [...document.querySelectorAll('{selector}')].map(e => e.textContent);"))


def screenshot(driver: Any, name: str) -> None:
    folder = os.environ.get("SCALER_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(Path(folder) / name))


@needs_browser
def test_the_page_shows_the_workers_and_the_task_count_moving(
    launcher: Launcher, idle_stack: Addresses, browser: Any
) -> None:
    addresses = idle_stack
    _service, url = start_dashboard(launcher, addresses)
    browser.get(url)
    wait_for(lambda: card(browser, "workers") == "2", "2 workers on the page")
    page_ids = sorted(texts(browser, "#workers tr td:first-child"))
    assert all(row_id.startswith("Worker|") for row_id in page_ids) and len(page_ids) == 2, page_ids
    before = int(wait_for(lambda: card(browser, "success"), "the success count on the page"))

    with Client(address=addresses.scheduler) as client:
        futures = [client.submit(slow_square, x) for x in range(200)]
        seen = {card(browser, "success")}
        while concurrent.futures.wait(futures, timeout=0.1).not_done:  # read the card until the last one is done
            seen.add(card(browser, "success"))
        assert [future.result() for future in futures] == [x * x for x in range(200)]
    wait_for(lambda: card(browser, "success") == str(before + 200), "200 more successes on the page")
    assert len(seen - {""}) >= 2, f"the success count moved while the tasks ran: {seen}"
    wait_for(lambda: texts(browser, "#timeline rect"), "task spans on the timeline")
    screenshot(browser, "dashboard.png")
    errors = [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]
    assert not errors, errors


@needs_browser
def test_an_elastic_stack_started_from_a_file_shows_its_scaling_decision(tmp_path: Path, browser: Any) -> None:
    base, gui_port = free_tcp_port_block(3), free_tcp_port_block(1)
    scheduler, storage, monitor = (f"tcp://127.0.0.1:{base + offset}" for offset in range(3))
    path = tmp_path / "elastic.toml"
    path.write_text(
        f'[object_storage_server]\nbind_address = "{storage}"\n\n'
        f'[scheduler]\nbind_address = "{scheduler}"\nobject_storage_address = "{storage}"\n'
        'policy_content = "allocate=even_load; scaling=work; cooldown_seconds=60"\n\n'
        f'[[worker_manager]]\ntype = "baremetal_native"\nscheduler_address = "{scheduler}"\n'
        'worker_manager_id = "elastic"\nmax_task_concurrency = 2\nworker_cost_per_hour = 0.5\n\n'
        f'[webui]\nmonitor_address = "{monitor}"\nweb_port = {gui_port}\n'
    )
    stack = Stack(path, tmp_path / "scaler.log")
    try:
        url = wait_for(lambda: _dashboard_url(stack.log()), "the launcher to print the dashboard's URL")
        assert url == f"http://127.0.0.1:{gui_port}/"
        browser.get(url)
        with Client(address=scheduler) as client:
            assert client.map(slow_square, range(20)) == [x * x for x in range(20)]
        # the page may still show the decision made when the manager connected (0 -> 0) until its next refresh
        wait_for(lambda: "0 \u2192 2" in " | ".join(texts(browser, "#decisions td")), "the scaling decision")
        decisions = " | ".join(texts(browser, "#decisions td"))
        assert "elastic" in decisions and "0 \u2192 2" in decisions, decisions
        assert "elastic" in " ".join(texts(browser, "#managers td"))
        # the cooldown keeps both workers: the managers table shows what they cost
        wait_for(lambda: "1.00 (2 \u00d7 0.5)" in texts(browser, "#managers td"), "the manager's spend per hour")
        screenshot(browser, "dashboard-elastic.png")
        errors = [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]
        assert not errors, errors
    finally:
        stack.popen.send_signal(signal.SIGTERM)
        assert stack.popen.wait(timeout=60) == 0
    assert stack.leftovers() == []


def _dashboard_url(log: str) -> str:
    for line in log.splitlines():
        if line.startswith("scaler: dashboard at "):
            return line.split()[3]
    return ""


def test_metrics_parse_and_count_a_known_map(launcher: Launcher, idle_stack: Addresses) -> None:
    from prometheus_client.parser import text_string_to_metric_families

    addresses = idle_stack
    _service, url = start_dashboard(launcher, addresses)

    def samples() -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        found = {}
        for family in text_string_to_metric_families(fetch(url + "metrics")):
            for sample in family.samples:
                found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
        return found

    success = ("scaler_tasks_finished_total", (("state", "success"),))
    failed = ("scaler_tasks_finished_total", (("state", "failed"),))
    before = wait_for(lambda: (found := samples()).get(("scaler_up", ())) == 1 and found, "the scheduler in /metrics")
    with Client(address=addresses.scheduler) as client:
        assert len([client.submit(slow_square, x) for x in range(30)]) == 30
        client.map(slow_square, range(30))  # 30 tasks (a small map goes one call per task)

    wait_for(lambda: samples().get(success) == before[success] + 60, "60 more completed tasks in /metrics")
    values = samples()
    assert values[("scaler_up", ())] == 1
    assert sum(value for (name, _labels), value in values.items() if name == "scaler_workers") == 2
    assert values[failed] == before[failed]
    assert values[("scaler_tasks", (("state", "queued"),))] == 0
    assert ("scaler_task_duration_seconds_count", ()) in values
    assert values[("scaler_scheduler_resident_memory_bytes", ())] > 0
    memory = [value for (name, _labels), value in values.items() if name == "scaler_worker_memory_bytes"]
    limits = [value for (name, _labels), value in values.items() if name == "scaler_worker_memory_limit_bytes"]
    assert len(memory) == len(limits) == 2 and all(0 < used < limit for used, limit in zip(memory, limits, strict=True))


def test_the_scheduler_serves_metrics_itself(idle_stack: Addresses, metrics_port: int) -> None:
    """`--metrics-address` on the scheduler (the module stack's): /metrics without a dashboard process. Checked by
    switching it off: without the flag nothing answers on the port and the fetch fails."""
    from prometheus_client.parser import text_string_to_metric_families

    def finished() -> float:
        text = fetch(f"http://127.0.0.1:{metrics_port}/metrics")
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == "scaler_tasks_finished_total" and sample.labels == {"state": "success"}:
                    return sample.value
        return 0

    before = finished()  # the module's tests before ran tasks on this scheduler
    with Client(address=idle_stack.scheduler) as client:
        assert client.map(slow_square, range(5)) == [x * x for x in range(5)]
    wait_for(lambda: finished() == before + 5, "the scheduler's /metrics to count 5 more tasks")
    with pytest.raises(urllib.error.HTTPError, match="404"):
        fetch(f"http://127.0.0.1:{metrics_port}/state")


def test_scaler_ui_reads_the_seeds_webui_section(launcher: Launcher, tmp_path: Path) -> None:
    port = free_tcp_port_block(1)
    path = tmp_path / "example_config.toml"
    path.write_text(f'[webui]\nmonitor_address = "tcp://127.0.0.1:{free_tcp_port_block(1)}"\nweb_port = {port}\n')
    service = launcher.start("scaler_ui", "--config", str(path))
    log = service.wait_for_log("dashboard at")
    assert f"dashboard at http://127.0.0.1:{port}/" in log
    assert log.count("dashboard at") == 1, "said once (#38: the address was printed and logged)"
    assert "<title>scaler dashboard</title>" in fetch(f"http://127.0.0.1:{port}/")
    service.popen.send_signal(signal.SIGTERM)
    assert service.wait_exit() == 0


def test_a_dashboard_port_out_of_range_is_one_line_and_exit_2(launcher: Launcher, tmp_path: Path) -> None:
    """issue 60: `--gui-address 127.0.0.1:99999` was an OverflowError traceback and exit code 1 (checked before);
    the same for a combo's `dashboard=`, refused before its processes start."""
    from scaler import SchedulerClusterCombo

    service = launcher.start("scaler_gui", f"tcp://127.0.0.1:{free_tcp_port_block(1)}", "--gui-address",
                             "127.0.0.1:99999")  # fmt: skip
    assert service.wait_exit() == 2
    log = service.log_text()
    assert "gui_address '127.0.0.1:99999': port 99999 is outside 0-65535" in log and "Traceback" not in log, log
    with pytest.raises(ValueError, match=r"dashboard '127\.0\.0\.1:99999': port 99999 is outside 0-65535"):
        SchedulerClusterCombo(n_workers=1, dashboard="127.0.0.1:99999")


CHART_FACTS = """
return [...document.querySelectorAll('.uplot')].map((chart) => {
  const canvas = chart.querySelector('canvas');
  return {
    title: (chart.querySelector('.u-title') || {}).textContent || '',
    axes: chart.querySelectorAll('.u-axis').length,
    pixelWidth: canvas.width, shownWidth: canvas.getBoundingClientRect().width, ratio: window.devicePixelRatio,
  };
});
"""


@needs_browser
def test_a_combo_with_dashboard_true_serves_charts_with_axes_and_memory_against_the_limit(
    make_cluster: Any, browser: Any
) -> None:
    """`SchedulerClusterCombo(dashboard=True)`: the link, the client's notebook display, the page with uPlot charts
    (axes, drawn at the screen's pixel ratio, so text is not stretched) and each worker's memory against its limit.
    Checked by switching it off: with `dashboard=False` there is no link (None) and the page cannot load."""
    cluster = make_cluster(n_workers=2, dashboard=True, heartbeat_interval_seconds=0.5)
    link = cluster.dashboard_link
    assert link is not None and link.startswith("http://127.0.0.1:") and link in repr(cluster)
    assert f"<a href='{link}'" in cluster._repr_html_()
    with Client(address=cluster.get_address()) as client:
        assert f"<a href='{link}'" in client._repr_html_()
        browser.get(link)
        wait_for(lambda: card(browser, "workers") == "2", "2 workers on the page")
        futures = [client.submit(slow_square, x) for x in range(80)]
        assert [future.result() for future in futures] == [x * x for x in range(80)]
    wait_for(lambda: len(browser.execute_script(CHART_FACTS)) == 3, "three charts drawn")
    charts = browser.execute_script(CHART_FACTS)
    assert {chart["title"] for chart in charts} == {
        "throughput", "workers' memory (PSS) against their limits", "object storage server: bytes sent"
    }  # fmt: skip
    for chart in charts:
        assert chart["axes"] == 2, chart
        assert abs(chart["pixelWidth"] - chart["shownWidth"] * chart["ratio"]) <= 2, f"stretched: {chart}"
    units = browser.execute_script(  # uPlot draws tick labels on its canvas: ask the charts for them
        "return ['throughput', 'memory'].map((id) => [charts[id].axes[1].label, "
        "charts[id].axes[1].values(charts[id], [1 << 30, 5]).join(' ')]);"
    )
    assert units == [["tasks/s", "1073741824 5.0"], ["memory", "1.0 GiB 5 B"]], units
    headers = texts(browser, "#workers th")
    assert "memory (PSS)" in headers and "limit" in headers and "use" in headers, headers
    cells = texts(browser, "#workers td")
    assert any(cell.endswith("(machine)") or "(cgroup" in cell for cell in cells), cells
    screenshot(browser, "dashboard-combo.png")
    errors = [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]
    assert not errors, errors
    cluster.shutdown()
    with pytest.raises(OSError):
        fetch(link)


#: Every card's content against the card: how far it sticks out on the right (0: nothing is cut).
CARDS_OVERFLOW = """
return [...document.querySelectorAll('main > section')].filter((card) => !card.hidden).map((card) => {
  const right = card.getBoundingClientRect().right;
  const widest = Math.max(...[...card.querySelectorAll('table, .uplot')].map((e) => e.getBoundingClientRect().right));
  return [card.querySelector('h2').textContent, Math.max(0, card.scrollWidth - card.clientWidth, widest - right)];
});
"""
#: A chart of values as wide as a memory axis writes them, then its value axis: its width against its widest value
#: measured in the axis's own font (uPlot draws both on its canvas).
WIDE_VALUES_AXIS = """
const probe = document.createElement('div');
probe.id = 'layout-probe';
document.querySelector('.charts').appendChild(probe);
const now = Date.now() / 1000, mib = 1 << 20;
timeChart('layout-probe', 'probe', [{label: 'used', color: '#e76f51'}], 'memory', (v) => bytes(v),
          [[now - 2, now - 1, now], [900 * mib, 950 * mib, 999 * mib]]);
"""
#: ... once it is drawn (uPlot draws on the next frame).
AXIS_FACTS = """
const chart = charts['layout-probe'], axis = chart.axes[1];
if (!axis._values) return null;
chart.ctx.font = axis.font[0];
const widest = Math.max(...axis._values.map((v) => chart.ctx.measureText(v).width / devicePixelRatio));
return {values: axis._values, room: axis._size - axis.ticks.size - axis.gap, widest: widest};
"""


@needs_browser
def test_no_card_of_the_page_is_cut_and_axis_values_leave_room_for_their_label(
    launcher: Launcher, idle_stack: Addresses, browser: Any
) -> None:
    """issue 60, from screenshots: at 1280 pixels the Clients table's last column was cut (a client's id is long
    and no cell wrapped), at 1024 the Workers and Waiting tasks tables too; a memory axis's values ("953.7 MiB")
    ran into the axis's label ("memory"), the axis being 70 pixels whatever its values. Checked to fail before: the
    Clients card stuck out by about 60 pixels at 1280, and the values needed more room than the axis had. Each
    width loads the page afresh in a window of that width, as a user's would."""
    _service, url = start_dashboard(launcher, idle_stack)
    with Client(address=idle_stack.scheduler) as client:
        assert client.map(slow_square, range(20)) == [x * x for x in range(20)]
        waiting = [client.submit(slow_square, x) for x in range(800)]  # queued a while: the Waiting tasks table
        for width in (1024, 1280):
            browser.set_window_size(width, 1000)
            browser.get(url)
            wait_for(lambda: all(len(texts(browser, f"#{table} td")) > 1 for table in ("clients", "workers",
                                                                                        "pending")),
                     "the client, the workers and the waiting tasks listed")  # fmt: skip
            wait_for(lambda: len(browser.execute_script(CHART_FACTS)) == 3, "three charts drawn")
            cut = [(card, overflow) for card, overflow in browser.execute_script(CARDS_OVERFLOW) if overflow > 1]
            assert cut == [], f"cards whose content sticks out at {width} pixels (pixels): {cut}"
            browser.execute_script(WIDE_VALUES_AXIS)
            axis = wait_for(lambda: browser.execute_script(AXIS_FACTS), "the probe chart drawn")
            assert any("MiB" in value for value in axis["values"]), axis
            assert axis["widest"] <= axis["room"], f"values wider than their axis at {width} pixels: {axis}"
        client.clear()  # cancels what still waits
        assert all(future.done() for future in waiting)


def test_the_dashboard_keeps_a_bounded_number_of_live_pages() -> None:
    """A thousand tabs cannot hold a thousand threads: past MAX_EVENT_STREAMS live pages, /events answers 503 and
    says why; a closed page frees its place. Checked by switching it off: without the semaphore the extra stream
    is served (200)."""
    import http.client
    import threading

    from scaler.config.sections import GUIConfig
    from scaler.monitor.dashboard import MAX_EVENT_STREAMS, Dashboard

    dashboard = Dashboard(GUIConfig(monitor_address=f"tcp://127.0.0.1:{free_tcp_port_block(1)}",
                                    gui_address="127.0.0.1:0"))  # fmt: skip
    server = threading.Thread(target=dashboard.serve, daemon=True)
    server.start()
    port = dashboard.server.server_address[1]
    pages = []
    try:
        for _ in range(MAX_EVENT_STREAMS):
            page = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            page.request("GET", "/events")
            assert page.getresponse().status == 200
            pages.append(page)
        extra = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        extra.request("GET", "/events")
        answer = extra.getresponse()
        assert answer.status == 503 and b"live pages at once" in answer.read()
        extra.close()
        pages.pop().close()

        def another_page_is_served() -> bool:
            page = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            page.request("GET", "/events")
            if page.getresponse().status == 200:
                pages.append(page)
                return True
            page.close()
            return False

        wait_for(another_page_is_served, "a closed page's place to be free again", 30)
    finally:
        for page in pages:
            page.close()
        dashboard.stop()
        server.join(10)


def api(url: str, **params: object) -> dict[str, Any]:
    import urllib.parse

    query = urllib.parse.urlencode(params)
    with urllib.request.urlopen(f"{url}api/tasks?{query}", timeout=10) as answer:
        return dict(json.loads(answer.read()))


def hold_memory(megabytes: int) -> int:
    import time

    held = bytearray(megabytes << 20)
    time.sleep(0.02 * megabytes)
    return len(held)


def test_the_task_log_pages_sorts_and_filters_two_clients_tasks(launcher: Launcher, idle_stack: Addresses) -> None:
    """Every task of two clients in /api/tasks, paged, sorted by each column and filtered by client, on a real
    stack. Checked by switching it off: with the client left off the feed's transitions (codec_monitor's
    clientId not written) every task showed one empty client and the test failed there."""
    addresses = idle_stack
    _service, url = start_dashboard(launcher, addresses)
    with Client(address=addresses.scheduler) as first, Client(address=addresses.scheduler, profiling=True) as second:
        squares = [first.submit(slow_square, x) for x in range(60)]
        held = [second.submit(hold_memory, 1 + x % 8) for x in range(40)]
        assert [f.result() for f in squares] == [x * x for x in range(60)]
        assert [f.result() for f in held] == [(1 + x % 8) << 20 for x in range(40)]
    wait_for(lambda: api(url, state="success")["total"] == 100, "100 successes in the task log")

    pages = [api(url, offset=offset, limit=30) for offset in range(0, 120, 30)]
    rows = [row for page in pages for row in page["tasks"]]
    assert [len(page["tasks"]) for page in pages] == [30, 30, 30, 10] and len({row["task"] for row in rows}) == 100
    assert all(page["total"] == 100 and page["dropped"] == 0 for page in pages)

    clients = {row["client"] for row in rows}
    assert len(clients) == 2 and all(client.startswith("Client|") for client in clients), clients
    for client in clients:
        own = api(url, client=client, limit=100)
        assert own["total"] in (60, 40) and len({row["function"] for row in own["tasks"]}) == 1, own["total"]
    assert {row["function"]: row["client"] for row in rows}.keys() == {"slow_square", "hold_memory"}

    for sort, value in [("client", "client"), ("function", "function"), ("worker", "worker"),
                        ("duration", "duration_seconds"), ("peak_memory", "peak_memory_bytes")]:  # fmt: skip
        for order in ("asc", "desc"):
            got = [row[value] for row in api(url, sort=sort, order=order, limit=100)["tasks"]]
            measured = [v for v in got if v is not None]
            assert got[: len(measured)] == measured, f"{sort}: unmeasured last"
            assert measured == sorted(measured, reverse=order == "desc"), (sort, order, got)
    peaks = [row["peak_memory_bytes"] for row in api(url, sort="peak_memory", limit=100)["tasks"]]
    assert sum(peak is not None for peak in peaks) >= 20, f"the profiled client's peaks are shown: {peaks}"

    searched = api(url, q="HOLD_MEM", limit=100)
    assert searched["total"] == 40 and {row["function"] for row in searched["tasks"]} == {"hold_memory"}
    with pytest.raises(urllib.error.HTTPError) as refused:
        api(url, sort="colour")
    assert refused.value.code == 400 and b"sort: 'colour' is not one of" in refused.value.read()
    submitted = json.loads(fetch(url + "state"))["task_log"]["submitted"]
    assert sorted(list(submitted[client].items()) for client in clients) == [
        [("hold_memory", 40)],
        [("slow_square", 60)],
    ]


@needs_browser
def test_the_task_log_page_shows_rows_and_pages_through_them(
    launcher: Launcher, idle_stack: Addresses, browser: Any
) -> None:
    """The page's task log draws a server page of rows, steps to the next one, and sorts on a header click; the
    clients table keeps a departed client with what it submitted; a click on a task shows its story, as the
    scheduler tells it (`/api/story`), and a task the scheduler forgot answers "forgotten", not an error. Checked
    by switching it off: with `loadTaskLog()` not called the table stayed empty and the first wait failed; with the
    click handler's `loadStory` call removed, the wait for the story's transitions failed; with `/api/story`
    left to the static files (404), that wait failed too."""
    addresses = idle_stack
    _service, url = start_dashboard(launcher, addresses)
    with Client(address=addresses.scheduler) as client:
        assert [f.result() for f in [client.submit(slow_square, x) for x in range(120)]] == [x * x for x in range(120)]
    wait_for(lambda: api(url, state="success")["total"] == 120, "120 successes in the task log")
    browser.get(url)
    wait_for(lambda: "1\u201350 of 120" in "".join(texts(browser, "#tasklog-range")), "the first page of 50")
    first = texts(browser, "#tasklog tr td:first-child")
    assert len(first) == 50
    browser.find_element("id", "tasklog-next").click()
    wait_for(lambda: "51\u2013100 of 120" in "".join(texts(browser, "#tasklog-range")), "the second page")
    second = texts(browser, "#tasklog tr td:first-child")
    assert len(second) == 50 and not set(first) & set(second)
    browser.execute_script("document.querySelector('#tasklog th[data-sort=\"duration\"]').click();")
    wait_for(lambda: "\u25bc" in "".join(texts(browser, '#tasklog th[data-sort="duration"]')), "sorted by duration")
    shown = [float(text.split()[0]) for text in texts(browser, "#tasklog tr td:nth-child(7)")]
    assert shown == sorted(shown, reverse=True) and len(shown) == 50
    assert "holds 120 of at most 100000 tasks" in texts(browser, "#tasklog-bound")[0]
    clients = texts(browser, "#clients td")
    assert any(text.endswith("(gone)") for text in clients) and "slow_square \u00d7120" in clients, clients
    browser.execute_script("document.getElementById('clients').scrollIntoView();")
    screenshot(browser, "dashboard-task-log.png")

    clicked = browser.find_element("css selector", "#tasklog td.story")
    task = clicked.get_attribute("data-task")
    clicked.click()
    wait_for(lambda: "transitions" in "".join(texts(browser, "#story-title")), "the clicked task's story")
    assert task in texts(browser, "#story-title")[0]
    what = texts(browser, "#story td:nth-child(3)")
    assert {"queued", "dispatched", "started", "finished (success)", "success"} <= set(what), what
    assert any("dispatch attempt 1" in cause for cause in texts(browser, "#story td:nth-child(4)"))
    screenshot(browser, "dashboard-task-story.png")

    forgotten = json.loads(fetch(f"{url}api/story?task={'ab' * 16}"))
    assert forgotten["forgotten"] and not forgotten["entries"] and "does not know this task" in forgotten["note"]
    browser.execute_script(f"loadStory('{'ab' * 16}');")
    wait_for(lambda: "forgotten by the scheduler" in "".join(texts(browser, "#story-title")), "the forgotten note")
    with pytest.raises(urllib.error.HTTPError) as refused:
        fetch(f"{url}api/story?task=not-hex")
    assert refused.value.code == 400 and "not a task id in hex" in refused.value.read().decode()
    errors = [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]
    assert not errors, errors


def test_task_log_pages_are_answered_from_a_cache_until_the_log_changes() -> None:
    """Many tabs asking for the same page cost one query per change of the log, and a bad parameter is a 400
    naming it. Checked by switching it off: without the cache the second answer was a new bytes object."""
    from scaler.config.sections import GUIConfig
    from scaler.monitor.dashboard import Dashboard
    from scaler.protocol import messages as m

    dashboard = Dashboard(GUIConfig(monitor_address=f"tcp://127.0.0.1:{free_tcp_port_block(1)}",
                                    gui_address="127.0.0.1:0"))  # fmt: skip
    try:
        task = m.TaskTransition(b"\x01" * 16, "queued", function_name="f", wall_time=1.0, client_id=b"Client|c")
        dashboard.task_log.on_transitions(m.TaskTransitions((task,)))
        first = dashboard.answer("/api/tasks", "limit=5&sort=duration")
        assert first[0] == 200 and json.loads(first[2])["total"] == 1
        assert dashboard.answer("/api/tasks", "limit=5&sort=duration")[2] is first[2], "the same page, not a new query"
        dashboard.task_log.on_transitions(m.TaskTransitions((m.TaskTransition(b"\x02" * 16, "queued"),)))
        assert json.loads(dashboard.answer("/api/tasks", "limit=5&sort=duration")[2])["total"] == 2
        code, kind, body = dashboard.answer("/api/tasks", "limit=0")
        assert (code, kind) == (400, "application/json") and json.loads(body)["parameter"] == "limit", body
    finally:
        dashboard.server.server_close()


def fail_on_odd(x: int) -> int:
    if x % 2:
        raise ValueError(f"odd {x}")
    return x


@needs_browser
def test_jobs_are_listed_on_the_page_and_in_api_jobs(launcher: Launcher, idle_stack: Addresses, browser: Any) -> None:
    """A detached job (its submitter gone) in /api/jobs and in the page's jobs table, with its tasks done and
    failed. Checked by switching it off: with the jobs left off the status (codec_monitor writing no jobs)
    /api/jobs stays empty and the page says "no job"."""
    addresses = idle_stack
    _service, url = start_dashboard(launcher, addresses)
    with Client(address=addresses.scheduler) as client:
        job = client.map_job(fail_on_odd, range(6), name="nightly-risk")
        concurrent.futures.wait(job.futures)

    def jobs() -> list[dict[str, Any]]:
        with urllib.request.urlopen(f"{url}api/jobs", timeout=10) as answer:
            return list(json.loads(answer.read())["jobs"])

    (listed,) = wait_for(lambda: [j for j in jobs() if j["done"] == 6 and not j["submitter_connected"]], "the job")
    assert (listed["name"], listed["state"], listed["total"], listed["failed"]) == ("nightly-risk", "done", 6, 3)
    owner = session_security("client").public.decode()  # secure by default: the job is the client key's
    assert listed["owner_key"] and owner.startswith(listed["owner_key"]) and listed["age_seconds"] >= 0
    browser.get(url)
    wait_for(lambda: "nightly-risk" in texts(browser, "#jobs td"), "the job on the page")
    row = texts(browser, "#jobs tr:nth-child(2) td")
    assert row[:4] == ["nightly-risk", "done", "6/6", "3"] and row[4].endswith("(gone)"), row
    errors = [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]
    assert not errors, errors
