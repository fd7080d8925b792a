"""The whole test session's configuration folder: servers started without key settings make and use the user's
CURVE keys in `$XDG_CONFIG_HOME/scaler/keys` and register connection files there (docs/guide/security.md), so the
session points XDG_CONFIG_HOME at a temporary folder of its own, set at import so that every process the tests
start (and pytest-xdist's workers) inherits it, and never writes the real `~/.config/scaler`."""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from scaler.io.address import PORT_RANGE_VARIABLE, port_range_share
from tests.bytecode import write_bytecode, write_rewritten_plugins, write_rewritten_tests

#: set by the process that made the folder; a pytest-xdist worker inherits it and keeps the folder
_MADE_BY = "SCALER_TEST_CONFIG_HOME_OWNER"

if os.environ.get(_MADE_BY) is None:
    # named after this process, so that tests/reaping.py removes it when the run is killed before pytest_unconfigure
    os.environ["XDG_CONFIG_HOME"] = tempfile.mkdtemp(prefix=f"scaler-test-config-{os.getpid()}-")
    os.environ[_MADE_BY] = str(os.getpid())

# Tests stop what they start with Ctrl-C (SIGINT) as a terminal sends it. A run started in the background of a script
# (`nohup make test &`) inherits SIGINT ignored, and an ignored signal stays ignored across exec: a server the tests
# start would then ignore their Ctrl-C (the docs site's `scaler --docs --serve` did) and the test would wait it out.
# A handler of this process's own is reset to the default in every process it starts.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# Each test process of a run (pytest-xdist's gw0, gw1, ...), and every process it starts, takes its free ports from a
# range of its own: two test processes picking a free block at the same moment picked the same one now and then, and
# one scheduler then found its port taken by another test's ("port ... is already in use").
if "PYTEST_XDIST_WORKER" in os.environ and PORT_RANGE_VARIABLE not in os.environ:
    os.environ[PORT_RANGE_VARIABLE] = port_range_share(
        int(os.environ["PYTEST_XDIST_WORKER"].removeprefix("gw")), int(os.environ["PYTEST_XDIST_WORKER_COUNT"])
    )


def pytest_configure(config: pytest.Config) -> None:
    """The run's first process (before pytest-xdist starts the others) writes the tree's bytecode once for all the
    processes the run starts, and pytest's cache of the test modules' and the plugins' rewritten asserts for its test
    processes (tests/bytecode.py)."""
    if os.environ.get(_MADE_BY) == str(os.getpid()):
        root = Path(__file__).resolve().parents[1]
        write_bytecode(root)
        write_rewritten_tests(config, root)
        write_rewritten_plugins(config)


def pytest_sessionfinish() -> None:
    """Before tests/run_reaper.py's reap (which would otherwise count the folder as left behind)."""
    if os.environ.get(_MADE_BY) == str(os.getpid()):
        shutil.rmtree(os.environ["XDG_CONFIG_HOME"], ignore_errors=True)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    from tests.conformance.summary import write_summary as write_conformance_summary
    from tests.docs.report import write_summary

    write_summary(terminalreporter)
    write_conformance_summary(terminalreporter)


# ---------------------------------------------------------------- a local Slurm


@pytest.fixture(scope="session")
def slurm_cluster() -> Iterator[Any]:
    """A real Slurm on this machine for the whole test process (tests/integration/slurm_cluster.py). What uses it
    (tests/integration/test_slurm_*.py, the Slurm entry of the backend contract suite, the guide's Slurm page in the
    documentation tier) is marked `xdist_group("slurm")`, so that they share it. Its SLURM_CONF is this process's
    while it runs (the managers, commands and pages the tests start find the cluster with it). Skips, saying why,
    where Slurm cannot run."""
    from tests.integration.slurm_cluster import skip_reason
    from tests.integration.slurm_cluster import slurm_cluster as started

    reason = skip_reason()
    if reason is not None:
        pytest.skip(reason)
    before = os.environ.get("SLURM_CONF")
    with started() as cluster:
        os.environ["SLURM_CONF"] = str(cluster.conf)
        try:
            yield cluster
        finally:
            if before is None:
                os.environ.pop("SLURM_CONF", None)
            else:
                os.environ["SLURM_CONF"] = before
