"""What a connecting side (a Client, a monitor reader, `scaler_top`) is told when it meets the wrong port or loses
its scheduler, and how it finds the keys of a stack that restarted with other keys (issue 38, findings 2 and 4),
with real processes and sockets. The cloud hub's boot is in test_cloud_hub.py.
"""

from __future__ import annotations

import contextlib
import os
import pty
import re
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from scaler import Client, SchedulerClusterCombo
from scaler.errors import DisconnectedError
from scaler.monitor.feed import FeedConnectionError, FeedReader
from scaler.protocol import messages as m
from scaler.protocol.feed import STATUS_TOPIC
from scaler.security.curve import CurveSecurity, security_of
from tests.integration.conftest import BIN_DIR, Launcher, free_addresses, session_security, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def test_a_client_at_the_monitor_or_storage_port_is_told_where_the_scheduler_is(
    make_cluster: Callable[..., SchedulerClusterCombo],
) -> None:
    """A cluster with the user's keys writes connection files naming the service at each address. Checked by hand
    without the check (`wrong_port_text` returning None): the monitor port said "the CURVE handshake did not
    complete", the storage port waited out the connect timeout."""
    cluster = make_cluster(0)
    scheduler, storage, monitor = cluster.get_address(), *storage_and_monitor(cluster)
    with pytest.raises(ConnectionError, match=f"is the monitor address .* the scheduler is at {scheduler}"):
        Client(monitor)
    with pytest.raises(ConnectionError, match=f"{storage} is the object storage address .*give Client the sched"):
        Client(storage)
    with FeedReader(scheduler, topics=(STATUS_TOPIC,)) as reader:
        with pytest.raises(FeedConnectionError, match=f"is the scheduler address .* the monitor is at {monitor}"):
            reader.receive(60)


def test_a_cluster_with_keys_of_its_own_is_probed_to_tell_the_port(
    make_cluster: Callable[..., SchedulerClusterCombo],
) -> None:
    """No connection file (keys given): the failed handshake is told apart from wrong keys by a probe socket of the
    other kind, and the storage port by its reply to the hello. Checked by hand without the probe (`answers_as`
    returning False): "the CURVE handshake did not complete (a wrong server key ...)"."""
    cluster = make_cluster(0, secure=True)
    keys = cluster.client_keys
    scheduler, storage, monitor = cluster.get_address(), *storage_and_monitor(cluster)
    with pytest.raises(ConnectionError, match=f"{monitor} is a monitor feed, not a scheduler .*by default"):
        Client(monitor, **keys)
    with pytest.raises(ConnectionError, match=f"{storage} is an object storage server, not a scheduler"):
        Client(storage, **keys)
    with FeedReader(scheduler, topics=(STATUS_TOPIC,), security=security_of(keys)) as reader:
        with pytest.raises(FeedConnectionError, match="is a scheduler or an object storage server, not a monitor"):
            reader.receive(60)
    with Client(scheduler, **keys) as client:  # the right port still works with the same keys
        assert client.address == scheduler


def test_a_monitor_reader_with_wrong_keys_given_to_it_gives_up_soon(
    make_cluster: Callable[..., SchedulerClusterCombo], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Keys given (scaler_top's --curve-secret-key and --curve-server-key): they will not change, so a feed that
    refuses them is not waited on for a stack to publish others (found keys are: REFUSED_KEYS_WAIT_SECONDS, made an
    hour here, so that a reader that waits for them hangs the test into its timeout). Before, scaler_top with a wrong
    key file showed "waiting for the scheduler's status" for 30 s. The error names the feed's verdict on the key (a
    key it does not authorise, docs/security.md): it named a handshake that did not complete, a wrong server key,
    while the refusal was seen once and the wait ran out later (checked: without the refusal's event remembered)."""
    import zmq

    from scaler.monitor import feed

    monkeypatch.setattr(feed, "REFUSED_KEYS_WAIT_SECONDS", 3600.0)
    cluster = make_cluster(0, secure=True)
    right = security_of(cluster.client_keys)
    assert right is not None
    public, secret = zmq.curve_keypair()  # a pair the cluster never authorised
    wrong = CurveSecurity(public, secret, right.server_public)
    monitor = storage_and_monitor(cluster)[1]
    with FeedReader(monitor, topics=(STATUS_TOPIC,), security=wrong) as reader:  # the feed's verdict is named
        with pytest.raises(FeedConnectionError, match=r"the monitor feed at .* refused this reader's CURVE key"):
            while True:
                reader.receive(1)
    with FeedReader(monitor, topics=(STATUS_TOPIC,), security=right) as reader:  # the right keys are read
        assert reader.receive(60) is not None


def test_a_monitor_reader_with_another_users_keys_gives_up_soon(
    make_cluster: Callable[..., SchedulerClusterCombo], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """issue 77, item 9: a reader that finds keys by itself (another user's: their own key folder, no connection file
    of this stack), refused from its first connection, gives up after a refusal in passing, as with keys given: the
    feed that answers is the one it will read. REFUSED_KEYS_WAIT_SECONDS, the wait for a stack to publish other keys
    once the reader has read it, is made an hour here, so that a reader that waits for it hangs the test into its
    timeout (checked: without `_has_read` in `_patience`, it does; scaler_top took 31 s to say so)."""
    from scaler.monitor import feed

    cluster = make_cluster(0)  # the user's keys, secure by default
    monkeypatch.setattr(feed, "REFUSED_KEYS_WAIT_SECONDS", 3600.0)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "another-user"))
    with FeedReader(cluster.monitor_address, topics=(STATUS_TOPIC,)) as reader:
        assert "the user's keys" in reader.keys.source and "another-user" in reader.keys.source, reader.keys.source
        with pytest.raises(FeedConnectionError, match="the CURVE handshake did not complete"):
            while True:
                reader.receive(1)


def test_scaler_top_at_the_scheduler_port_says_so_and_exits(make_cluster: Callable[..., SchedulerClusterCombo]) -> None:
    """`scaler_top` in a terminal (a pseudo-terminal here), pointed at the scheduler's port: one line naming the
    monitor's, and exit code 2. Checked by hand without FeedReader's event monitor: it showed an empty screen until
    killed; with run_top's exit code for it back at 1, the test fails."""
    cluster = make_cluster(0)
    monitor = storage_and_monitor(cluster)[1]
    controller, terminal = pty.openpty()
    try:
        top = subprocess.Popen(
            [str(BIN_DIR / "scaler_top"), cluster.get_address()], stdin=terminal, stdout=terminal,
            stderr=subprocess.PIPE, env={**os.environ, "TERM": "xterm"}, start_new_session=True,
        )  # fmt: skip
        try:
            _, stderr = top.communicate(timeout=60)
        finally:
            if top.poll() is None:
                os.killpg(top.pid, signal.SIGKILL)
                top.wait(10)
    finally:
        os.close(controller)
        os.close(terminal)
    assert top.returncode == 2  # a command that cannot start exits 2 (docs/guide/troubleshooting.md)
    assert f"the monitor is at {monitor}" in stderr.decode(), stderr.decode()


def test_a_client_that_loses_its_scheduler_says_so_at_once_and_then_fails_clearly(
    launcher: Launcher, capfd: pytest.CaptureFixture[str]
) -> None:
    """The scheduler is killed with the client's task unfinished: the client says at once that the connection
    closed and how long it waits for a scheduler to come back, then the future fails naming why. Checked by hand
    without the link's notice (`on_disconnected` returning []): nothing was printed until the grace ended."""
    addresses, scheduler, _storage = launcher.stack(workers=0)
    # a grace just long enough for one "still no scheduler" notice (they come every 10 s)
    with Client(addresses.scheduler, scheduler_lost_grace_seconds=12) as client:
        future = client.submit(abs, -1)  # no worker: it stays unfinished
        capfd.readouterr()
        scheduler.popen.send_signal(signal.SIGKILL)
        printed: list[str] = []
        wait_for(lambda: "closed: waiting up to 12 s" in collect(capfd, printed), "the client to say so", 10)
        assert not future.done(), "the grace is not over: a restarted scheduler would get the task again"
        with pytest.raises(DisconnectedError, match=f"{addresses.scheduler} closed and no scheduler answered"):
            future.result(timeout=60)
    assert re.search(r"still no scheduler at \S+ \(\d+ s; giving up in \d+ s\)", collect(capfd, printed))


def test_a_monitor_reader_finds_the_keys_of_a_stack_restarted_with_other_keys(
    make_cluster: Callable[..., SchedulerClusterCombo],
) -> None:
    """A reader subscribed to an insecure cluster, which then restarts at the same addresses with the user's keys:
    the new feed refuses a reader without keys, the reader finds the keys again and reads on. Checked by hand
    without finding again (`FoundKeys.again` returning self): the reader gave up, "requires CURVE keys"."""
    addresses = free_addresses()
    first = make_cluster(0, address=addresses.scheduler, insecure=True)
    reader = FeedReader(addresses.monitor, topics=(STATUS_TOPIC,))
    try:
        assert next_status(reader) is not None and reader.keys.security is None
        first.shutdown()
        make_cluster(0, address=addresses.scheduler)
        assert next_status(reader) is not None
        assert reader.keys.security is not None and "connection file" in reader.keys.source
    finally:
        reader.close()


def test_a_client_waiting_for_a_scheduler_takes_the_keys_it_publishes(
    make_cluster: Callable[..., SchedulerClusterCombo], capfd: pytest.CaptureFixture[str]
) -> None:
    """A client started before its cluster guesses the user's keys (an address of this machine with no connection
    file); the cluster then starts `insecure`: the client is refused, finds the keys again (none) and connects.
    Checked by hand without finding again: ConnectionRefusedError ("a server without CURVE")."""
    addresses = free_addresses()
    outcome: dict[str, Any] = {}

    def connect() -> None:
        try:
            with Client(addresses.scheduler, connect_timeout_seconds=60) as client:
                outcome["workers"] = client.map(abs, [-1, -2])
        except BaseException as error:  # reported below
            outcome["error"] = error

    thread = threading.Thread(target=connect, daemon=True)
    thread.start()
    printed: list[str] = []
    wait_for(lambda: "still waiting for the scheduler" in collect(capfd, printed), "the client to be waiting", 30)
    make_cluster(1, address=addresses.scheduler, insecure=True)
    thread.join(90)
    assert not thread.is_alive() and outcome == {"workers": [1, 2]}, outcome


def storage_and_monitor(cluster: SchedulerClusterCombo) -> tuple[str, str]:
    port = int(cluster.get_address().rsplit(":", 1)[1])
    return f"tcp://127.0.0.1:{port + 1}", cluster.monitor_address


def next_status(reader: FeedReader, timeout_seconds: float = 60) -> m.StatusSnapshot | None:
    deadline = time.monotonic() + timeout_seconds
    while time.monotonic() < deadline:
        message = reader.receive(1.0)
        if isinstance(message, m.StatusSnapshot):
            return message
    return None


def collect(capfd: pytest.CaptureFixture[str], printed: list[str]) -> str:
    """Everything printed so far (capfd hands each piece out once)."""
    captured = capfd.readouterr()
    printed.append(captured.out + captured.err)
    return "".join(printed)


def test_a_feed_that_drops_each_connection_is_probed_once_per_refusal(monkeypatch: pytest.MonkeyPatch) -> None:
    """A reader with keys at a port that accepts and drops every connection (a stack's forwarder to a hub that ended)
    sees a failed handshake at each of ZeroMQ's reconnections, every 100 ms: whether the port serves another kind of
    server is asked once for the refusal, not at each (a launcher that waited out a lost hub's lease spent a quarter of
    its CPU on those probes). Checked to fail with the probe at every failure: it was made 290 times in 3 s."""
    from scaler.monitor import feed

    probes: list[str] = []
    probe = feed.answers_as

    def counted(address: str, *args: Any, **kwargs: Any) -> bool:
        probes.append(address)
        return probe(address, *args, **kwargs)

    monkeypatch.setattr(feed, "answers_as", counted)
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def drop_each() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                listener.accept()[0].close()

    dropper = threading.Thread(target=drop_each, daemon=True)
    dropper.start()
    address = f"tcp://127.0.0.1:{listener.getsockname()[1]}"
    try:
        with FeedReader(address, topics=(STATUS_TOPIC,), security=session_security("client")) as reader:
            with pytest.raises(FeedConnectionError, match="CURVE handshake did not complete"):
                while True:
                    reader.receive(1)
        assert probes.count(address) == 1, probes
    finally:
        stop.set()
        dropper.join(5)
        listener.close()
