"""Cancel races: a running task is stopped, a cancel that meets the result ends the future exactly one
way, a cancel whose worker dies still confirms, a cancel without workers confirms at once, and stray
confirms or results never confuse the client (behaviour.md F12, F13, F14; DESIGN.md section 5)."""

from __future__ import annotations

import concurrent.futures
import random
import threading
from pathlib import Path

import pytest

from scaler import Client
from tests.integration.conftest import (
    DEADLINE_SECONDS,
    kill_tree,
    monitor,
    pid_is_alive,
    wait_for,
    wait_for_workers,
)

pytestmark = pytest.mark.integration


# ---------------------------------------------------------------- task functions (run on workers)


def record_pids_then_sleep(path: str, seconds: float) -> int:
    """Write "<agent pid> <processor pid>" to `path`, then sleep."""
    import os
    import time

    import psutil

    Path(path).write_text(f"{psutil.Process(os.getppid()).ppid()} {os.getpid()}")
    time.sleep(seconds)
    return os.getpid()


def read_pids(path: Path) -> tuple[int, int] | None:
    text = path.read_text() if path.exists() else ""
    if not text:
        return None
    agent, processor = text.split()
    return int(agent), int(processor)


def assert_ended_exactly_one_way(future: concurrent.futures.Future, expected: object) -> bool:
    """Cancelled (and result() raises CancelledError) or finished with the expected value; never both.
    Returns whether it was cancelled."""
    assert future.done()
    if future.cancelled():
        with pytest.raises(concurrent.futures.CancelledError):
            future.result(timeout=0)
        return True
    assert future.result(timeout=0) == expected
    return False


# ---------------------------------------------------------------- tests


@pytest.mark.timeout(60)
def test_cancel_of_running_task_returns_true_kills_its_processor_and_next_task_runs(shared_cluster, tmp_path):
    marker = tmp_path / "pids"
    with Client(address=shared_cluster.get_address()) as client:
        future = client.submit(record_pids_then_sleep, str(marker), 60)
        agent, processor = wait_for(lambda: read_pids(marker), "the task to start")
        assert future.cancel(timeout=DEADLINE_SECONDS) is True
        assert future.cancelled()
        # waiters see it too (Future.cancel alone leaves concurrent.futures.wait asleep until its timeout)
        assert future in concurrent.futures.wait([future], timeout=0).done
        wait_for(lambda: not pid_is_alive(processor), "the cancelled task's processor to be killed")
        assert pid_is_alive(agent)
        assert client.submit(pow, 2, 8).result(timeout=DEADLINE_SECONDS) == 256


@pytest.mark.timeout(90)
def test_cancel_racing_completion_ends_every_future_exactly_one_way(shared_cluster):
    rng = random.Random(20261121)
    outcomes = {"cancelled": 0, "finished": 0}
    with Client(address=shared_cluster.get_address()) as client:
        for value in range(50):
            future = client.submit(pow, value, 2)
            threading.Event().wait(rng.uniform(0.0, 0.01))  # land the cancel anywhere around completion
            answered = future.cancel(timeout=DEADLINE_SECONDS)
            assert future.done(), f"iteration {value}: the future hangs after cancel()"
            cancelled = assert_ended_exactly_one_way(future, value * value)
            assert answered is cancelled
            outcomes["cancelled" if cancelled else "finished"] += 1
        assert client.submit(pow, 7, 2).result(timeout=DEADLINE_SECONDS) == 49
    assert sum(outcomes.values()) == 50


@pytest.mark.timeout(90)
def test_cancel_while_its_worker_dies_confirms_the_cancel(make_cluster, tmp_path):
    cluster = make_cluster(2, worker_timeout_seconds=600)
    wait_for_workers(cluster.monitor_address, 2)
    marker = tmp_path / "pids"
    with Client(address=cluster.get_address()) as client:
        future = client.submit(record_pids_then_sleep, str(marker), 60)
        agent, _ = wait_for(lambda: read_pids(marker), "the task to start")
        killer = threading.Thread(target=kill_tree, args=(agent,))
        killer.start()
        answered = future.cancel(timeout=DEADLINE_SECONDS)
        killer.join()
        assert answered is True
        assert future.cancelled()
        assert client.submit(pow, 3, 3).result(timeout=DEADLINE_SECONDS) == 27
    with monitor(cluster.monitor_address) as next_snapshot:
        snapshot = next_snapshot(lambda s: len(s.workers) == 1 and s.scheduler.running == 0)
    assert snapshot.scheduler.queued == 0


@pytest.mark.timeout(60)
def test_cancel_on_cluster_without_workers_confirms_at_once(make_cluster):
    cluster = make_cluster(0)
    with Client(address=cluster.get_address()) as client:
        future = client.submit(pow, 2, 2)
        assert future.cancel(timeout=DEADLINE_SECONDS) is True
        assert future.cancelled()
        graph = {"a": 1, "b": (pow, "a", 2), "c": (pow, "b", 3)}
        members = client.get(graph, keys=["b", "c"], block=False)
        assert members["c"].cancel(timeout=DEADLINE_SECONDS) is True
        wait_for(lambda: all(f.done() for f in members.values()), "every graph member to end")
        assert all(f.cancelled() for f in members.values())
    with monitor(cluster.monitor_address) as next_snapshot:
        snapshot = next_snapshot()
    assert snapshot.scheduler.queued == 0
    assert snapshot.scheduler.running == 0


@pytest.mark.timeout(90)
def test_mass_cancel_racing_results_leaves_every_future_done_one_way_and_client_usable(shared_cluster):
    with Client(address=shared_cluster.get_address()) as client:
        futures = [client.submit(pow, value, 2) for value in range(400)]
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(lambda f: f.cancel(timeout=DEADLINE_SECONDS), futures))
        _, not_done = concurrent.futures.wait(futures, timeout=DEADLINE_SECONDS)
        assert not not_done, f"{len(not_done)} futures hang after cancel()"
        for value, (future, answered) in enumerate(zip(futures, answers, strict=True)):
            assert answered is assert_ended_exactly_one_way(future, value * value)
        assert client.submit(pow, 9, 2).result(timeout=DEADLINE_SECONDS) == 81
        assert client.map(pow, range(5), [2] * 5) == [0, 1, 4, 9, 16]
