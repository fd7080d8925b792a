"""A user thread that waits for a future reads the client's connection itself (`ClientAgent.wait_reading`,
`scaler.io.waiting_reader`): the answer wakes it directly, not the client's I/O thread first. On real clusters: the
answer is handled on the waiting thread, threads that wait and submit at once all get their answers, and a waiter
hears at once of a scheduler that died (the waiter's safety-net sleep is made an hour, so that a missing wake-up
hangs the test into its timeout instead of passing late)."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable

import pytest

from scaler import Client, SchedulerClusterCombo
from scaler.errors import DisconnectedError, ObjectStorageException
from scaler.io import waiting_reader
from tests.integration.conftest import DEADLINE_SECONDS, Launcher, monitor, wait_for_workers

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not hasattr(__import__("select"), "epoll"), reason="a waiting thread reads where epoll is"),
]


@pytest.fixture
def no_safety_net(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(waiting_reader, "LONGEST_SLEEP_SECONDS", 3600.0)


def slow_square(x: int) -> int:
    time.sleep(0.2)
    return x * x


@pytest.mark.timeout(120)
def test_the_thread_that_waits_reads_its_answer(
    make_cluster: Callable[..., SchedulerClusterCombo], no_safety_net: None
) -> None:
    """The future's completion (its done callbacks) happens on the thread that waits in result(), not on the client's
    I/O thread. Without the waiting reader, the callback ran on the I/O thread."""
    cluster = make_cluster(1)
    with Client(cluster.get_address()) as client:
        for wait in (lambda future: future.result(), lambda future: future.exception()):
            future = client.submit(slow_square, 3)
            completed_on: list[int] = []
            future.add_done_callback(lambda _future, seen=completed_on: seen.append(threading.get_ident()))
            wait(future)
            assert completed_on == [threading.get_ident()]
            assert future.result() == 9


@pytest.mark.timeout(180)
def test_threads_that_wait_and_submit_at_once_all_get_their_answers(
    make_cluster: Callable[..., SchedulerClusterCombo], no_safety_net: None
) -> None:
    """One thread reads while the others wait on their futures as before and submit (their sends' checks take the
    socket's readiness edge, so the I/O thread reads some answers and wakes the reader): nothing is lost or late."""
    cluster = make_cluster(2)
    errors: list[BaseException] = []
    with Client(cluster.get_address()) as client:

        def work(offset: int) -> None:
            try:
                for index in range(60):
                    if index % 3 == 0:
                        futures = [client.submit(abs, -(offset + index + k)) for k in range(5)]
                        assert [future.result() for future in futures] == [offset + index + k for k in range(5)]
                    else:
                        assert client.submit(abs, -(offset + index)).result() == offset + index
            except BaseException as error:  # reported below
                errors.append(error)

        threads = [threading.Thread(target=work, args=(1000 * number,)) for number in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(150)
        assert not any(thread.is_alive() for thread in threads), "a thread still waits for an answer"
    assert errors == []


@pytest.mark.timeout(90)
def test_a_reading_waiter_hears_at_once_that_its_scheduler_died(launcher: Launcher, no_safety_net: None) -> None:
    addresses, scheduler, _ = launcher.stack(workers=0)
    pool = launcher.cluster(addresses.scheduler, 1, "-his", "0.5")
    wait_for_workers(addresses.monitor, 1)
    client = Client(address=addresses.scheduler, timeout_seconds=600, scheduler_lost_grace_seconds=0)
    try:
        future = client.submit(time.sleep, 60)
        with monitor(addresses.monitor) as next_snapshot:
            next_snapshot(lambda snapshot: snapshot.scheduler.running >= 1)
        threading.Timer(0.3, lambda: scheduler.popen.send_signal(signal.SIGKILL)).start()
        with pytest.raises(DisconnectedError):
            future.result(timeout=DEADLINE_SECONDS)
    finally:
        client.disconnect()
        pool.popen.send_signal(signal.SIGTERM)  # lets its worker remove what it keeps in /dev/shm
        pool.wait_exit()


@pytest.mark.timeout(120)
def test_a_reading_waiter_hears_at_once_that_its_argument_could_not_be_stored(
    launcher: Launcher, no_safety_net: None
) -> None:
    """The future fails on another thread than the reader's, and nothing comes on the connection for it: the
    argument's put (pipelined, on the put pipeline's thread) meets a dead object storage. Its completion wakes the
    reading waiter (the future's done callback), which otherwise sleeps until its own timeout."""
    addresses, _scheduler, storage = launcher.stack(workers=1)
    with Client(address=addresses.scheduler, timeout_seconds=3) as client:
        assert client.submit(len, b"x").result() == 1  # the function stored before the storage dies
        storage.popen.send_signal(signal.SIGKILL)
        storage.wait_exit()
        future = client.submit(len, b"x" * 300_000)  # stored before it is sent: the put fails
        with pytest.raises(ObjectStorageException):
            future.result(timeout=DEADLINE_SECONDS)
