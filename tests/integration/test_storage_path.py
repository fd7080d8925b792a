"""#19: no result lost on the object-storage path, no silent storage death, and no capacity collapse when
workers die young. Each test reproduces the scenario with real processes (SIGKILL, SIGSTOP/SIGCONT)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from scaler import Client
from scaler.client.eager_reads import EagerReads
from scaler.errors import ObjectStorageException, ProcessorDiedError
from scaler.io.address import free_tcp_port_block
from scaler.object_storage import local_segments
from scaler.object_storage.connection import ObjectStorageConnection
from scaler.protocol import messages as m
from tests.integration.conftest import (
    Launcher,
    Service,
    monitor,
    probe_scheduler,
    session_security,
    wait_for,
    wait_for_workers,
)
from tests.integration.manager_harness import start_manager

pytestmark = pytest.mark.integration

BIG = 200 * 1024  #: over the 64 KiB inline limit: results of this size go through object storage


def big_result_after(seconds: float, fill: int, started: str = "") -> bytes:
    """After `seconds`, a result too big to travel inline; says it started by making the file `started`."""
    if started:
        open(started, "w").close()
    time.sleep(seconds)
    return bytes([fill]) * BIG


def storage_children(scheduler: Service) -> list[psutil.Process]:
    return [
        child
        for child in psutil.Process(scheduler.pid).children(recursive=True)
        if "scaler.object_storage.server" in " ".join(child.cmdline())
    ]


def storage_answers(address: str) -> bool:
    try:
        keys = session_security("client")  # the storage is secure by default
        with ObjectStorageConnection(address, "readiness-probe", timeout_seconds=1.0, security=keys) as connection:
            connection.info()
        return True
    except ObjectStorageException:
        return False


@pytest.mark.timeout(120)
def test_a_storage_death_while_a_result_is_stored_fails_the_task_naming_storage_and_the_worker_lives_on(
    launcher: Launcher, tmp_path: Path
) -> None:
    # the processor gives its put up after 5 s without a connection (10 s by default: min(60 s, 10 s))
    addresses, _scheduler, storage = launcher.stack(workers=1, worker_args=("--storage-timeout-seconds", "5"))
    started = tmp_path / "started"
    with Client(address=addresses.scheduler) as client:
        future = client.submit(big_result_after, 2.0, 1, str(started))
        # the task has started (its function came from storage); its result will not fit inline
        wait_for(started.exists, "the task to start")
        storage.popen.send_signal(signal.SIGKILL)
        with pytest.raises(ObjectStorageException, match="object storage at") as raised:
            future.result(timeout=60)
        assert "could not be stored" in str(raised.value)
        assert not isinstance(raised.value, ProcessorDiedError)
    launcher.object_storage(addresses.object_storage)  # storage is back at the same address
    wait_for(lambda: storage_answers(addresses.object_storage), "the object storage server to answer again")
    with Client(address=addresses.scheduler) as client:  # a new client uploads its functions again
        assert client.submit(big_result_after, 0.0, 7).result(timeout=60) == bytes([7]) * BIG


@pytest.mark.timeout(120)
def test_a_result_fetch_that_failed_during_a_storage_stall_succeeds_on_the_next_call(
    launcher: Launcher, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A client on another host fetches its result over the socket, so a stalled server fails the fetch (on the
    storage's host the client maps its own result by name: the next test)."""
    monkeypatch.setattr(local_segments, "sees", lambda directory: False)
    # the user's own read: nothing read as soon as the task is answered (client/eager_reads.py, whose failed reads
    # tests/unit/test_eager_reads.py covers), else the value may be read before the stall
    monkeypatch.setattr(EagerReads, "done", lambda self, answered: None)
    addresses, _scheduler, storage = launcher.stack(workers=1)
    with Client(address=addresses.scheduler, timeout_seconds=2) as client:
        future = client.submit(big_result_after, 0.0, 3)
        wait_for(future.done, "the task's result to reach the client")  # the value itself waits in storage
        storage.popen.send_signal(signal.SIGSTOP)
        try:
            with pytest.raises(ObjectStorageException, match=addresses.object_storage.replace(".", r"\.")):
                future.result()
        finally:
            storage.popen.send_signal(signal.SIGCONT)
        assert future.result(timeout=30) == bytes([3]) * BIG  # not the stale error


@pytest.mark.timeout(120)
def test_on_the_storage_host_a_client_reads_its_result_while_the_server_is_stalled(launcher: Launcher) -> None:
    """The client maps its own result's segment file by name (its header names the client as owner): no request
    to the server, so a stalled server does not hold the fetch. Fails if the client asks `getMapped` first (the
    fetch then times out after the client's 2 s)."""
    addresses, _scheduler, storage = launcher.stack(workers=1)
    with Client(address=addresses.scheduler, timeout_seconds=2) as client:
        future = client.submit(big_result_after, 0.0, 5)
        wait_for(future.done, "the task's result to reach the client")
        client.submit(big_result_after, 0.0, 6).result(timeout=60)  # the client has greeted the storage server
        storage.popen.send_signal(signal.SIGSTOP)
        try:
            assert future.result() == bytes([5]) * BIG
        finally:
            storage.popen.send_signal(signal.SIGCONT)


@pytest.mark.timeout(120)
def test_the_scheduler_restarts_the_object_storage_server_it_started(launcher: Launcher) -> None:
    base = free_tcp_port_block(3)
    scheduler_address, storage_address = f"tcp://127.0.0.1:{base}", f"tcp://127.0.0.1:{base + 1}"
    scheduler = launcher.start("scaler_scheduler", scheduler_address, "-p", "False", "-ll", "INFO")
    probe_scheduler(scheduler_address)  # started, storage included
    (first,) = storage_children(scheduler)
    launcher.cluster(scheduler_address, 1)
    first.kill()
    wait_for(lambda: "died: killed by SIGKILL" in scheduler.log_text(), "the scheduler to notice the death")
    wait_for(lambda: [c for c in storage_children(scheduler) if c.pid != first.pid], "a new object storage server")
    wait_for(lambda: storage_answers(storage_address), "the restarted object storage server to answer")
    with Client(address=scheduler_address) as client:
        assert client.submit(big_result_after, 0.0, 5).result(timeout=60) == bytes([5]) * BIG
    assert scheduler.is_running()


@pytest.mark.timeout(120)
def test_the_scheduler_stops_with_exit_code_1_when_its_storage_cannot_be_restarted(launcher: Launcher) -> None:
    base = free_tcp_port_block(3)
    scheduler_address = f"tcp://127.0.0.1:{base}"
    scheduler = launcher.start("scaler_scheduler", scheduler_address, "-ll", "INFO")
    probe_scheduler(scheduler_address)
    (child,) = storage_children(scheduler)
    squatter = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        child.kill()
        child.wait(10)
        squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        squatter.bind(("127.0.0.1", base + 1))  # the port is taken: every restart fails
        squatter.listen()
        assert scheduler.wait_exit(90) == 1
    finally:
        squatter.close()
    assert "died 6 times in a row" in scheduler.log_text()


def leaves_a_trace(seconds: float) -> int:
    time.sleep(seconds)
    return os.getpid()


@pytest.mark.timeout(180)
def test_workers_killed_every_two_seconds_are_replaced_at_once_and_every_task_completes(launcher: Launcher) -> None:
    addresses, _scheduler, _storage = launcher.stack(
        workers=0, scheduler_args=("--policy-content", "allocate=even_load; scaling=work; cooldown_seconds=60")
    )
    start_manager(launcher, addresses, "chaos", "-mtc", "1")
    live_at_kills: list[int] = []
    stop = threading.Event()
    latest: list[m.StatusSnapshot] = []

    def watch() -> None:
        with monitor(addresses.monitor) as next_snapshot:
            while not stop.is_set():
                try:
                    latest.append(next_snapshot(timeout_seconds=5))
                except AssertionError:
                    continue

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    with Client(address=addresses.scheduler) as client:
        futures = [client.submit(leaves_a_trace, 0.2) for _ in range(100)]
        wait_for_workers(addresses.monitor, 1)
        for _ in range(6):
            time.sleep(2.0)
            snapshot = latest[-1]
            live_at_kills.append(len(snapshot.workers))
            if snapshot.workers:
                victim = max(snapshot.workers, key=lambda worker: worker.pid)
                try:
                    os.kill(victim.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        assert len({future.result(timeout=120) for future in futures}) >= 2  # several workers ran them
    stop.set()
    watcher.join(10)
    without_workers = sum(1 for live in live_at_kills if live == 0)
    assert without_workers <= 2, f"registered workers at each kill time: {live_at_kills}"


def test_unknown_toml_sections_are_refused_before_anything_starts(tmp_path) -> None:
    path = tmp_path / "misspelt.toml"
    path.write_text('[object_storage_server]\nbind_address = "tcp://127.0.0.1:1"\n\n[schedular]\nprotected = false\n')
    for command in (["scaler", str(path)], ["scaler_scheduler", "-c", str(path), "tcp://127.0.0.1:2"]):
        run = subprocess.run([os.path.join(os.path.dirname(sys.executable), command[0]), *command[1:]],
                             capture_output=True, text=True, timeout=60)  # fmt: skip
        assert run.returncode == 2, run.stderr
        assert f"{path}, line 4: unknown section [schedular]; did you mean [scheduler]?" in run.stderr
