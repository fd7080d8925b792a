"""The run's reaper (a pytest plugin, loaded by `-p tests.run_reaper` in pyproject.toml): whatever a test run starts
is gone when the run ends, however it ends (a normal end, Ctrl-C, an INTERNALERROR, a killed pytest-xdist worker, a
SIGKILLed pytest), and only what THIS run started (other suites may run beside it on the same machine).

What belongs to the run:
- processes: the run's control group (cgroup v1's cpuacct hierarchy, else cgroup v2), which the controlling pytest
  process joins at configure time: every process the run starts is in it or in a group under it, whatever became of
  its parent (orphans reparented to init, new sessions, `ip netns exec`, the fake cloud's units). Each pytest-xdist
  worker has a group of its own under it (`w-<worker id>-<pid>`), reaped as soon as that worker crashes. Where no
  cgroup can be made (not root), the run's processes are those whose environment carries `SCALER_TEST_RUN=<run id>`
  (set in the controller, inherited; the fake cloud's units, which start from an empty environment, escape this);
- things named after the pid of a process of the run (the watchdog records every pid it sees in the run's groups):
  network namespaces (the fake cloud's `sfc-<pid>-...`, test_partitioned_peers' `scaler<pid>n<i>`, the rig of hosts'
  `rig<pid>n<k>r` and `rig<pid>n<k>h<n>`, whose hosts' processes are killed with them; the iptables and nft rules of
  the tests, and the rig's links and queues, live in those namespaces and go with them), the host ends of their
  links, memory cgroups of test_memory_limit (`/sys/fs/cgroup/memory/scaler-test-<pid>-...`), and the fake cloud's
  containers (label `scaler-fake-cloud=<pid>`).

A watchdog process, started by the controller before it joins the run's group (so never reaped with it), records the
run's pids twice a second and reaps when the controller asks (at the end of the session, once pytest-xdist's workers
are gone: what is still ending then, such as a worker's resource trackers, gets `reaping.EXIT_GRACE_SECONDS` to end on
its own) or when the controller's pipe closes without asking (pytest killed). What it removed is printed at the end
of the session, or on its standard error when pytest is gone; so are the processes the run started, by kind
(`reaping.kind_of`), and how many were schedulers (one per stack a test started: the count to watch when tests share
their stacks). A process that lives less than half a second may be missed.

With `SCALER_TEST_CPU=FILE`, each test process appends `test-id cpu-seconds` per test: the CPU (user + system) of
its group during the test, every process the test started included (`python -m tests.reaping cpu FILE` sums it per
module).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests import reaping
from tests.reaping import (
    CPU_VARIABLE,
    GROUP_VARIABLE,
    KILL_SECONDS,
    RUN_VARIABLE,
    Run,
    described,
    find_hierarchy,
    group_pids,
    join_group,
    kill_all,
    remove_groups,
    remove_named,
    run_from_environment,
)

#: The kinds of process (tests/reaping.py's `kind_of`) that are schedulers: a cluster's forked one, the console command,
#: `python -m` its entry point.
SCHEDULER_KIND = re.compile(r"schedul")

# ---------------------------------------------------------------- the pytest plugin


class Controller:
    """The controlling pytest process's side: the run, its watchdog, and the report."""

    def __init__(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="scaler-test-run-"))
        run_id = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
        hierarchy = find_hierarchy()
        group = self._home = None
        if hierarchy is not None:
            try:
                self._home = hierarchy.own_group()
                group = self._home / f"scaler-test-run-{run_id}"
                group.mkdir()
            except OSError:
                group = None
        self.run = Run(run_id, group, hierarchy if group is not None else None)
        os.environ[RUN_VARIABLE] = run_id
        if group is not None:
            os.environ[GROUP_VARIABLE] = str(group)
        else:
            os.environ.pop(GROUP_VARIABLE, None)
        read_end, self._pipe = os.pipe()
        environment = {key: value for key, value in os.environ.items() if key != RUN_VARIABLE}
        environment[RUN_VARIABLE + "_WATCHED"] = run_id
        if group is not None:
            environment[GROUP_VARIABLE] = str(group)
        argv = [
            sys.executable,
            reaping.__file__,
            "watch",
            str(os.getpid()),
            str(read_end),
            str(self.folder / "report.json"),
        ]
        self.watchdog = subprocess.Popen(argv, pass_fds=(read_end,), env=environment, stdin=subprocess.DEVNULL,
                                         start_new_session=True)  # fmt: skip
        os.close(read_end)
        if group is not None:  # after the watchdog started: it stays out of the group it reaps
            join_group(group, os.getpid())
        self.removed: list[str] | None = None
        #: the processes the run started by kind (tests/reaping.py's `kind_of`), once reaped
        self.started: dict[str, int] = {}
        #: the CPU of the run's processes, the controller's included, when it leaves the group (None: not known)
        self.cpu_seconds: float | None = None

    def reap(self) -> list[str]:
        """Ask the watchdog to reap (once) and wait for what it removed."""
        if self.removed is None:
            if self._home is not None and self.run.group is not None and self.run.hierarchy is not None:
                # out of the group, which goes with the reap
                with contextlib.suppress(OSError):
                    self.cpu_seconds = self.run.hierarchy.cpu_seconds(self.run.group)
                    join_group(self._home, os.getpid())
            with contextlib.suppress(OSError):
                os.write(self._pipe, b"reap\n")
            try:
                self.watchdog.wait(KILL_SECONDS * 3)
                report = json.loads((self.folder / "report.json").read_text())
                self.removed, self.started = list(report["removed"]), dict(report["started"])
            except (subprocess.TimeoutExpired, OSError, ValueError, KeyError) as error:
                self.removed = [f"(the reaper did not report: {error!r})"]
            with contextlib.suppress(OSError):
                os.close(self._pipe)
            shutil.rmtree(self.folder, ignore_errors=True)
        return self.removed

    def reap_worker(self, worker_id: str) -> list[str]:
        """A crashed pytest-xdist worker: what it started (its group), at once (its replacement has another id)."""
        if self.run.group is None:
            spared = {os.getpid(), self.watchdog.pid}
            return described(kill_all(lambda: self.run.members({"PYTEST_XDIST_WORKER": worker_id}), spared))
        removed = []
        for group in self.run.group.glob(f"w-{worker_id}-*"):
            killed = kill_all(lambda group=group: group_pids(group), set())
            remove_groups(group)
            removed += described(killed) + remove_named({int(group.name.rpartition("-")[2]), *killed})
        return removed


class CpuPerTest:
    """A test process's own group (a pytest-xdist worker's, under the run's) and the CPU of each of its tests."""

    def __init__(self, run: Run, worker_id: str | None) -> None:
        assert run.group is not None and run.hierarchy is not None
        self.hierarchy = run.hierarchy
        self.group = run.group
        if worker_id is not None:
            group = run.group / f"w-{worker_id}-{os.getpid()}"
            with contextlib.suppress(OSError):
                group.mkdir()
                join_group(group, os.getpid())
                self.group = group
        self._started: dict[str, float] = {}

    def start(self, nodeid: str) -> None:
        with contextlib.suppress(OSError):
            self._started[nodeid] = self.hierarchy.cpu_seconds(self.group)

    def finish(self, nodeid: str, path: str) -> None:
        started = self._started.pop(nodeid, None)
        if started is not None:
            with contextlib.suppress(OSError), open(path, "a") as file:
                file.write(f"{nodeid} {self.hierarchy.cpu_seconds(self.group) - started:.2f}\n")


@dataclass
class _State:
    """This process's part: the controller's (`controller`), a test process's (`cpu`)."""

    controller: Controller | None = None
    cpu: CpuPerTest | None = None
    config: pytest.Config | None = None
    crashed: list[str] = field(default_factory=list)


_STATE = _State()


def pytest_configure(config: pytest.Config) -> None:
    _STATE.config = config
    worker_input = getattr(config, "workerinput", None)
    if worker_input is None:
        _STATE.controller = Controller()
        run: Run | None = _STATE.controller.run
        worker_id = None
    else:
        run = run_from_environment()
        worker_id = str(worker_input["workerid"])
    if run is not None and run.group is not None and run.hierarchy is not None:
        _STATE.cpu = CpuPerTest(run, worker_id)


@pytest.hookimpl(optionalhook=True)  # an xdist hook: the pure tiers also run without xdist (make test-pythons)
def pytest_testnodedown(node: Any, error: object) -> None:
    if error and _STATE.controller is not None:
        _STATE.crashed += _STATE.controller.reap_worker(str(node.gateway.id))


def pytest_runtest_logstart(nodeid: str) -> None:
    if os.environ.get(CPU_VARIABLE) and _STATE.cpu is not None and _runs_tests():
        _STATE.cpu.start(nodeid)


def pytest_runtest_logfinish(nodeid: str) -> None:
    path = os.environ.get(CPU_VARIABLE)
    if path and _STATE.cpu is not None and _runs_tests():
        _STATE.cpu.finish(nodeid, path)


def _runs_tests() -> bool:
    """Not a pytest-xdist controller (which sees its workers' tests start and end)."""
    config = _STATE.config
    return config is None or config.pluginmanager.get_plugin("dsession") is None


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish() -> None:
    """After pytest-xdist has stopped its workers: the reap."""
    if _STATE.controller is not None:
        _STATE.controller.reap()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _STATE.controller is None:
        return
    removed = _STATE.crashed + _STATE.controller.reap()
    cpu_seconds = _STATE.controller.cpu_seconds
    if cpu_seconds is not None:
        terminalreporter.write_line(f"CPU of the run's processes (user + system): {cpu_seconds:.0f} s")
    started = _STATE.controller.started
    if started:
        schedulers = sum(count for kind, count in started.items() if SCHEDULER_KIND.search(kind))
        most = ", ".join(f"{kind} {count}" for kind, count in list(started.items())[:8])
        terminalreporter.write_line(f"processes the run started (seen twice a second): {sum(started.values())}, "
                                    f"{schedulers} of them schedulers; most started: {most}")  # fmt: skip
    if removed:
        terminalreporter.section("left behind by the run, removed by its reaper", yellow=True)
        for line in removed:
            terminalreporter.line(line)


def pytest_unconfigure() -> None:
    if _STATE.controller is not None:
        _STATE.controller.reap()
