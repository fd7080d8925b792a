"""A scheduler that dies: clients fail their futures with DisconnectedError instead of hanging or timing
out, disconnect() stays quiet, and workers exit by themselves with a code that says what happened
(behaviour.md F7, F22, F33)."""

from __future__ import annotations

import signal
import threading
import time

import pytest

from scaler import Client
from scaler.errors import DisconnectedError
from scaler.io.address import free_tcp_address
from tests.integration.conftest import (
    DEADLINE_SECONDS,
    Addresses,
    Launcher,
    Service,
    kill_tree,
    monitor,
    wait_for,
    wait_for_workers,
)

pytestmark = pytest.mark.integration

#: Exit codes of a worker (scaler.worker.agent.core).
EXIT_NEVER_CONNECTED = 2
EXIT_SCHEDULER_LOST = 3


def stack_with_one_worker(launcher: Launcher) -> tuple[Addresses, Service, Service]:
    """(addresses, scheduler, worker pool)."""
    addresses, scheduler, _ = launcher.stack(workers=0)
    pool = launcher.cluster(addresses.scheduler, 1, "-his", "0.5")
    wait_for_workers(addresses.monitor, 1)
    return addresses, scheduler, pool


def wait_for_running(monitor_address: str) -> None:
    """Until the scheduler has handed a task to a worker."""
    with monitor(monitor_address) as next_snapshot:
        next_snapshot(lambda snapshot: snapshot.scheduler.running >= 1)


def kill_pool(pool: Service) -> None:
    """Without a scheduler a pool's workers wait for a leave acknowledgement in vain: save the time."""
    kill_tree(pool.pid)
    pool.wait_exit()


@pytest.mark.timeout(60)
def test_pending_futures_raise_disconnected_error_when_scheduler_is_sigkilled(launcher):
    addresses, scheduler, pool = stack_with_one_worker(launcher)
    # a client timeout far beyond the deadline: only noticing the closed connection can fail the futures in time
    client = Client(address=addresses.scheduler, timeout_seconds=600, scheduler_lost_grace_seconds=0)
    try:
        futures = [client.submit(time.sleep, 60) for _ in range(3)]
        wait_for_running(addresses.monitor)
        scheduler.popen.send_signal(signal.SIGKILL)
        scheduler.wait_exit()
        for future in futures:
            with pytest.raises(DisconnectedError) as raised:
                future.result(timeout=DEADLINE_SECONDS)
            assert addresses.scheduler in str(raised.value)
        with pytest.raises(DisconnectedError):
            client.submit(pow, 2, 2)
    finally:
        client.disconnect()
        kill_pool(pool)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGTERM], ids=["sigkill", "sigterm"])
def test_disconnect_while_scheduler_dies_neither_raises_nor_hangs(launcher, signum):
    addresses, scheduler, pool = stack_with_one_worker(launcher)
    client = Client(address=addresses.scheduler, scheduler_lost_grace_seconds=0)
    futures = [client.submit(time.sleep, 60) for _ in range(3)]
    wait_for_running(addresses.monitor)
    problems: list[BaseException] = []

    def disconnect() -> None:
        try:
            client.disconnect()
        except BaseException as error:  # any exception is the failure this test looks for
            problems.append(error)

    scheduler.popen.send_signal(signum)
    closer = threading.Thread(target=disconnect)
    closer.start()
    closer.join(DEADLINE_SECONDS)
    assert not closer.is_alive(), "disconnect() hung while the scheduler was dying"
    assert problems == []
    scheduler.wait_exit()
    for future in futures:  # each ended one way: cancelled, or failed because the connection is gone
        assert future.done()
        if not future.cancelled():
            assert isinstance(future.exception(timeout=0), DisconnectedError), future.exception(timeout=0)
    client.disconnect()  # a second disconnect is a no-op
    kill_pool(pool)


@pytest.mark.timeout(60)
def test_worker_that_never_reaches_a_scheduler_exits_with_code_2_after_death_timeout(launcher):
    nobody = free_tcp_address()
    worker = launcher.worker(nobody, "--death-timeout-seconds", "2")
    assert worker.wait_exit(DEADLINE_SECONDS) == EXIT_NEVER_CONNECTED
    assert "no scheduler answered at" in worker.log_text()


@pytest.mark.timeout(60)
def test_worker_exits_with_code_3_after_death_timeout_when_its_scheduler_is_sigkilled(launcher):
    addresses, scheduler, _ = launcher.stack(workers=0)
    worker = launcher.worker(addresses.scheduler, "--death-timeout-seconds", "2", "-his", "0.5")
    wait_for_workers(addresses.monitor, 1)
    scheduler.popen.send_signal(signal.SIGKILL)
    scheduler.wait_exit()
    assert worker.wait_exit(DEADLINE_SECONDS) == EXIT_SCHEDULER_LOST
    # either limit may be reached first: the silence (from the last answer), or the grace after the connection closed
    # (the silence starts again when the worker's own loop was paused, as on a loaded machine)
    log = worker.log_text()
    assert "has not answered for" in log or "closed and no scheduler answered there within 2 s" in log, log


@pytest.mark.timeout(60)
def test_pending_futures_raise_disconnected_error_when_frozen_scheduler_stops_answering(launcher):
    addresses, scheduler, pool = stack_with_one_worker(launcher)
    # SIGSTOP keeps the connection open: only the client's own timeout can notice
    client = Client(address=addresses.scheduler, timeout_seconds=3, heartbeat_interval_seconds=0.5)
    try:
        future = client.submit(time.sleep, 60)
        wait_for_running(addresses.monitor)
        scheduler.popen.send_signal(signal.SIGSTOP)
        with pytest.raises(DisconnectedError) as raised:
            future.result(timeout=DEADLINE_SECONDS)
        assert "has not answered" in str(raised.value)
    finally:
        scheduler.popen.send_signal(signal.SIGKILL)
        scheduler.wait_exit()
        client.disconnect()
        kill_pool(pool)


@pytest.mark.timeout(60)
def test_by_default_a_stopped_scheduler_is_waited_for_a_minute_not_the_resume_window(launcher, capfd):
    """issue 60: a client left to its defaults waited 30 minutes (the scheduler's resume window for an away client)
    for a scheduler stopped with SIGINT, as a notebook user who stopped the stack: it says at once that it waits
    60 s. That the futures then fail once the 60 s are over is the client core's, in simulated time
    (tests/unit/test_client_core.py, test_a_closed_connection_waits_out_the_grace_then_fails_every_future; the choice
    between the two graces: tests/unit/test_scheduler_link.py). Checked to fail with the link taking the away grace
    whatever the silence: "waiting up to 1800 s"."""
    addresses, scheduler, pool = stack_with_one_worker(launcher)
    client = Client(address=addresses.scheduler)
    printed: list[str] = []

    def notice() -> str | None:
        printed.append(capfd.readouterr().err)
        said = "".join(printed)
        return said if "closed: waiting up to" in said else None

    try:
        future = client.submit(time.sleep, 600)
        wait_for_running(addresses.monitor)
        scheduler.popen.send_signal(signal.SIGINT)
        scheduler.wait_exit()
        said = wait_for(notice, "the client to say how long it waits for the scheduler")
        assert "closed: waiting up to 60 s for a scheduler to answer there again" in said, said
        assert not future.done(), "the future waits out the grace"
    finally:
        client.disconnect()
        kill_pool(pool)
