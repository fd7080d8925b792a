"""One route (docs/architecture.md, "One route"), with real processes and sockets: the scheduler sends every task
straight to a processor on its own link and everything about it comes back there, so tasks run, fail, nest and die
with their worker agent frozen (SIGSTOP): none of it passes the agent, which only supervises (a cancelled task
computing alone has its processor killed on the scheduler's request). The scheduler's rules on their own:
tests/unit/scheduler/test_link_sessions.py.

Checked with the mechanism off, by hand (on the routes before issue 56): with every task through the agent, every
test below that freezes the agent timed out; with `TaskThreads._resume` doing nothing, the nested test times out (the
parent waits for a turn nobody gives back); with `LinkSessions._gone` not called, the processor-death test times out
(the killed task's record stays dispatched to a link that is gone)."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from scaler import Client, SchedulerClusterCombo
from scaler.errors import ProcessorDiedError
from scaler.protocol import messages as m
from tests.integration.conftest import (
    DEADLINE_SECONDS,
    agent_of_processor,
    monitor,
    pid_is_alive,
    wait_for,
    wait_for_workers,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]


# ---------------------------------------------------------------- task functions (run in processors)


def inc(x: int) -> int:
    return x + 1


def pid() -> int:
    import os

    return os.getpid()


def die() -> None:
    import os
    import signal

    os.kill(os.getpid(), signal.SIGKILL)


def sleep_then(seconds: float, value: int) -> int:
    import time

    time.sleep(seconds)
    return value


def parent(client: Client, n: int) -> int:
    """Waits on a nested task: it parks in its processor, which runs the child meanwhile."""
    return client.submit(inc, n).result() + 1


def start_processes_then_sleep(path: str) -> None:
    """Starts what tasks start: a subprocess with a child of its own, and shared memory that multiprocessing's
    resource tracker (a child too, which ignores SIGTERM) unlinks once its users are gone; writes their pids and the
    memory's name to `path`, then sleeps."""
    import json
    import os
    import subprocess
    import time
    from multiprocessing import resource_tracker, shared_memory

    import psutil

    shell = subprocess.Popen(["sh", "-c", "sleep 300 & wait"])
    memory = shared_memory.SharedMemory(create=True, size=4096)
    while not psutil.Process(shell.pid).children():
        time.sleep(0.01)
    pids = [shell.pid, *(child.pid for child in psutil.Process(shell.pid).children())]
    started = {"pids": pids, "tracker": resource_tracker._resource_tracker._pid, "memory": memory.name}
    with open(path + ".part", "w") as file:
        json.dump(started, file)
    os.rename(path + ".part", path)
    time.sleep(300)


# ---------------------------------------------------------------- helpers


@contextmanager
def frozen(pid: int) -> Iterator[None]:
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


def one_worker(make_cluster) -> SchedulerClusterCombo:  # type: ignore[no-untyped-def]
    """One worker, one processor."""
    cluster = make_cluster(1)
    wait_for_workers(cluster.monitor_address, 1)
    return cluster


def the_agent(client: Client) -> int:
    """The agent of the worker its processor's first task ran on."""
    return agent_of_processor(client.submit(pid).result(timeout=DEADLINE_SECONDS))


# ---------------------------------------------------------------- tests


def test_tasks_run_on_their_processors_while_their_agent_is_frozen(make_cluster):
    cluster = one_worker(make_cluster)
    with Client(cluster.get_address()) as client:
        agent = the_agent(client)
        with frozen(agent):
            futures = [client.submit(inc, i) for i in range(500)]
            assert [f.result(timeout=DEADLINE_SECONDS) for f in futures] == [i + 1 for i in range(500)]
            assert client.submit(inc, 1).result(timeout=DEADLINE_SECONDS) == 2


def test_a_processor_that_dies_fails_its_task_and_the_others_run(make_cluster):
    """The task that killed its processor fails with ProcessorDiedError, told by the scheduler once its link closed
    (its agent is frozen: after the wait for its word); the tasks sent behind it run on the new processor once the
    agent wakes."""
    cluster = one_worker(make_cluster)
    with Client(cluster.get_address()) as client:
        agent = the_agent(client)
        with frozen(agent):
            killer = client.submit(die)
            with pytest.raises(ProcessorDiedError):
                killer.result(timeout=DEADLINE_SECONDS)
        futures = [client.submit(inc, i) for i in range(50)]
        assert [f.result(timeout=DEADLINE_SECONDS) for f in futures] == [i + 1 for i in range(50)]


def test_a_running_task_stuck_in_a_c_call_is_cancelled_by_killing_its_processor(make_cluster):
    """A task stuck in a C call (sleep) that computes alone: the scheduler has its agent kill its processor
    (ProcessorKill), the cancel is confirmed once the processor is gone, and a task sent behind it runs on the
    processor that replaces it. Checked to fail with `ProcessorLink.stops_by_kill` returning False (only a TaskCancel
    on the link, which a C call never sees: the cancel times out)."""
    cluster = one_worker(make_cluster)
    with Client(cluster.get_address()) as client:
        first = client.submit(pid).result(timeout=DEADLINE_SECONDS)
        slow = client.submit(sleep_then, 60, 1)
        deadline = time.monotonic() + DEADLINE_SECONDS
        while not slow.running() and time.monotonic() < deadline:  # dispatched to its processor
            time.sleep(0.01)
        time.sleep(0.2)  # it has started computing (a cancel of a staged one takes another way)
        assert slow.cancel()
        wait_for(lambda: slow.cancelled(), what="the cancel's confirmation")
        assert client.submit(pid).result(timeout=DEADLINE_SECONDS) != first, "its processor was killed"


def test_a_cancelled_tasks_processes_end_with_its_processor(make_cluster, tmp_path):
    """The processes a task started (a shell and its sleep, multiprocessing's resource tracker) end when its
    processor is killed for a cancel: SIGTERM once it is gone; the tracker, which ignores SIGTERM, unlinks the shared
    memory the task made, then ends. Checked to fail with the processor alone killed (the shell and its sleep live
    on) and with its descendants SIGKILLed (the tracker dies first: the memory stays in /dev/shm)."""
    cluster = one_worker(make_cluster)
    path = tmp_path / "started.json"
    with Client(cluster.get_address()) as client:
        task = client.submit(start_processes_then_sleep, str(path))
        wait_for(path.exists, what="the task's processes to start")
        started = json.loads(path.read_text())
        assert task.cancel()
        wait_for(lambda: task.cancelled(), what="the cancel's confirmation")
        wait_for(lambda: not any(pid_is_alive(each) for each in started["pids"]), what="the task's processes to end")
        wait_for(lambda: not pid_is_alive(started["tracker"]), what="the resource tracker to end")
        assert not Path("/dev/shm", started["memory"]).exists(), "the tracker unlinked the task's shared memory"


def test_a_nested_task_parks_and_goes_on_in_its_processor(make_cluster):
    """The parent parks; its slot takes the child; the processor gives the parent the turn back itself."""
    cluster = one_worker(make_cluster)
    with Client(cluster.get_address()) as client:
        agent = the_agent(client)
        with frozen(agent):
            futures = [client.submit(parent, client, i) for i in range(4)]
            assert [f.result(timeout=DEADLINE_SECONDS) for f in futures] == [i + 2 for i in range(4)]


def wait_for_file(path: str) -> int:
    import os
    import time

    while not os.path.exists(path):
        time.sleep(0.02)
    return 1


def parent_of_waiting(client: Client, path: str) -> int:
    """Parks on a child that waits for a file."""
    return client.submit(wait_for_file, path).result() + 1


def test_the_monitor_counts_a_workers_tasks_as_its_own(make_cluster, tmp_path):
    """A worker's agent sees none of its tasks, yet the monitor feed (which scaler_top, the dashboard and /metrics
    read) counts them as the worker's: a parent parked in the processor is blocked, the child computing there is
    running and the processor's state says so, the others sent there are queued, and nothing more; once they end, the
    worker is idle again. Checked to fail with `view.with_link_tasks` returning the agent's status unchanged (running
    and blocked stay 0) and with the agent's `_shown_state` ignoring the mark (the processor is "idle")."""
    cluster = one_worker(make_cluster)
    released = tmp_path / "released"
    with Client(cluster.get_address()) as client, monitor(cluster.monitor_address) as next_snapshot:
        the_agent(client)
        parent_future = client.submit(parent_of_waiting, client, str(released))
        others = [client.submit(wait_for_file, str(released)) for _ in range(2)]

        def counted(snapshot: m.StatusSnapshot) -> bool:
            (worker,) = snapshot.workers
            status = worker.status
            return (
                status.running == 1
                and status.blocked == 1
                and status.running + status.queued + status.blocked == worker.assigned
                and [processor.state for processor in status.processors] == ["running"]
            )

        next_snapshot(counted)
        released.write_text("go")
        assert parent_future.result(timeout=DEADLINE_SECONDS) == 2
        assert [f.result(timeout=DEADLINE_SECONDS) for f in others] == [1, 1]

        def idle(snapshot: m.StatusSnapshot) -> bool:
            (worker,) = snapshot.workers
            status = worker.status
            return status.running == status.queued == status.blocked == worker.assigned == 0 and [
                processor.state for processor in status.processors
            ] == ["idle"]

        next_snapshot(idle)


class Counter:
    def __init__(self) -> None:
        self.count = 0

    def add(self) -> int:
        self.count += 1
        return self.count

    def wait_for(self, path: str) -> bool:
        import os
        import time

        while not os.path.exists(path):
            time.sleep(0.02)
        return True


def test_an_actor_does_not_hold_tasks_behind_it(make_cluster, tmp_path):
    """An actor's start task holds its processor's turn while it lives, and a call that waits holds its thread: tasks
    are not sent to that processor once the actor is built (its worker is asked for another processor), and those
    that reach it are given back and run elsewhere. Checked to fail with `ProcessorLink.host` not called on ActorReady
    (the tasks waited behind the actor's call)."""
    cluster = one_worker(make_cluster)
    with Client(cluster.get_address()) as client:
        counter = client.actor(Counter)
        assert counter.add().result(timeout=DEADLINE_SECONDS) == 1
        released = tmp_path / "released"
        waiting = counter.wait_for(str(released))
        futures = [client.submit(inc, i) for i in range(200)]
        assert [f.result(timeout=DEADLINE_SECONDS) for f in futures] == [i + 1 for i in range(200)]
        assert not waiting.done()
        released.write_text("go")
        assert waiting.result(timeout=DEADLINE_SECONDS) is True
        assert counter.add().result(timeout=DEADLINE_SECONDS) == 2
        counter.stop()


# ---------------------------------------------------------------- taking staged tasks back, and their order


def started_at(seconds: float, mark: str = "") -> tuple[float, int]:
    """Sleeps; returns when it started (the host's monotonic clock) and its processor's pid. `mark`: a file it
    writes as it starts."""
    import os
    import time

    started = time.monotonic()
    if mark:
        with open(mark, "w") as file:
            file.write("started")
    time.sleep(seconds)
    return started, os.getpid()


def learn_tiny(client: Client) -> None:
    """Many tiny tasks: the scheduler learns that the worker's tasks are tiny and stages them in its processors."""
    futures = [client.submit(inc, i) for i in range(300)]
    assert [f.result(timeout=DEADLINE_SECONDS) for f in futures] == [i + 1 for i in range(300)]


def test_a_high_priority_task_overtakes_the_low_ones_staged_in_a_processor(make_cluster, tmp_path):
    """With the agent frozen, 40 low-priority tasks of 0.3 s fill the worker (staged in its one processor); a task of
    priority 5 submitted after the second starts is the next to start: the scheduler asks a staged low task back on
    the processor's link (TaskReturn), the processor gives it back unstarted, and the high task takes its place ahead
    of the staged ones. Checked to fail with `TaskLifecycle.take_back` sending nothing (the worker stays full: 12 low
    tasks started first)."""
    cluster = one_worker(make_cluster)
    with Client(cluster.get_address()) as client:
        agent = the_agent(client)
        learn_tiny(client)
        with frozen(agent):
            low = [client.submit(started_at, 0.3, str(tmp_path / f"low-{i}")) for i in range(40)]
            wait_for(lambda: len(list(tmp_path.glob("low-*"))) >= 2, what="the second low-priority task to start")
            submitted = time.monotonic()
            high_started, _ = client.submit(started_at, 0.0, priority=5).result(timeout=DEADLINE_SECONDS)
            for future in low:
                future.cancel()
            between = [
                f.result()[0]
                for f in low
                if f.done() and not f.cancelled() and submitted < f.result()[0] < high_started
            ]
    assert between == [], f"{len(between)} low-priority task(s) started before the high one"


def test_a_processor_runs_its_staged_tasks_in_priority_order(make_cluster, tmp_path):
    """Two low-priority tasks and then a high one are staged behind a computing task in the one processor (the worker
    has room for all: nothing is taken back): the high one starts first. Checked to fail with `TaskLine._await_turn`
    appending (the order received)."""
    cluster = one_worker(make_cluster)
    with Client(cluster.get_address()) as client:
        agent = the_agent(client)
        learn_tiny(client)
        with frozen(agent):
            first = client.submit(started_at, 0.6, str(tmp_path / "first"))
            wait_for(lambda: (tmp_path / "first").exists(), what="the first task to start")
            low = [client.submit(started_at, 0.05) for _ in range(2)]
            high = client.submit(started_at, 0.05, priority=5)
            high_started, _ = high.result(timeout=DEADLINE_SECONDS)
            low_started = [f.result(timeout=DEADLINE_SECONDS)[0] for f in low]
            first.result(timeout=DEADLINE_SECONDS)
    assert high_started < min(low_started)


def test_tasks_staged_behind_a_long_task_are_taken_back_for_another_worker(make_cluster, tmp_path):
    """Two workers of one processor each, the scheduler's balancer off. One computes a task of 2.5 s, then the other
    one of 6 s; four tiny tasks submitted then are staged behind both. Once the long ones have computed 1 s the
    scheduler asks the staged ones back on the links and sends none there while they compute long
    (processor_links.py rule 3): they run on the first worker once its task ended, none in the 6 s task's processor.
    Checked to fail with `ProcessorLink.behind_long` returning None (two ran there, after it)."""
    cluster = make_cluster(2, load_balance_seconds=0)
    wait_for_workers(cluster.monitor_address, 2)
    with Client(cluster.get_address()) as client:
        learn_tiny(client)
        shorter = client.submit(started_at, 2.5, str(tmp_path / "shorter"))
        wait_for(lambda: (tmp_path / "shorter").exists(), what="the 2.5 s task to start")
        longer = client.submit(started_at, 6.0, str(tmp_path / "longer"))
        wait_for(lambda: (tmp_path / "longer").exists(), what="the 6 s task to start")
        tiny = [client.submit(started_at, 0.0) for _ in range(4)]
        tiny_pids = [f.result(timeout=DEADLINE_SECONDS)[1] for f in tiny]
        _, longer_pid = longer.result(timeout=DEADLINE_SECONDS)
        shorter.result(timeout=DEADLINE_SECONDS)
    assert longer_pid not in tiny_pids, "a task waited behind the 6 s one in its processor"
