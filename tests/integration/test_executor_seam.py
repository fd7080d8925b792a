"""The worker's execution seam with an executor other than the zygote: threads in the agent process, three
slots. Tasks run where the executor puts them, several at once, and results reach the client as usual."""

from __future__ import annotations

import itertools
import subprocess
import sys
import time
from pathlib import Path

import pytest

from scaler import Client
from tests.integration.conftest import Launcher, wait_for_workers

pytestmark = pytest.mark.integration

WORKER_SCRIPT = Path(__file__).with_name("thread_executor_worker.py")


def where_and_when(seconds: float) -> tuple[int, float, float]:
    import os

    started = time.monotonic()
    time.sleep(seconds)
    return os.getpid(), started, time.monotonic()


def fail() -> None:
    raise ValueError("raised in a thread executor")


@pytest.mark.timeout(90)
def test_a_thread_executor_runs_tasks_concurrently_in_its_slots(launcher: Launcher) -> None:
    addresses, _, _ = launcher.stack(workers=0)
    worker = subprocess.Popen(
        [sys.executable, str(WORKER_SCRIPT), addresses.scheduler, "3"], cwd=WORKER_SCRIPT.parents[2]
    )
    launcher._watch.add(worker)
    wait_for_workers(addresses.monitor, 1)
    with Client(address=addresses.scheduler) as client:
        runs = client.map(where_and_when, [0.5] * 6)
        with pytest.raises(ValueError, match="raised in a thread executor"):
            client.submit(fail).result(timeout=30)
    assert {pid for pid, _, _ in runs} == {worker.pid}  # no processor process: the threads of the agent
    intervals = sorted((start, end) for _, start, end in runs)  # one process, one monotonic clock
    overlapping = sum(1 for (_, end), (start, _) in itertools.pairwise(intervals) if start < end)
    assert overlapping >= 1, f"the slots never ran two tasks at once: {intervals}"
