"""The scheduler process's collector thresholds (process.py `set_collector_thresholds`): the tasks that thousands of
workers hold, about five young objects each, are not walked by young collections while they flow (with 10,000
workers holding 20,000 tasks, the walks would be 2-3.5 us a task; docs/guide/scale.md, "Why it stays small")."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from typing import Any

import pytest

from scaler.scheduler.core.scheduler_core import CoreSettings
from scaler.scheduler.process import set_collector_thresholds
from scaler_rehearsal.testing.simulation import PYTHON, SimulatedCluster, task

WORKERS = 2_500
TASKS = 5_000  #: two for each worker: every worker's capacity held, as in the scale harness


@pytest.fixture
def collections_started() -> Iterator[list[int]]:
    """The generation of each collection that starts, with the scheduler process's thresholds (restored after)."""
    started: list[int] = []

    def count(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            started.append(info["generation"])

    thresholds = gc.get_threshold()
    gc.callbacks.append(count)
    try:
        yield started
    finally:
        gc.callbacks.remove(count)
        gc.set_threshold(*thresholds)


@pytest.mark.timeout(60)
def test_a_flow_of_tasks_through_thousands_of_workers_is_not_walked_by_the_collector(
    collections_started: list[int],
) -> None:
    """5,000 tasks sent to 2,500 workers and answered: no collection while they flow. Fails with the threshold of
    10,000 objects the scheduler had (four young collections, each walking every task held)."""
    sim = SimulatedCluster(CoreSettings("s", "o", PYTHON))
    client = sim.add_client()
    workers = [sim.add_worker(f"w{number}", capacity=2) for number in range(WORKERS)]
    set_collector_thresholds()
    gc.collect()
    collections_started.clear()
    sim.submit(client, [task(client.peer, number) for number in range(TASKS)])
    sim.effects.clear()
    assert sum(len(worker.held) for worker in workers) == TASKS
    for worker in workers:
        while worker.held:
            sim.finish(worker)
    sim.effects.clear()
    assert sum(1 for answers in client.answers.values() if answers) == TASKS
    assert collections_started == []
