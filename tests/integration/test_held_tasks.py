"""Issue 73 on a real cluster whose workers hold one task at once (`per_worker_task_queue_size=1`): the issue's script
(twice as many long tasks as workers), nested tasks three deep on two workers (a waiting parent yields its slot), and
an actor beside which its worker still runs a task. Every value of the setting at its edges, on workers of one slot and
of several, is in the simulation tier (tests/simulation/test_held_tasks_stack.py), the scheduler's credit in the unit
tier (tests/unit/scheduler/test_worker_credit.py).

Each test starts with a round of long tasks, one on each worker, so that the scheduler has learned that its tasks
compute long. Checked to fail with the scheduler withdrawing a prefetch whatever the worker's credit
(`WorkerRecord.restage`'s `has_prefetch` without `self.capacity > self.slots`): no task started after the first
round on the cluster, and each test timed out waiting for a result.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from scaler import Client, SchedulerClusterCombo
from tests.integration.conftest import DEADLINE_SECONDS, running_cluster

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120), pytest.mark.xdist_group("test_held_tasks")]

WORKERS = 2
LONG_SECONDS = 1.5  #: long: beyond STAGED_WAIT_SECONDS, so that the scheduler learns its tasks compute long


@pytest.fixture(scope="module")
def shared_cluster() -> Iterator[SchedulerClusterCombo]:
    with running_cluster(WORKERS, per_worker_task_queue_size=1) as cluster:
        yield cluster


def slow(i: int) -> int:
    time.sleep(LONG_SECONDS)
    return i


def learned_long(client: Client) -> None:
    """A round of long tasks, one on each worker (a worker of one task takes no second one)."""
    assert [f.result(timeout=DEADLINE_SECONDS) for f in [client.submit(slow, i) for i in range(WORKERS)]] == [0, 1]


def test_the_issues_script_runs_every_task(shared_cluster: SchedulerClusterCombo) -> None:
    with Client(address=shared_cluster.get_address()) as client:
        learned_long(client)
        futures = [client.submit(slow, i) for i in range(2 * WORKERS)]
        assert [f.result(timeout=DEADLINE_SECONDS) for f in futures] == list(range(2 * WORKERS))


def nested(depth: int) -> int:
    """A chain of `depth` tasks, each waiting on the next: deeper than the cluster has workers."""
    if depth == 1:
        return slow(1)
    with Client() as inner:
        return inner.submit(nested, depth - 1).result() + 1


def test_nested_tasks_deeper_than_the_workers_run_in_their_waiting_parents_slots(
    shared_cluster: SchedulerClusterCombo,
) -> None:
    with Client(address=shared_cluster.get_address()) as client:
        learned_long(client)
        assert client.submit(nested, WORKERS + 1).result(timeout=DEADLINE_SECONDS) == WORKERS + 1


class Counter:
    def __init__(self) -> None:
        self.count = 0

    def add(self) -> int:
        self.count += 1
        return self.count


def meet(folder: str, name: str, other: str) -> str:
    """Returns once the other task has started too: both run at once, or neither returns."""
    Path(folder, name).touch()
    deadline = time.monotonic() + DEADLINE_SECONDS
    while not os.path.exists(os.path.join(folder, other)):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{other} never started beside {name}")
        time.sleep(0.02)
    time.sleep(LONG_SECONDS)
    return name


def test_a_worker_hosting_an_actor_still_runs_a_task_beside_it(
    shared_cluster: SchedulerClusterCombo, tmp_path: Path
) -> None:
    """Two tasks that must run at once on two workers of one task, one of which hosts an actor."""
    with Client(address=shared_cluster.get_address()) as client:
        learned_long(client)
        counter = client.actor(Counter)
        assert counter.add().result(timeout=DEADLINE_SECONDS) == 1
        pair = [client.submit(meet, str(tmp_path), "a", "b"), client.submit(meet, str(tmp_path), "b", "a")]
        assert [f.result(timeout=DEADLINE_SECONDS) for f in pair] == ["a", "b"]
        assert counter.add().result(timeout=DEADLINE_SECONDS) == 2
        counter.stop()
