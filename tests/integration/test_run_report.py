"""`scaler.performance_report` around a real cluster: the report of a small map of two functions (one task
failing) opened in Debian's headless Chromium with the network off, its sections and numbers read from the page;
a report path that cannot be written fails at the block's end, naming the path, after the block ran."""

from __future__ import annotations

import re
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import scaler
from scaler import Client, SchedulerClusterCombo
from scaler.io.address import free_tcp_port_block
from scaler.monitor.performance_report import ReportWriteError
from tests.integration import test_dashboard
from tests.integration.conftest import probe_scheduler, running_cluster
from tests.integration.test_dashboard import needs_browser
from tests.integration.test_launcher import STACK_START_SECONDS, Stack

#: its module fixtures are made once: its tests share one test process (make test: --dist loadgroup)
pytestmark = [pytest.mark.integration, pytest.mark.timeout(120), pytest.mark.xdist_group("test_run_report")]

#: the dashboard tests' headless Chromium (Selenium), as fixtures of this module: the module's one chromium, and each
#: test's hand-over of it
module_chromium = test_dashboard.module_chromium
dashboard_browser = test_dashboard.browser

SECTIONS = ("summary", "functions", "timeline", "managers", "workers", "scaling", "memory", "limits")


def square(x: int) -> int:
    return x * x


def fail_on_three(x: int) -> int:
    if x == 3:
        raise ValueError("three")
    return x


@pytest.fixture(scope="module")
def cluster() -> Iterator[SchedulerClusterCombo]:
    with running_cluster(2) as started:
        yield started


def run_two_functions(client: Client) -> None:
    """Ten squares (a map) and five of the other, the fourth of which fails."""
    assert client.map(square, range(10)) == [x * x for x in range(10)]
    futures = [client.submit(fail_on_three, x) for x in range(5)]
    outcomes = [future.exception() is None for future in futures]
    assert outcomes == [True, True, True, False, True]


def page_value(driver: Any, selector: str) -> str:
    return str(driver.execute_script("const e = document.querySelector(arguments[0]); return e ? e.textContent : null;",
                                     selector))  # fmt: skip


@needs_browser
def test_the_report_of_a_small_run_opens_offline_with_its_sections_and_counts(
    cluster: SchedulerClusterCombo, dashboard_browser: Any, tmp_path: Path
) -> None:
    """Checked against a report whose counts were taken from the first status only (every count read 0)."""
    path = tmp_path / "run.html"
    with Client(cluster.get_address()) as client:
        with scaler.performance_report(path):  # the scheduler found through the client and the cluster
            run_two_functions(client)
    assert path.is_file()
    browser = dashboard_browser
    browser.set_network_conditions(offline=True, latency=0, download_throughput=0, upload_throughput=0)
    browser.get(path.as_uri())
    found = browser.execute_script("return [...document.querySelectorAll('section')].map(s => s.id);")
    assert found == list(SECTIONS)
    functions = "#functions tr[data-function='{}'] td[data-name='{}']"
    assert page_value(browser, functions.format("square", "succeeded")) == "10"
    assert page_value(browser, functions.format("square", "failed")) == "0"
    assert page_value(browser, functions.format("fail_on_three", "succeeded")) == "4"
    assert page_value(browser, functions.format("fail_on_three", "failed")) == "1"
    assert page_value(browser, functions.format("square", "measured")) == "10"  # every run timed
    assert page_value(browser, "#summary td[data-name='tasks-ended']") == "15"
    # one bar per task on the timeline, the failed one coloured apart, on an axis in seconds
    assert browser.execute_script("return document.querySelectorAll('#timeline rect.bar').length;") == 15
    assert (
        browser.execute_script("return document.querySelectorAll('#timeline rect.bar[fill=\"#e15759\"]').length;") == 1
    )
    assert "seconds" in page_value(browser, "#timeline svg .axis-label")
    workers = browser.execute_script("return document.querySelectorAll('#workers tbody tr').length;")
    assert workers == 2
    assert "profiled tasks" in page_value(browser, "#memory .note")
    # nothing was fetched: the page is whole (its policy forbids any fetch, and the network is off anyway)
    assert browser.execute_script("return performance.getEntriesByType('resource').length;") == 0
    errors = [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]
    assert not errors, errors


def test_a_report_path_that_cannot_be_written_fails_at_the_end_naming_it_after_the_block_ran(
    cluster: SchedulerClusterCombo, tmp_path: Path
) -> None:
    """Checked by swallowing the write error in `RunReport.__exit__`: the block then ended quietly and no
    report existed."""
    path = tmp_path / "no such folder" / "run.html"
    ran = []
    with Client(cluster.get_address()) as client:
        with pytest.raises(ReportWriteError) as raised:
            with scaler.performance_report(path, address=cluster.get_address()):
                ran.append(client.submit(square, 7).result())
    assert ran == [49]
    assert str(path) in str(raised.value) and isinstance(raised.value, OSError)
    assert not list(tmp_path.iterdir())  # no temporary file left either


def test_an_error_of_the_block_is_not_hidden_by_an_unwritable_report(
    cluster: SchedulerClusterCombo, tmp_path: Path
) -> None:
    with pytest.raises(ZeroDivisionError):
        with scaler.performance_report(tmp_path / "missing" / "run.html", address=cluster.get_address()):
            _ = 1 / 0


def test_a_scheduler_that_cannot_be_heard_is_named_at_the_start(tmp_path: Path) -> None:
    from scaler.monitor import performance_report as module

    port = free_tcp_port_block(3)
    report = scaler.performance_report(tmp_path / "run.html", address=f"tcp://127.0.0.1:{port}")
    original, module.CONNECT_TIMEOUT_SECONDS = module.CONNECT_TIMEOUT_SECONDS, 1.0
    try:
        with pytest.raises(ConnectionError, match=f"127.0.0.1:{port + 2}"):
            report.__enter__()
    finally:
        module.CONNECT_TIMEOUT_SECONDS = original


def slow_square(x: int) -> int:
    import time

    time.sleep(0.05)
    return x * x


def test_an_elastic_runs_report_shows_the_scaling_decision_the_workers_joining_and_their_cost(tmp_path: Path) -> None:
    """A `scaler FILE` stack whose manager starts workers on demand at 0.5 an hour: the report's scaling table
    has the 0 -> 2 decision with its reason, and the manager's row the workers that joined and a cost above 0
    (checked with the cost summed from the units the manager reports only: its heartbeat lagged behind the
    short run and the row read 0)."""
    base = free_tcp_port_block(3)
    scheduler, storage = f"tcp://127.0.0.1:{base}", f"tcp://127.0.0.1:{base + 1}"
    stack_file = tmp_path / "elastic.toml"
    stack_file.write_text(
        f'[object_storage_server]\nbind_address = "{storage}"\n\n'
        f'[scheduler]\nbind_address = "{scheduler}"\nobject_storage_address = "{storage}"\n'
        'policy_content = "allocate=even_load; scaling=work; cooldown_seconds=60"\n\n'
        f'[[worker_manager]]\ntype = "baremetal_native"\nscheduler_address = "{scheduler}"\n'
        'worker_manager_id = "elastic"\nmax_task_concurrency = 2\nworker_cost_per_hour = 0.5\n'
    )
    stack = Stack(stack_file, tmp_path / "scaler.log")
    path = tmp_path / "run.html"
    try:
        # the stack's start took 14 s once under the whole suite's load, beyond a client's 15 s wait less the
        # launcher's own start: wait for the scheduler as a script that starts a stack and uses it at once should
        probe_scheduler(scheduler, STACK_START_SECONDS, stack.popen)
        with Client(address=scheduler) as client:
            with scaler.performance_report(path, address=scheduler):
                assert client.map(slow_square, range(20)) == [x * x for x in range(20)]
        stack.remember()
    finally:
        stack.popen.send_signal(signal.SIGTERM)
        assert stack.popen.wait(timeout=60) == 0
    assert stack.leftovers() == []
    page = path.read_text()
    scaling = re.search(r'<section id="scaling">(.*?)</section>', page, re.DOTALL)
    assert scaling is not None and "0 → 2" in scaling.group(1), page
    reason = re.search(r'data-name="change">0 → 2</td><td data-name="reason" class="text">([^<]+)<', scaling.group(1))
    assert reason is not None and reason.group(1).strip()
    row = re.search(r'<tr data-manager="elastic">(.*?)</tr>', page)
    assert row is not None
    cells = dict(re.findall(r'data-name="([\w-]+)"[^>]*>([^<]*)<', row.group(1)))
    assert cells["type"] == "baremetal_native" and cells["cost-per-hour"] == "0.5"
    assert int(cells["joined"]) == 2 and float(cells["first-join"]) >= 0
    assert float(cells["cost"]) > 0 and float(cells["unit-hours"]) > 0, str(sorted(cells.items()))
