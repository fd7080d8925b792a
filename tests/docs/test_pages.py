"""The documentation tier (#38, goal 5): every shell command, TOML file and Python block of README.md and
docs/guide/*.md runs, in the page's order, in one working folder per page, from this tree's wheel installed into a
fresh virtual environment outside the repository, as the README says to install it; with the pip such an
environment has, and, for the pages that install scaler-compute or the fake cloud's extra, with a current pip too (up
to their last install). A step that does not do what the page says fails the page.

The steps are read from the markdown itself (tests/docs/steps.py), so what is tested is what a reader reads; a
block that cannot run here says why in an HTML comment the reader does not see (`<!-- doc-test: skip reason=... -->`).
Long-running commands (a stack, the fake cloud, `scaler_top`) run in the background, the next step starting once
they printed what a reader waits for, and stop with Ctrl-C where the page says so or at its end
(tests/docs/programs.py, runner.py). The pages that start servers use the ports the docs name (8516-8518, 5000,
50001, ...): each such run has a network of its own where the machine allows it (tests/docs/own_network.py), and
goes to whichever test process is free, as the other pages do; elsewhere they run one after another, in one test
process (one xdist group), with the other run of such a page at ports of its own (`xdist_group_of`). The wheel and
the two readers' environments are made once per run and shared by every test process (tests/docs/conftest.py); with
the current pip, a page runs only up to its last step where pip is at work (`steps_for`), the bundled pip's run
walking every step.

Run one page: `pytest tests/docs -k quick_start`; `DOC_TEST_KEEP_GOING=1` runs a page's steps after its first
failure too (to see every failing step at once). The summary at the end of the run gives each page's counts.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from scaler.io.address import LOWEST_FREE_PORT
from tests.docs import own_network
from tests.docs.pages import PAGES, steps_of
from tests.docs.programs import long_running
from tests.docs.readers import FLAVOURS, Reader
from tests.docs.report import cpu_seconds, record
from tests.docs.runner import PIP_INSTALL, PageRun, StepResult
from tests.docs.steps import Kind, Step
from tests.integration.fresh_install import ROOT, locked


def test_every_page_of_the_guide_is_in_the_tier() -> None:
    guide = {f"docs/guide/{page.name}" for page in (ROOT / "docs" / "guide").glob("*.md")}
    assert guide <= set(PAGES), f"not in the documentation tier: {sorted(guide - set(PAGES))}"


def pip_at_work(page: str) -> bool:
    """A page that installs scaler-compute itself, or the fake cloud's extra: what the pip a reader has can change
    there. The other pages run with the pip a fresh environment has (which also installs their extras)."""
    return any(_PIP_AT_WORK.search(step.text) for step in steps_of(page) if step.skip_reason is None)


def steps_for(page: str, flavour: str) -> list[Step]:
    """What a page runs with a pip flavour: every step with the pip a fresh environment has; with the current pip,
    the steps up to its last one where pip is at work (`pip_steps`): the bundled pip's run walks the rest, in which
    nothing depends on the pip."""
    steps = steps_of(page)
    return steps if flavour == "bundled" else pip_steps(steps)


def pip_steps(steps: list[Step]) -> list[Step]:
    """The steps up to the last install (`pip install ...`, the last command of its block kept). A cloud manager also
    asks the reader's pip, whether the index has the units' requirements (bursting.md's one-file example, with
    `environment = "requirements"`); that check is tested with both pips by tests/integration/test_index_check_pips.py,
    so the rest of such a page, a whole cloud burst, runs once, with the bundled pip."""
    last: tuple[int, int] | None = None
    for index, step in enumerate(steps):
        if step.skip_reason is not None:
            continue
        if step.kind is Kind.SHELL:
            for number, command in enumerate(step.commands):
                if PIP_INSTALL.search(command):
                    last = (index, number)
    if last is None:
        return []
    end, last_command = last
    kept = steps[: end + 1]
    kept[-1] = dataclasses.replace(kept[-1], commands=kept[-1].commands[: last_command + 1])
    return kept


def group_of(steps: list[Step]) -> str:
    """AT_FIXED_PORTS for steps that start servers at the ports the docs name (8516-8518, 5000, 50001, ...), which no
    other run may use at the same time (`network_of`); "docs" for the others (clusters of their own at free ports, a
    port no other page names, installs)."""
    for step in steps:
        if step.skip_reason is not None:
            continue
        texts = step.commands if step.kind is Kind.SHELL else (step.text,)  # a shell step's commands it runs
        if STANDARD_PORTS & {int(port) for text in texts for port in _PORT.findall(text)} or any(
            command.endswith("&") or long_running(command, ROOT) for command in step.commands
        ):
            return AT_FIXED_PORTS
    return "docs"


#: a port, in an address of a step (a script's own stack, a client of a running one)
_PORT = re.compile(r"(?:127\.0\.0\.1|localhost|0\.0\.0\.0):(\d+)")
#: The ports the docs' examples and defaults use: a scheduler's three (8516-8518), the fake cloud's (5000), the
#: dashboard's and the metrics' (50001, 8080, 9090). A port outside these is one page's own
#: (test_pages_own_their_ports).
STANDARD_PORTS = frozenset({8516, 8517, 8518, 5000, 50001, 8080, 9090})


AT_FIXED_PORTS = "docs-at-fixed-ports"
#: Held while a page at the docs' ports runs: such pages wait for one another even when they run in different test
#: processes (or in two test sessions on one machine), so that none finds its ports taken by another.
FIXED_PORTS_LOCK = Path(tempfile.gettempdir()) / "scaler-doc-tier-fixed-ports.lock"


@contextlib.contextmanager
def network_of(page: str, steps: list[Step]) -> Iterator[tuple[str, ...]]:
    """Where a page's run is alone at the ports it names (the docs' or its own); yields the argv prefix of its
    commands. Where the machine allows it, a network of its own (tests/docs/own_network.py), whatever runs beside it.
    Otherwise, and for a Slurm page (its Slurm answers on the machine's network), the locks of those ports, held
    machine-wide (another test session may run the same page): the docs' (`group_of`), and the page's own."""
    at_fixed_ports = group_of(steps) == AT_FIXED_PORTS
    if not (at_fixed_ports or own_ports(steps)):
        yield ()
    elif page not in SLURM_PAGES and own_network.unavailable() is None:
        with own_network.own_network() as prefix:
            yield prefix
    else:
        with contextlib.ExitStack() as held:
            if own_ports(steps):
                held.enter_context(locked(Path(tempfile.gettempdir()) / f"scaler-doc-tier-{Path(page).stem}.lock"))
            if at_fixed_ports:  # taken after the page's own, by every run in that order
                held.enter_context(locked(FIXED_PORTS_LOCK))
            yield ()


def own_ports(steps: list[Step]) -> set[int]:
    """The ports outside STANDARD_PORTS a page's steps name."""
    named = {int(port) for step in steps if step.skip_reason is None for port in _PORT.findall(step.text)}
    return named - STANDARD_PORTS


_PIP_AT_WORK = re.compile(r"scaler_compute-\*\.whl|scaler_fake_cloud|FakeCloud")


def flavours_of(page: str) -> list[str]:
    """The pips a page runs with: the bundled one, and the current one where pip is at work."""
    return [flavour for flavour in FLAVOURS if flavour == "bundled" or pip_at_work(page)]


#: Pages that run against a real Slurm: in the test process of the other Slurm tests, which shares one local Slurm
#: (the `slurm_cluster` fixture; its SLURM_CONF reaches the page's environment); they hold the locks of their ports.
SLURM_PAGES = frozenset({"docs/guide/slurm.md"})


def xdist_group_of(page: str, flavour: str, own_networks: bool | None = None) -> str | None:
    """Which test process a run goes to. With networks of their own (`own_networks`, by default where the machine
    allows them: `network_of`), any that is free. Without, the runs at the docs' ports go one after another in one
    test process (an xdist group). A current-pip run is a page's installs (`pip_steps`), which name no port: a page's
    two runs never wait for each other's ports. The readers' environments are shared by all test processes
    (tests/docs/conftest.py). A Slurm page runs in the Slurm tests' process."""
    if page in SLURM_PAGES:
        return "slurm"
    if own_networks if own_networks is not None else own_network.unavailable() is None:
        return None
    return AT_FIXED_PORTS if group_of(steps_for(page, flavour)) == AT_FIXED_PORTS else None


def marks_of(page: str, flavour: str) -> list[pytest.MarkDecorator]:
    group = xdist_group_of(page, flavour)
    return [] if group is None else [pytest.mark.xdist_group(group)]


PAGE_RUNS = [(page, flavour) for page in PAGES for flavour in flavours_of(page)]
RUNS = [
    pytest.param(page, flavour, marks=marks_of(page, flavour), id=f"{page}-{flavour}") for page, flavour in PAGE_RUNS
]


def test_pages_own_their_ports() -> None:
    """A port outside STANDARD_PORTS is named by one page only: pages outside the lock never meet at a port. And it
    is below the ports the rest of the suite draws at random for its servers (`free_tcp_port_block`, from
    LOWEST_FREE_PORT up): bursting.md's stacks at 28516 and 28616 once met a test's server there and exited 1 at
    their start ("cannot listen at the file's address")."""
    owners: dict[int, set[str]] = {}
    for page in PAGES:
        for step in steps_of(page):
            for port in map(int, _PORT.findall(step.text)):
                owners.setdefault(port, set()).add(page)
    shared = {port: sorted(pages) for port, pages in owners.items() if port not in STANDARD_PORTS and len(pages) > 1}
    assert not shared, f"ports named by several pages: add them to STANDARD_PORTS: {shared}"
    drawn = {port: sorted(pages) for port, pages in owners.items()
             if port not in STANDARD_PORTS and port + 2 >= LOWEST_FREE_PORT}  # fmt: skip
    assert not drawn, f"ports (and the two after each) the suite's servers may draw, named by pages: {drawn}"


def test_a_current_pip_run_names_no_port() -> None:
    """A page's current-pip run is its installs: it names no port, so it goes to whichever test process is free and
    never meets the page's other run at a port (bursting.md's two runs of its one-file example, at 7516, once had to
    wait for each other)."""
    for page in PAGES:
        if pip_at_work(page):
            steps = steps_for(page, "current")
            assert not own_ports(steps) and group_of(steps) == "docs", page
            assert xdist_group_of(page, "current", own_networks=False) is None, page
    assert 7516 in own_ports(steps_for("docs/guide/bursting.md", "bundled")), "the bundled run walks the example"
    # with networks of their own, no run waits for another: each goes to whichever test process is free
    assert {xdist_group_of(page, flavour, own_networks=True) for page, flavour in PAGE_RUNS} == {None, "slurm"}


def test_the_current_pip_runs_each_pages_installs() -> None:
    """With the current pip, a page stops after its last install, and runs every install."""
    for page in PAGES:
        if not pip_at_work(page):
            continue
        steps = steps_for(page, "current")
        assert _installs(steps) == _installs(steps_of(page)), page
    scaling = steps_for("docs/guide/scaling_and_cloud.md", "current")
    assert scaling[-1].commands == ('pip install "scaler-compute[fake-cloud]"',), scaling[-1]
    bursting = steps_for("docs/guide/bursting.md", "current")  # not its one-file cloud burst (`pip_steps`)
    assert bursting[-1].commands == ('pip install "scaler-compute[fake-cloud]"',), bursting[-1]
    assert group_of(scaling) == "docs", "an install needs no port"


def _installs(steps: list[Step]) -> list[str]:
    return [command for step in steps if step.skip_reason is None for command in step.commands
            if PIP_INSTALL.search(command)]  # fmt: skip


@pytest.mark.integration
@pytest.mark.timeout(1500)
@pytest.mark.parametrize(("page", "flavour"), RUNS)
def test_a_page_runs_as_written(
    page: str,
    flavour: str,
    reader_of: dict[str, Reader],
    tmp_path_factory: pytest.TempPathFactory,
    request: pytest.FixtureRequest,
) -> None:
    steps = steps_for(page, flavour)
    if page in SLURM_PAGES:
        request.getfixturevalue("slurm_cluster")
    reader = reader_of[flavour]
    home = tmp_path_factory.mktemp(f"{Path(page).stem}-{flavour}")
    folder = home / "work"
    folder.mkdir()
    keep_going = os.environ.get("DOC_TEST_KEEP_GOING") == "1"
    results: list[StepResult] = []
    with network_of(page, steps) as prefix:
        run = PageRun(page, folder, reader.page_environment(home), reader.python, prefix, reader.install_environment)
        wall, cpu = time.monotonic(), cpu_seconds()
        try:
            for step in steps:
                if not keep_going and any(result.outcome == "failed" for result in results):
                    results.append(StepResult(step, "not reached"))
                    continue
                results.append(run.run(step))
        finally:
            results += run.finish()
    record(request.node, page, f"pip {reader.pip_version}", results, time.monotonic() - wall, cpu_seconds() - cpu)
    failures = [result for result in results if result.outcome == "failed"]
    assert not failures, "\n\n".join(f"{result.step.where}: {result.detail}" for result in failures)
