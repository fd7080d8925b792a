"""#38 finding 4, with real processes: a client whose scheduler has no worker and no manager is told so within
seconds, in its own stderr (the scheduler's warning, printed as its waiting task's output) and in the scheduler's
log;
and a task needing a capability no worker offers fails with NoWorkerError naming it after the grace period
(`--unrunnable-grace-seconds`), where it waited forever (ray-project/ray#18835).

Checked by switching the mechanism off: with `UnservedWork.on_tick` returning at once, the first test times out
waiting for the warning and the second for the failure."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from scaler import Client, SchedulerClusterCombo
from scaler.errors import NoWorkerError
from tests.integration.conftest import COLD_START_SECONDS, Launcher, ProcessWatch, free_addresses, wait_for_workers

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

ALONE = """
import sys

from scaler import Client

with Client(address=sys.argv[1]) as client:
    future = client.submit(pow, 2, 10)
    sys.stdin.readline()  # until the test has read the warning
    future.cancel()
"""

GPU = """
import sys

from scaler import Client
from scaler.errors import NoWorkerError

with Client(address=sys.argv[1]) as client:
    try:
        client.submit_verbose(pow, (2, 10), {}, capabilities={"gpu": -1}).result(timeout=120)
    except NoWorkerError as error:
        print(f"NoWorkerError: {error}")
"""


def run(code: str, address: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code, address], capture_output=True, text=True, timeout=150,
                          stdin=subprocess.DEVNULL)  # fmt: skip


def test_a_client_with_nothing_to_run_its_work_is_told(launcher: Launcher, processes: ProcessWatch) -> None:
    addresses = free_addresses()
    launcher.object_storage(addresses.object_storage)
    scheduler = launcher.scheduler(addresses)
    client = processes.add(
        subprocess.Popen([sys.executable, "-c", ALONE, addresses.scheduler], stdin=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    )  # fmt: skip
    assert client.stdin is not None and client.stderr is not None
    said = ""
    for line in client.stderr:  # until the warning, or the end of the client's stderr
        if "task(s) of this client wait" in line:
            said = line
            break
    client.stdin.write("\n")  # the script cancels its task and closes
    client.stdin.close()
    assert client.wait(timeout=60) == 0
    assert said.startswith("[task ") and "] scaler: 1 task(s) of this client wait: no worker and no worker manager " \
        "is connected to the " in said, said  # fmt: skip
    assert f"scaler_cluster -n 4 {addresses.scheduler}" in said
    assert "1 queued task(s) wait: no worker and no worker manager" in scheduler.log_text()


def touch(path: str) -> str:
    Path(path).touch()
    return path


@pytest.mark.parametrize("policy", [(), ("--policy-content", "allocate=capability; scaling=no")],
                         ids=["default-policy", "capability"])  # fmt: skip
def test_a_task_needing_a_capability_nobody_offers_fails_naming_it(launcher: Launcher, policy: tuple[str, ...]) -> None:
    """With the scheduler's default policy too (`allocate=capability; scaling=vanilla`): the guide's promise."""
    addresses = free_addresses()
    launcher.object_storage(addresses.object_storage)
    launcher.scheduler(addresses, *policy, "--unrunnable-grace-seconds", "3")
    launcher.cluster(addresses.scheduler, 1)
    wait_for_workers(addresses.monitor, 1, COLD_START_SECONDS)
    done = run(GPU, addresses.scheduler)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith("NoWorkerError: no worker has the capabilities gpu and no worker manager declares"), (
        done.stdout + done.stderr[-3000:]
    )
    assert "--unrunnable-grace-seconds 3" in done.stdout


@pytest.mark.timeout(180)
def test_by_default_a_capability_task_runs_only_on_a_worker_that_has_it(
    make_cluster: Callable[..., SchedulerClusterCombo], tmp_path: Path
) -> None:
    """docs/guide/client_api.md, "Capabilities", with SchedulerClusterCombo's defaults: a task asking for a gpu on a
    cluster whose only worker has none never runs and fails with NoWorkerError after the grace; a worker started
    with the capability runs it. Under `allocate=even_load` (the default until the guide's promise was checked) the
    first part fails: the task runs at once on the plain worker."""
    plain = make_cluster(1, unrunnable_grace_seconds=3)
    wait_for_workers(plain.monitor_address, 1, COLD_START_SECONDS)
    marker = tmp_path / "ran"
    with Client(address=plain.get_address()) as client:
        started = time.monotonic()
        future = client.submit_verbose(touch, (str(marker),), {}, capabilities={"gpu": -1})
        with pytest.raises(NoWorkerError, match="no worker has the capabilities gpu"):
            future.result(timeout=60)
        assert time.monotonic() - started >= 2.5, "it fails after the grace, not at once"
        assert client.submit(touch, str(tmp_path / "plain")).result(timeout=30), "tasks without capabilities run"
    assert not marker.exists(), "the task asking for a gpu ran on a worker without one"
    capable = make_cluster(1, per_worker_capabilities={"gpu": -1}, unrunnable_grace_seconds=3)
    wait_for_workers(capable.monitor_address, 1, COLD_START_SECONDS)
    with Client(address=capable.get_address()) as client:
        assert client.submit_verbose(touch, (str(marker),), {}, capabilities={"gpu": -1}).result(timeout=30)
    assert marker.exists()
