"""Tiny tasks staged in a processor behind the one it computes (agent/placement.py rule 2), on a real one-worker
cluster: a crash fails only the task that crashed, a cancelled staged task never runs, and the staged tasks behind a
task that is cancelled or times out each run once, elsewhere."""

from __future__ import annotations

import concurrent.futures
import contextlib
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from scaler import Client
from scaler.errors import ProcessorDiedError, TaskTimeoutError
from tests.integration.conftest import DEADLINE_SECONDS, wait_for, wait_for_workers

pytestmark = pytest.mark.integration

WARM_UP_TASKS = 200  #: tiny calls of `step` that teach the worker it is tiny, so that it stages its calls


# ---------------------------------------------------------------- task functions (run on workers)


def step(kind: str, *arguments: Any) -> Any:
    """Every task of these tests is a call of this one function, so that what warm-up teaches the worker (its calls
    are tiny: stage them) holds for the calls under test too; `kind` says what a call does."""
    import os
    import time

    if kind == "square":
        (value,) = arguments
        return value * value
    if kind == "square_or_crash":
        value, crash = arguments
        if value in crash:
            os._exit(3)
        return value * value
    if kind == "gate":  # say it started, then wait until the file `gate` exists (at most `seconds`)
        started, gate, seconds = arguments
        Path(started).touch()
        deadline = time.monotonic() + seconds
        while not Path(gate).exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        return "opened"
    path, value = arguments  # "record"
    with open(path, "a") as file:
        file.write(f"{value}\n")
    return value


def recorded(path: Path) -> list[int]:
    return [int(line) for line in path.read_text().split()] if path.exists() else []


# ---------------------------------------------------------------- helpers


@contextlib.contextmanager
def warm_client(make_cluster: Callable[..., Any], **settings: Any) -> Iterator[Client]:
    """A client of a one-worker cluster whose worker has seen WARM_UP_TASKS tiny calls of `step`."""
    cluster = make_cluster(1, **settings)
    wait_for_workers(cluster.monitor_address, 1)
    with Client(address=cluster.get_address()) as client:
        futures = [client.submit(step, "square", value) for value in range(WARM_UP_TASKS)]
        assert [f.result(timeout=DEADLINE_SECONDS) for f in futures] == [v * v for v in range(WARM_UP_TASKS)]
        yield client


def gate_then_records(client: Client, tmp_path: Path, gate_seconds: float, count: int = 10) -> tuple[
    concurrent.futures.Future[str], list[concurrent.futures.Future[int]], Path, Path
]:  # fmt: skip
    """A call that holds the only processor until the test opens its gate, and `count` tiny calls behind it, staged
    in the same processor (the worker knows `step` is tiny); once the gate call started, and a moment for the
    others to reach the worker."""
    started, gate, log = tmp_path / "started", tmp_path / "gate", tmp_path / "log"
    holder = client.submit(step, "gate", str(started), str(gate), gate_seconds)
    wait_for(started.exists, "the gate task to start")
    behind = [client.submit(step, "record", str(log), value) for value in range(count)]
    threading.Event().wait(0.5)
    return holder, behind, gate, log


# ---------------------------------------------------------------- tests


@pytest.mark.timeout(120)
def test_a_crash_among_staged_tiny_tasks_fails_only_the_task_that_crashed(make_cluster):
    crash = (150, 151, 400)  # two in a row: the second runs in the processor that replaced the first
    with warm_client(make_cluster) as client:
        futures = [client.submit(step, "square_or_crash", value, crash) for value in range(500)]
        concurrent.futures.wait(futures, timeout=DEADLINE_SECONDS * 2)
        for value, future in enumerate(futures):
            if value in crash:
                with pytest.raises(ProcessorDiedError):
                    future.result(timeout=0)
            else:
                assert future.result(timeout=0) == value * value, f"task {value} was blamed for another's crash"


@pytest.mark.timeout(120)
def test_cancelled_tasks_staged_behind_a_running_one_never_run(make_cluster, tmp_path):
    with warm_client(make_cluster) as client:
        holder, behind, gate, log = gate_then_records(client, tmp_path, gate_seconds=60)
        cancelled = (2, 3, 7)
        for value in cancelled:
            assert behind[value].cancel(timeout=DEADLINE_SECONDS) is True
        gate.touch()
        assert holder.result(timeout=DEADLINE_SECONDS) == "opened"
        kept = [value for value in range(len(behind)) if value not in cancelled]
        assert [behind[value].result(timeout=DEADLINE_SECONDS) for value in kept] == kept
        assert client.submit(step, "square", 3).result(timeout=DEADLINE_SECONDS) == 9  # all before it has ended
    assert sorted(recorded(log)) == kept, "a cancelled staged task ran"


@pytest.mark.timeout(120)
def test_the_tasks_staged_behind_a_cancelled_task_each_run_once(make_cluster, tmp_path):
    with warm_client(make_cluster) as client:
        holder, behind, _, log = gate_then_records(client, tmp_path, gate_seconds=60)
        assert holder.cancel(timeout=DEADLINE_SECONDS) is True  # its processor is killed
        assert [future.result(timeout=DEADLINE_SECONDS) for future in behind] == list(range(len(behind)))
    assert sorted(recorded(log)) == list(range(len(behind)))


@pytest.mark.timeout(120)
def test_the_tasks_staged_behind_a_task_that_times_out_each_run_once(make_cluster, tmp_path):
    with warm_client(make_cluster, task_timeout_seconds=2) as client:
        holder, behind, _, log = gate_then_records(client, tmp_path, gate_seconds=60)
        with pytest.raises(TaskTimeoutError):
            holder.result(timeout=DEADLINE_SECONDS)
        assert [future.result(timeout=DEADLINE_SECONDS) for future in behind] == list(range(len(behind)))
    assert sorted(recorded(log)) == list(range(len(behind)))
