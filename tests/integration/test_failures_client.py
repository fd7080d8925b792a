"""The client under stress and at its edges: a busy user thread neither loses results nor gets evicted,
scripts that never disconnect still exit, shutdown stops an unprotected cluster and is refused by a
protected one, and bad addresses are refused with a readable message (behaviour.md F3, F20, F23, F24)."""

from __future__ import annotations

import time

import psutil
import pytest

from scaler import Client
from scaler.errors import ClientShutdownException
from tests.integration.conftest import (
    DEADLINE_SECONDS,
    monitor,
    pid_is_alive,
    run_script,
    scheduler_pid,
    session_security,
    wait_all_gone,
    wait_for_workers,
    worker_agent_pids,
)

pytestmark = pytest.mark.integration


def answer_after(seconds: float, value: int) -> int:
    import time

    time.sleep(seconds)
    return value


def spin(seconds: float) -> int:
    """A pure-Python loop on the calling thread: it holds the GIL except at the interpreter's switch points."""
    deadline = time.monotonic() + seconds
    turns = 0
    while time.monotonic() < deadline:
        turns += 1
    return turns


@pytest.mark.timeout(60)
def test_result_arrives_and_client_is_not_evicted_while_user_thread_is_busy(make_cluster):
    cluster = make_cluster(1, client_timeout_seconds=2)
    wait_for_workers(cluster.monitor_address, 1)
    with Client(address=cluster.get_address()) as client:
        future = client.submit(answer_after, 0.5, 42)
        spin(3.0)  # longer than the scheduler's client timeout
        deadline = time.monotonic() + DEADLINE_SECONDS
        while not future.done() and time.monotonic() < deadline:  # still busy until it arrives (a loaded machine's
            spin(0.5)  # worker may take longer than the first 3 s to run it)
        assert future.done(), "the result did not arrive while the user thread was busy"
        assert future.result(timeout=0) == 42
        assert client.submit(pow, 2, 3).result(timeout=DEADLINE_SECONDS) == 8
        with monitor(cluster.monitor_address) as next_snapshot:
            snapshot = next_snapshot()
        assert client.identity in [summary.client_id for summary in snapshot.clients]
        assert snapshot.scheduler.canceled == 0


CLIENT_IN_A_FUNCTION = """
import sys
from scaler import Client

def main():
    client = Client(address=sys.argv[1])
    print(client.submit(pow, 2, 5).result(timeout=30))

main()
"""

CLIENT_IN_A_GLOBAL = """
import sys, time
from scaler import Client

client = Client(address=sys.argv[1])
print(client.submit(pow, 2, 5).result(timeout=30))
pending = client.submit(time.sleep, 60)
"""


@pytest.mark.timeout(90)
@pytest.mark.parametrize("script", [CLIENT_IN_A_FUNCTION, CLIENT_IN_A_GLOBAL], ids=["local", "global"])
def test_script_that_never_disconnects_its_client_exits_promptly_with_code_0(shared_cluster, script):
    finished = run_script(script, shared_cluster.get_address(), timeout_seconds=DEADLINE_SECONDS)
    assert finished.returncode == 0, finished.stderr
    assert finished.stdout.split() == ["32"]
    assert "Traceback" not in finished.stderr
    assert "Exception ignored" not in finished.stderr


@pytest.mark.timeout(60)
def test_client_shutdown_of_unprotected_cluster_stops_scheduler_and_workers(make_cluster):
    cluster = make_cluster(2, protected=False)
    wait_for_workers(cluster.monitor_address, 2)
    scheduler_and_workers = [psutil.Process(pid) for pid in (scheduler_pid(cluster), *worker_agent_pids(cluster))]
    client = Client(address=cluster.get_address())
    assert client.submit(pow, 2, 2).result(timeout=DEADLINE_SECONDS) == 4
    client.shutdown()
    wait_all_gone(scheduler_and_workers, "the scheduler and the workers to exit")
    client.disconnect()  # after shutdown: a no-op


@pytest.mark.timeout(60)
def test_client_shutdown_of_protected_cluster_raises_client_shutdown_exception(shared_cluster):
    with Client(address=shared_cluster.get_address()) as client:
        with pytest.raises(ClientShutdownException) as raised:
            client.shutdown()
        assert "protected" in str(raised.value)
        assert client.submit(pow, 3, 2).result(timeout=DEADLINE_SECONDS) == 9
    assert pid_is_alive(scheduler_pid(shared_cluster))


@pytest.mark.timeout(30)
def test_malformed_address_raises_value_error_listing_accepted_forms():
    with pytest.raises(ValueError) as raised:
        Client(address="127.0.0.1:8516")
    message = str(raised.value)
    assert "127.0.0.1:8516" in message
    for form in ("tcp://", "ipc://", "inproc://"):
        assert form in message


@pytest.mark.timeout(30)
def test_client_without_address_outside_a_task_raises_value_error_asking_for_one():
    with pytest.raises(ValueError) as raised:
        Client()
    assert "address" in str(raised.value)


@pytest.mark.timeout(90)
def test_a_departed_clients_objects_stay_for_the_retention_time_then_go(launcher) -> None:
    from scaler.object_storage.connection import ObjectStorageConnection

    addresses, _, _ = launcher.stack(workers=0, scheduler_args=("-ot", "10"))
    with Client(address=addresses.scheduler) as client:
        reference = client.send_object(list(range(1000)), name="kept")
    server_keys = session_security("server")  # the scheduler's role sees every owner
    with ObjectStorageConnection(addresses.object_storage, "scheduler", security=server_keys) as storage:
        assert storage.exists(reference.object_id), "deleted at once despite -ot 10"
        deadline = time.monotonic() + 40
        while storage.exists(reference.object_id):
            assert time.monotonic() < deadline, "the object outlived its retention time"
            time.sleep(0.2)
