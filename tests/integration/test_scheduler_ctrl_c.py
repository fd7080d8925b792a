"""Ctrl-C in the terminal of `scaler_scheduler ADDRESS` (SIGINT to the whole process group: the scheduler and the
object storage server it started) stops both quietly, with exit code 0: the server's exit is not reported as a
death nor restarted (`scaler.scheduler.storage_child`).

"storage_first" makes the race the user saw certain: the scheduler is held (SIGSTOP) while the group gets SIGINT,
until its storage server has exited; it then handles the signal and polls the dead server in the same turn.
Checked with `StorageChild.watch` as it was before the fix: "storage_first" fails every time with `[ERROR] ... the
object storage server ... died: exit code 0; restarting it in 0 s`; "at_once" (what a terminal does) only now and
then, as the user saw it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import psutil
import pytest

from scaler.io.address import free_tcp_port_block
from scaler.scheduler.storage_child import WATCH_SECONDS
from tests.integration.conftest import BIN_DIR, COLD_START_SECONDS, ProcessWatch, probe_scheduler, wait_for

pytestmark = pytest.mark.integration


def storage_child(scheduler: subprocess.Popen[bytes]) -> psutil.Process:
    (child,) = [
        child
        for child in psutil.Process(scheduler.pid).children()
        if "scaler.object_storage.server" in " ".join(child.cmdline())
    ]
    return child


def has_exited(process: psutil.Process) -> bool:
    try:
        return process.status() == psutil.STATUS_ZOMBIE  # not reaped: its parent is held
    except psutil.NoSuchProcess:
        return True


@pytest.mark.timeout(120)
@pytest.mark.parametrize("storage_first", [False, True], ids=["at_once", "storage_first"])
def test_ctrl_c_stops_a_standalone_scheduler_without_an_error(
    storage_first: bool, processes: ProcessWatch, tmp_path: Path
) -> None:
    address = f"tcp://127.0.0.1:{free_tcp_port_block(3)}"
    log_path = tmp_path / "scheduler.log"
    with open(log_path, "wb") as log:
        scheduler = subprocess.Popen(
            [str(BIN_DIR / "scaler_scheduler"), address, "-ll", "INFO"],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    processes.add(scheduler)
    probe_scheduler(address, COLD_START_SECONDS, scheduler)  # listening, its storage server answering
    storage = storage_child(scheduler)
    processes.remember()
    if storage_first:
        scheduler.send_signal(signal.SIGSTOP)
    os.killpg(scheduler.pid, signal.SIGINT)  # what Ctrl-C in its terminal does
    if storage_first:
        try:
            wait_for(lambda: has_exited(storage), "the object storage server to exit on SIGINT")
            time.sleep(2 * WATCH_SECONDS)  # the scheduler's next look at its storage server is due
        finally:
            scheduler.send_signal(signal.SIGCONT)
    assert scheduler.wait(timeout=30) == 0, log_path.read_text()
    log = log_path.read_text()
    assert "scheduler stopped: received SIGINT" in log, log
    assert "[ERROR]" not in log and "restart" not in log, log
