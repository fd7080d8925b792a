"""Workers and clients that die abruptly (SIGKILL): the scheduler keeps serving, a dead worker's tasks
run again elsewhere up to the retry budget, a dead client's tasks are cancelled (behaviour.md F1, F2,
F11, O4; DESIGN.md section 5)."""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from scaler import Client
from scaler.errors import WorkerDiedError
from tests.integration.conftest import (
    DEADLINE_SECONDS,
    kill_tree,
    monitor,
    pid_is_alive,
    probe_scheduler,
    process_tree,
    scheduler_pid,
    storage_pid,
    wait_all_gone,
    wait_for,
    wait_for_workers,
    worker_agent_pids,
)

pytestmark = pytest.mark.integration


# ---------------------------------------------------------------- task functions (run on workers)


def _agent_pid() -> int:
    """The worker agent running this task: the processor's parent is the zygote, whose parent is the agent."""
    import os

    import psutil

    return psutil.Process(os.getppid()).ppid()


def record_agent_then_sleep(path: str, seconds: float) -> int:
    """Append the pid of the worker agent that runs this task to `path`, sleep, and return that pid."""

    agent = _agent_pid()
    with open(path, "a") as marker:
        marker.write(f"{agent}\n")
    time.sleep(seconds)
    return agent


def record_start_and_end(path: str, seconds: float) -> int:
    """Append "start <agent> <processor>", sleep, append "done <agent> <processor>"; return the agent pid."""
    import os

    agent = _agent_pid()
    with open(path, "a") as marker:
        marker.write(f"start {agent} {os.getpid()}\n")
    time.sleep(seconds)
    with open(path, "a") as marker:
        marker.write(f"done {agent} {os.getpid()}\n")
    return agent


def kill_own_agent(path: str) -> None:
    """SIGKILL the worker agent running this task (the whole worker dies with it)."""
    import os
    import signal

    agent = _agent_pid()
    with open(path, "a") as marker:
        marker.write(f"{agent}\n")
    os.kill(agent, signal.SIGKILL)
    time.sleep(60)


def square_after_nap(value: int) -> int:

    time.sleep(0.02)
    return value * value


def read_pids(path: Path) -> list[int]:
    """Agents that started a task, in order."""
    return [int(word) for word in path.read_text().split() if word.isdigit()] if path.exists() else []


def read_events(path: Path) -> list[tuple[str, int, int]]:
    """(event, agent pid, processor pid) written by record_start_and_end, in order."""
    lines = path.read_text().splitlines() if path.exists() else []
    return [(event, int(agent), int(processor)) for event, agent, processor in (line.split() for line in lines)]


# ---------------------------------------------------------------- tests


@pytest.mark.timeout(90)
def test_sigkilled_worker_does_not_stall_scheduler_and_its_tasks_finish_elsewhere(make_cluster, tmp_path):
    cluster = make_cluster(2, worker_timeout_seconds=10)
    wait_for_workers(cluster.monitor_address, 2)
    marker = tmp_path / "agents"
    with Client(address=cluster.get_address()) as client:
        futures = [client.submit(record_agent_then_sleep, str(marker), 1.0) for _ in range(4)]
        victim = wait_for(lambda: read_pids(marker)[:1], "a task to start")[0]
        killed = kill_tree(victim)
        wait_all_gone(killed, "the killed worker's processes to disappear")

        # the scheduler answers at once, and a new client gets a result
        assert probe_scheduler(cluster.get_address(), timeout_seconds=DEADLINE_SECONDS).accepted
        with Client(address=cluster.get_address()) as newcomer:
            assert newcomer.submit(pow, 2, 10).result(timeout=DEADLINE_SECONDS) == 1024

        results = [future.result(timeout=DEADLINE_SECONDS) for future in futures]
    (survivor,) = set(worker_agent_pids(cluster)) - {victim}
    assert set(results) <= {victim, survivor}
    # the task the victim was running when it died started there and finished on the survivor
    assert read_pids(marker).count(victim) > results.count(victim), (read_pids(marker), results)
    assert pid_is_alive(scheduler_pid(cluster))


CLIENT_WITH_TASKS_IN_FLIGHT = """
import sys, time
from scaler import Client

client = Client(address=sys.argv[1])
futures = [client.submit(time.sleep, 120) for _ in range(int(sys.argv[2]))]
print("submitted", flush=True)
time.sleep(600)
"""


@pytest.mark.timeout(90)
def test_sigkilled_client_and_worker_leave_scheduler_serving_and_dead_clients_tasks_cancelled(make_cluster, processes):
    cluster = make_cluster(3, worker_timeout_seconds=60, client_timeout_seconds=60)
    wait_for_workers(cluster.monitor_address, 3)
    doomed = processes.add(
        subprocess.Popen(
            [sys.executable, "-c", CLIENT_WITH_TASKS_IN_FLIGHT, cluster.get_address(), "6"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
        )
    )
    assert doomed.stdout is not None
    assert doomed.stdout.readline().strip() == b"submitted"
    with monitor(cluster.monitor_address) as next_snapshot:
        next_snapshot(lambda snapshot: snapshot.scheduler.running >= 3)

    doomed.kill()
    doomed.wait()
    kill_tree(worker_agent_pids(cluster)[0])

    assert pid_is_alive(scheduler_pid(cluster))
    assert pid_is_alive(storage_pid(cluster))
    # every surviving worker is busy with the dead client's two-minute sleeps: results within the
    # deadline prove that those tasks were cancelled when the client's connection closed
    with Client(address=cluster.get_address()) as newcomer:
        futures = [newcomer.submit(pow, 3, n) for n in range(4)]
        assert [future.result(timeout=DEADLINE_SECONDS) for future in futures] == [1, 3, 9, 27]
    with monitor(cluster.monitor_address) as next_snapshot:
        snapshot = next_snapshot(lambda s: len(s.workers) == 2 and s.scheduler.running == 0)
    assert snapshot.scheduler.canceled >= 6
    assert pid_is_alive(scheduler_pid(cluster))


@pytest.mark.timeout(60)
def test_running_task_of_sigkilled_worker_is_redispatched_and_succeeds_elsewhere(make_cluster, tmp_path):
    # a worker timeout far beyond the deadline: only noticing the closed connection can re-dispatch in time
    cluster = make_cluster(2, worker_timeout_seconds=600)
    wait_for_workers(cluster.monitor_address, 2)
    marker = tmp_path / "agents"
    with Client(address=cluster.get_address()) as client:
        future = client.submit(record_agent_then_sleep, str(marker), 2.0)
        victim = wait_for(lambda: read_pids(marker)[:1], "the task to start")[0]
        kill_tree(victim)
        finisher = future.result(timeout=DEADLINE_SECONDS)
    assert finisher != victim
    assert finisher in worker_agent_pids(cluster)
    assert read_pids(marker) == [victim, finisher]


@pytest.mark.timeout(90)
def test_task_killing_its_worker_fails_with_worker_died_error_after_retry_budget(make_cluster, tmp_path):
    cluster = make_cluster(5, worker_timeout_seconds=600)
    wait_for_workers(cluster.monitor_address, 5)
    marker = tmp_path / "agents"
    with Client(address=cluster.get_address()) as client:
        future = client.submit(kill_own_agent, str(marker))
        with pytest.raises(WorkerDiedError) as raised:
            future.result(timeout=60)
        killed = read_pids(marker)
        # the default budget is 3 re-dispatches: the first run and three more each killed a worker
        assert len(killed) == 4, killed
        assert len(set(killed)) == 4, killed
        message = str(raised.value)
        assert "retry budget of 3" in message
        assert f"pid {killed[-1]}" in message, message
        assert "connection" in message, message
        # the one worker left still serves
        assert client.submit(pow, 2, 5).result(timeout=DEADLINE_SECONDS) == 32
    assert len([pid for pid in worker_agent_pids(cluster) if pid_is_alive(pid)]) == 1


@pytest.mark.timeout(90)
def test_each_of_200_tasks_completes_exactly_once_when_a_worker_is_sigkilled_midway(make_cluster):
    cluster = make_cluster(3, worker_timeout_seconds=10)
    wait_for_workers(cluster.monitor_address, 3)
    completions: collections.Counter[bytes] = collections.Counter()
    lock = threading.Lock()

    def count(future: concurrent.futures.Future) -> None:
        with lock:
            completions[future.task_id] += 1

    with Client(address=cluster.get_address()) as client:
        futures = [client.submit(square_after_nap, value) for value in range(200)]
        for future in futures:
            future.add_done_callback(count)
        wait_for(lambda: sum(future.done() for future in futures) >= 30, "30 results")
        kill_tree(worker_agent_pids(cluster)[0])
        _, not_done = concurrent.futures.wait(futures, timeout=60)
        assert not not_done, f"{len(not_done)} futures never completed"
        assert [future.result() for future in futures] == [value * value for value in range(200)]
        # a duplicate completion would be a second callback: the scheduler's messages arrive in order, so one that
        # was on its way is in before the answer to a task submitted now
        assert client.submit(square_after_nap, 3).result(timeout=60) == 9
        assert len(completions) == 200
        assert set(completions.values()) == {1}
    with monitor(cluster.monitor_address) as next_snapshot:
        snapshot = next_snapshot(lambda s: s.scheduler.succeeded >= 201 and s.scheduler.running == 0)
    assert snapshot.scheduler.succeeded == 201  # the 200 and the one submitted after them
    assert snapshot.scheduler.failed == 0


@pytest.mark.timeout(90)
def test_frozen_worker_is_dropped_after_worker_timeout_and_its_task_completes_once_elsewhere(make_cluster, tmp_path):
    # SIGSTOP keeps the connection open: only the heartbeat timeout (the slow path) can notice
    cluster = make_cluster(2, worker_timeout_seconds=2, heartbeat_interval_seconds=0.5)
    wait_for_workers(cluster.monitor_address, 2)
    marker = tmp_path / "agents"
    completions = []
    with Client(address=cluster.get_address()) as client:
        future = client.submit(record_start_and_end, str(marker), 1.0)
        future.add_done_callback(completions.append)
        _, frozen, stale = wait_for(lambda: read_events(marker)[:1], "the task to start")[0]
        tree = process_tree(frozen)
        for process in tree:
            process.suspend()
        try:
            finisher = future.result(timeout=DEADLINE_SECONDS)
            assert finisher != frozen
        finally:
            for process in tree:
                with contextlib.suppress(psutil.NoSuchProcess):
                    process.resume()
        # thawed, the worker either finishes its stale copy or drops it (with its processor) when it says
        # hello again; either way the client must not hear of it
        wait_for(
            lambda: ("done", frozen, stale) in read_events(marker) or not pid_is_alive(stale),
            "the stale copy to finish or be dropped",
        )
        with monitor(cluster.monitor_address) as next_snapshot:
            next_snapshot(lambda s: len(s.workers) == 2 and s.scheduler.running == 0)
        assert client.submit(pow, 2, 7).result(timeout=DEADLINE_SECONDS) == 128
    assert len(completions) == 1
    with monitor(cluster.monitor_address) as next_snapshot:
        snapshot = next_snapshot(lambda s: s.scheduler.running == 0 and s.scheduler.succeeded >= 2)
    assert snapshot.scheduler.succeeded == 2
    assert pid_is_alive(frozen)
