"""Nested tasks whose waiting parents are threads of their processor (`--nested-parents thread`, the default)
against a processor per waiting parent (`process`): what each costs in processes, and what cancels, crashes,
profiles and printed output do when parents wait in the processor that runs other tasks."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from scaler import Client, SchedulerClusterCombo
from scaler.errors import ProcessorDiedError
from tests.integration.conftest import Launcher, pid_is_alive, wait_for, wait_for_workers, worker_agent_pids

pytestmark = pytest.mark.integration


def fibonacci_pids(client: Client, n: int) -> tuple[int, set[int]]:
    """fibonacci(n), and the pid of every processor that ran a task of it."""
    if n <= 1:
        return n, {os.getpid()}
    a = client.submit(fibonacci_pids, client, n - 1)
    b = client.submit(fibonacci_pids, client, n - 2)
    (value_a, pids_a), (value_b, pids_b) = a.result(), b.result()
    return value_a + value_b, pids_a | pids_b | {os.getpid()}


@pytest.mark.timeout(180)
def test_fibonacci_12_on_one_worker_waits_in_threads_of_one_processor(
    make_cluster: Callable[..., SchedulerClusterCombo],
) -> None:
    cluster = make_cluster(1)
    with Client(cluster.get_address()) as client:
        value, pids = client.submit(fibonacci_pids, client, 12).result(timeout=170)
    assert value == 144
    assert len(pids) == 1, f"465 tasks, up to 12 parents waiting at once, should share one processor: {pids}"


@pytest.mark.timeout(180)
def test_in_process_mode_every_waiting_parent_keeps_a_processor(
    make_cluster: Callable[..., SchedulerClusterCombo],
) -> None:
    cluster = make_cluster(1, nested_parents="process")
    with Client(cluster.get_address()) as client:
        value, pids = client.submit(fibonacci_pids, client, 7).result(timeout=170)
    assert value == 13
    assert len(pids) >= 5, f"fibonacci(7) nests 6 deep: a processor per waiting parent, not {pids}"


# ---------------------------------------------------------------- a parent that waits without scaler knowing

#: how long a parent waits for its child before it gives up (the child never runs without a preemption slot)
CHILD_WAIT_SECONDS = 60.0


def own_pid() -> int:
    return os.getpid()


def parent_waiting_on_a_callback(client: Client) -> tuple[int, int]:
    """A parent that waits for its child on a threading.Event set by the child's future's callback, not on `result()`
    (as parfun's parents do): its processor never says it waits, so it keeps its slot."""
    done = threading.Event()
    pids: list[int] = []
    child = client.submit(own_pid)
    child.add_done_callback(lambda future: (pids.append(future.result()), done.set()))
    if not done.wait(CHILD_WAIT_SECONDS):
        raise TimeoutError(f"its child did not run within {CHILD_WAIT_SECONDS:g} s")
    return os.getpid(), pids[0]


@pytest.mark.timeout(180)
def test_a_child_whose_parent_waits_without_parking_runs_in_a_processor_of_its_own(
    make_cluster: Callable[..., SchedulerClusterCombo],
) -> None:
    """One worker of one processor holding one task: the parent holds the slot while it waits, and its child gets a
    preemption slot, a processor more (core/preemption.py). Checked to fail with `preemption.plan` returning no grant
    (the parent raised TimeoutError: its child stayed queued)."""
    cluster = make_cluster(1, per_worker_task_queue_size=1)
    with Client(cluster.get_address()) as client:
        parent_pid, child_pid = client.submit(parent_waiting_on_a_callback, client).result(timeout=170)
    assert parent_pid != child_pid


# ---------------------------------------------------------------- stopping one parked parent among others


def wait_for_file(path: str, timeout_seconds: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_seconds
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} never appeared")
        time.sleep(0.02)


def child_until_released(folder: str, name: str) -> str:
    Path(folder, f"{name}-child-pid").write_text(str(os.getpid()))
    Path(folder, f"{name}-child-started").touch()
    wait_for_file(os.path.join(folder, f"release-{name}"))
    Path(folder, f"{name}-child-finished").touch()
    return name


def parent_of_one_child(client: Client, folder: str, name: str) -> tuple[str, int]:
    Path(folder, f"{name}-parent-pid").write_text(str(os.getpid()))
    child = client.submit_verbose(child_until_released, (folder, name), {}, capabilities={"children": -1})
    return child.result(), os.getpid()


@pytest.mark.timeout(180)
def test_a_cancelled_parked_parent_stops_with_its_child_and_its_neighbour_runs_on(
    make_cluster: Callable[..., SchedulerClusterCombo], launcher: Launcher, tmp_path: Path
) -> None:
    """Parents A and B wait in threads of the one processor of a "parents" worker; their children run on two
    "children" workers. Cancelling A cancels A's child, and leaves B (in the same process) running."""
    cluster = make_cluster(1, per_worker_capabilities={"parents": -1}, policy_content="allocate=capability; scaling=no")
    launcher.cluster(cluster.get_address(), 2, "-pwc", "children")
    wait_for_workers(cluster.monitor_address, 3)
    folder = str(tmp_path)
    with Client(cluster.get_address()) as client:
        a = client.submit_verbose(parent_of_one_child, (client, folder, "a"), {}, capabilities={"parents": -1})
        b = client.submit_verbose(parent_of_one_child, (client, folder, "b"), {}, capabilities={"parents": -1})
        wait_for(lambda: (tmp_path / "a-child-started").exists() and (tmp_path / "b-child-started").exists(),
                 "both children to start")  # fmt: skip
        parents = {(tmp_path / "a-parent-pid").read_text(), (tmp_path / "b-parent-pid").read_text()}
        assert len(parents) == 1, "both parents wait in the same processor"
        assert a.cancel(timeout=30)
        a_child = int((tmp_path / "a-child-pid").read_text())
        wait_for(lambda: not pid_is_alive(a_child), "A's child's processor to be stopped with A")
        (tmp_path / "release-a").touch()  # were A's child still running, it would now finish
        (tmp_path / "release-b").touch()
        assert b.result(timeout=60) == ("b", int(parents.pop())), "B finished in the processor it waited in"
        assert not (tmp_path / "a-child-finished").exists(), "A's child was cancelled with A"
        assert (
            client.submit_verbose(os.getpid, (), {}, capabilities={"parents": -1}).result(timeout=30) == b.result()[1]
        )


def slow_fibonacci(client: Client, n: int) -> int:
    if n <= 1:
        time.sleep(0.02)
        return n
    a = client.submit(slow_fibonacci, client, n - 1)
    b = client.submit(slow_fibonacci, client, n - 2)
    return int(a.result() + b.result())


def counted_recursion(client: Client, folder: str, name: str, n: int) -> int:
    with open(os.path.join(folder, f"{name}-runs"), "a") as runs:
        runs.write("run\n")
    return leaf_counting_fibonacci(client, folder, name, n)


def leaf_counting_fibonacci(client: Client, folder: str, name: str, n: int) -> int:
    """slow_fibonacci whose leaves write the pid of the processor that computes them to `{name}-leaves`."""
    if n <= 1:
        with open(os.path.join(folder, f"{name}-leaves"), "a") as leaves:
            leaves.write(f"{os.getpid()}\n")
        time.sleep(0.02)
        return n
    a = client.submit(leaf_counting_fibonacci, client, folder, name, n - 1)
    b = client.submit(leaf_counting_fibonacci, client, folder, name, n - 2)
    return int(a.result() + b.result())


def leaves(folder: Path, name: str) -> list[str]:
    """The processors (pids) that computed the leaves of recursion `name` so far, one per leaf."""
    path = folder / f"{name}-leaves"
    return path.read_text().split() if path.exists() else []


@pytest.mark.timeout(180)
def test_cancelling_one_recursion_leaves_another_in_the_same_processor_running_once(
    make_cluster: Callable[..., SchedulerClusterCombo], tmp_path: Path
) -> None:
    """One worker: both recursions' parents wait in its one processor, and tasks of the cancelled one are
    computing there when the cancel comes. They are stopped in the processor, not by killing it."""
    cluster = make_cluster(1)
    folder = str(tmp_path)
    with Client(cluster.get_address()) as client:
        doomed = client.submit(counted_recursion, client, folder, "doomed", 9)
        kept = client.submit(counted_recursion, client, folder, "kept", 9)
        # both started, and the doomed one deep: its parents wait in the processor, its leaves compute there
        wait_for(lambda: (tmp_path / "kept-runs").exists() and len(leaves(tmp_path, "doomed")) >= 3,
                 "both recursions to start, and leaves of the doomed one to compute")  # fmt: skip
        assert doomed.cancel(timeout=30)
        assert kept.result(timeout=120) == 34
        assert client.submit(slow_fibonacci, client, 5).result(timeout=60) == 5, "the worker serves on"
    assert (tmp_path / "kept-runs").read_text().count("run") == 1, "the other recursion was taken down and re-run"


# ---------------------------------------------------------------- a crash next to a waiting parent


def crash_the_first_time(marker: str) -> str:
    if not os.path.exists(marker):
        Path(marker).touch()
        os._exit(1)
    return "ok"


def parent_counting_runs(client: Client, folder: str) -> str:
    with open(os.path.join(folder, "parent-runs"), "a") as runs:
        runs.write("run\n")
    try:
        return client.submit(crash_the_first_time, os.path.join(folder, "crashed")).result()
    except ProcessorDiedError as error:
        return f"child died: {error}"


@pytest.mark.timeout(180)
def test_a_parent_parked_in_a_processor_that_crashes_runs_again(
    make_cluster: Callable[..., SchedulerClusterCombo], tmp_path: Path
) -> None:
    """On one worker the child runs in the processor its parent waits in: the crash takes the parent too, and the
    scheduler runs the parent again (within its retry budget), which succeeds."""
    cluster = make_cluster(1)
    with Client(cluster.get_address()) as client:
        assert client.submit(parent_counting_runs, client, str(tmp_path)).result(timeout=120) == "ok"
    assert (tmp_path / "parent-runs").read_text().count("run") == 2


@pytest.mark.timeout(180)
def test_in_process_mode_a_crash_of_a_child_fails_only_the_child(
    make_cluster: Callable[..., SchedulerClusterCombo], tmp_path: Path
) -> None:
    cluster = make_cluster(1, nested_parents="process")
    with Client(cluster.get_address()) as client:
        outcome = client.submit(parent_counting_runs, client, str(tmp_path)).result(timeout=120)
    assert outcome.startswith("child died: ") and "died" in outcome
    assert (tmp_path / "parent-runs").read_text().count("run") == 1


# ---------------------------------------------------------------- what a waiting parent is charged, and prints


def burn_cpu(seconds: float) -> float:
    started = time.process_time()
    while time.process_time() - started < seconds:
        pass
    return time.process_time() - started


def parent_of_a_busy_child(client: Client) -> float:
    print("parent before")
    burned = float(client.submit(burn_cpu, 1.0).result())
    print("parent after")
    return burned


@pytest.mark.timeout(180)
def test_a_parked_parent_is_not_charged_for_the_cpu_its_child_used_in_its_processor(
    make_cluster: Callable[..., SchedulerClusterCombo],
) -> None:
    cluster = make_cluster(1)
    with Client(cluster.get_address(), profiling=True) as client:
        future = client.submit(parent_of_a_busy_child, client)
        assert future.result(timeout=120) >= 1.0
        profile = future.profiling_info()
    assert profile.duration_s >= 1.0, "the parent waited for its child"
    assert profile.cpu_time_s < 0.5, f"the child's second of CPU was charged to its parent: {profile}"


@pytest.mark.timeout(180)
def test_a_parked_parents_printed_lines_stay_its_own_while_its_child_prints_in_its_processor() -> None:
    code = """
from scaler import Client, SchedulerClusterCombo
def child():
    print("child speaking")
    return 7
def parent(client):
    print("parent before")
    value = client.submit(child).result()
    print("parent after")
    return value
with SchedulerClusterCombo(n_workers=1, logging_level="WARNING") as cluster:
    with Client(address=cluster.get_address(), stream_output=True) as client:
        assert client.submit(parent, client).result() == 7  # its lines were printed before its result came
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=170)
    assert done.returncode == 0, done.stderr[-3000:]
    tagged = {line.rpartition("] ")[2]: line.partition("] ")[0] for line in done.stdout.splitlines() if "] " in line}
    assert "parent before" in tagged and tagged["parent before"] == tagged.get("parent after"), done.stdout
    assert tagged.get("child speaking") != tagged["parent before"], "the child's line was taken for its parent's"


def on_main_thread_and_can_set_a_signal_handler() -> bool:
    previous = signal.signal(signal.SIGUSR1, signal.SIG_IGN)
    signal.signal(signal.SIGUSR1, previous)
    return threading.current_thread() is threading.main_thread()


@pytest.mark.timeout(180)
def test_plain_tasks_run_on_the_main_thread_again_after_a_nested_computation(
    make_cluster: Callable[..., SchedulerClusterCombo],
) -> None:
    cluster = make_cluster(1)
    with Client(cluster.get_address()) as client:
        assert client.submit(fibonacci_pids, client, 8).result(timeout=120)[0] == 21
        assert all(client.map(lambda _: on_main_thread_and_can_set_a_signal_handler(), range(20)))


@pytest.mark.timeout(180)
def test_a_recursion_survives_the_death_of_a_worker_whose_processor_held_waiting_parents(
    make_cluster: Callable[..., SchedulerClusterCombo], tmp_path: Path
) -> None:
    cluster = make_cluster(2)
    folder = str(tmp_path)
    with Client(cluster.get_address()) as client:
        future = client.submit(counted_recursion, client, folder, "survivor", 10)
        # parents now wait in both workers' processors: leaves computed in two processors
        wait_for(lambda: len(set(leaves(tmp_path, "survivor"))) >= 2, "leaves in both workers' processors")
        victim = worker_agent_pids(cluster)[0]
        os.kill(victim, signal.SIGKILL)
        assert future.result(timeout=150) == 55
