"""The documentation tier (#38, goal 5): every shell command, TOML file and Python block of README.md and
docs/guide/*.md runs, in the page's order, in one working folder per page, from this tree's wheel installed into a
fresh virtual environment outside the repository, as the README says to install it; with the pip such an
environment has, and, for the pages where pip is at work (an install, a cloud manager's environment check), with a
current pip too. A step that does not do what the page says fails the page.

The steps are read from the markdown itself (tests/docs/steps.py), so what is tested is what a reader reads; a
block that cannot run here says why in an HTML comment the reader does not see (`<!-- doc-test: skip reason=... -->`).
Long-running commands (a stack, the fake cloud, `scaler_top`) run in the background, the next step starting once
they printed what a reader waits for, and stop with Ctrl-C where the page says so or at its end
(tests/docs/programs.py, runner.py). The pages that start servers use the ports the docs name (8516-8518, 5000,
50001, ...), so they run one after another, in one test process (one xdist group); the others in another group
beside them (each group's process makes its own reader environments).

Run one page: `pytest tests/docs -k quick_start`; `DOC_TEST_KEEP_GOING=1` runs a page's steps after its first
failure too (to see every failing step at once). The summary at the end of the run gives each page's counts.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.docs.programs import long_running
from tests.docs.readers import FLAVOURS, Reader
from tests.docs.report import cpu_seconds, record
from tests.docs.runner import PageRun, StepResult
from tests.docs.steps import Step, page_steps
from tests.integration.fresh_install import ROOT

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1500)]

#: In the reader's order: the README, then the guide as its index lists it.
PAGES = ["README.md", *(f"docs/guide/{name}" for name in (
    "quick_start.md", "client_api.md", "clusters.md", "code_on_workers.md", "scaling_and_cloud.md", "bursting.md",
    "monitoring_and_security.md", "failures.md", "troubleshooting.md", "performance_tips.md", "migrating.md",
    "sharing.md", "security.md", "README.md",
))]  # fmt: skip


def test_every_page_of_the_guide_is_in_the_tier() -> None:
    guide = {f"docs/guide/{page.name}" for page in (ROOT / "docs" / "guide").glob("*.md")}
    assert guide <= set(PAGES), f"not in the documentation tier: {sorted(guide - set(PAGES))}"


def steps_of(page: str) -> list[Step]:
    return page_steps(page, (ROOT / page).read_text())


def pip_at_work(page: str) -> bool:
    """A page that installs scaler-compute itself, or whose stack checks the reader's environment with pip (a cloud
    manager's `environment` on the fake cloud): what the pip a reader has can change. The other pages run with the
    pip a fresh environment has (which also installs their extras)."""
    return any(_PIP_AT_WORK.search(step.text) for step in steps_of(page) if step.skip_reason is None)


def group_of(page: str) -> str:
    """The pages that start servers at the ports the docs name (8516-8518, 5000, 50001, ...) run one after another in
    one test process (an xdist group); the others (clusters of their own at free ports) in another, beside them."""
    for step in steps_of(page):
        if step.skip_reason is not None:
            continue
        if _FIXED_PORT.search(step.text) or any(
            command.endswith("&") or long_running(command, ROOT) for command in step.commands
        ):
            return AT_FIXED_PORTS
    return "docs"


#: an address with a port, in a step (a script's own stack, a client of a running one)
_FIXED_PORT = re.compile(r"(?:127\.0\.0\.1|localhost|0\.0\.0\.0):\d+")


AT_FIXED_PORTS = "docs-at-fixed-ports"
#: Held while a page at the docs' ports runs: such pages wait for one another even when they run in different test
#: processes (or in two test sessions on one machine), so that none finds its ports taken by another.
FIXED_PORTS_LOCK = Path(tempfile.gettempdir()) / "scaler-doc-tier-fixed-ports.lock"


@contextlib.contextmanager
def ports_of(page: str) -> Iterator[None]:
    if group_of(page) != AT_FIXED_PORTS:
        yield
        return
    with FIXED_PORTS_LOCK.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


_PIP_AT_WORK = re.compile(r"scaler_compute-\*\.whl|scaler_fake_cloud|FakeCloud")
RUNS = [
    pytest.param(page, flavour, marks=pytest.mark.xdist_group(group_of(page)), id=f"{page}-{flavour}")
    for page in PAGES
    for flavour in FLAVOURS
    if flavour == "bundled" or pip_at_work(page)
]


@pytest.mark.parametrize(("page", "flavour"), RUNS)
def test_a_page_runs_as_written(
    page: str,
    flavour: str,
    reader_of: dict[str, Reader],
    tmp_path_factory: pytest.TempPathFactory,
    request: pytest.FixtureRequest,
) -> None:
    steps = steps_of(page)
    reader = reader_of[flavour]
    home = tmp_path_factory.mktemp(f"{Path(page).stem}-{flavour}")
    folder = home / "work"
    folder.mkdir()
    run = PageRun(page, folder, reader.page_environment(home), reader.python)
    keep_going = os.environ.get("DOC_TEST_KEEP_GOING") == "1"
    results: list[StepResult] = []
    with ports_of(page):
        wall, cpu = time.monotonic(), cpu_seconds()
        try:
            for step in steps:
                if results and results[-1].outcome == "failed" and not keep_going:
                    results.append(StepResult(step, "not reached"))
                    continue
                results.append(run.run(step))
        finally:
            results += run.finish()
    record(request.node, page, f"pip {reader.pip_version}", results, time.monotonic() - wall, cpu_seconds() - cpu)
    failures = [result for result in results if result.outcome == "failed"]
    assert not failures, "\n\n".join(f"{result.step.where}: {result.detail}" for result in failures)
