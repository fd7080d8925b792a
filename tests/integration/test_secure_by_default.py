"""A default deployment is secure (docs/guide/security.md): servers started from the commands without any key
setting use the user's CURVE keys, and a peer without them is refused, each with real processes:

- a rogue worker (a bare DEALER registering as a worker) gets no task;
- a peer taking a real client's identity neither cancels its task nor receives its result;
- a result forged under a real worker's identity is not delivered;
- a process of another user cannot read the keys and is refused.

Each was checked to fail with the mechanism off: the same tests with the stack started with `--insecure` (the
scheduler and its storage) fail at their first assertion, the keyless peer's handshake succeeding (and, past it,
the rogue worker is sent tasks, the thief receives the client's result, the forged 666 is delivered, another
user's client runs its task).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import zmq
from zmq.utils.monitor import recv_monitor_message

from scaler import Client, SchedulerClusterCombo
from scaler.payload.serializer import DefaultSerializer
from scaler.protocol import codec
from scaler.protocol import messages as m
from scaler.protocol.ids import new_worker_id
from tests.integration.conftest import (
    BIN_DIR,
    Addresses,
    Launcher,
    client_hello,
    free_addresses,
    monitor,
    running_stack,
    wait_for_workers,
)

#: its module fixtures are made once: its tests share one test process (make test: --dist loadgroup)
pytestmark = [pytest.mark.integration, pytest.mark.timeout(120), pytest.mark.xdist_group("test_secure_by_default")]


@pytest.fixture(scope="module")
def secure_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Addresses]:
    """One default (secure) stack with one worker for the module's tests that only talk to it: a refused peer
    changes nothing of it."""
    with running_stack(tmp_path_factory.mktemp("secure-stack")) as addresses:
        yield addresses


HANDSHAKE_EVENTS = (
    zmq.EVENT_HANDSHAKE_SUCCEEDED
    | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL
    | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
    | zmq.EVENT_HANDSHAKE_FAILED_AUTH
)


def square(x: int) -> int:
    return x * x


def wait_for_file(path: str, value: int) -> int:
    import time

    while not os.path.exists(path):  # the task runs until the test lets it finish
        time.sleep(0.05)
    return value


@contextlib.contextmanager
def keyless_peer(address: str, identity: bytes) -> Iterator[zmq.Socket[Any]]:
    """A bare DEALER without keys under `identity`, once its first handshake has failed (asserted)."""
    context: zmq.Context[Any] = zmq.Context()
    sock = context.socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.IDENTITY, identity)
    events = sock.get_monitor_socket(HANDSHAKE_EVENTS)
    sock.connect(address)
    try:
        assert events.poll(30_000), f"no handshake with {address} within 30 s"
        event = recv_monitor_message(events)["event"]
        assert event != zmq.EVENT_HANDSHAKE_SUCCEEDED, "a peer without keys completed the handshake"
        yield sock
    finally:
        sock.disable_monitor()
        events.close(linger=0)
        sock.close(linger=0)
        context.term()


def offer(peer: zmq.Socket[Any], *frames: bytes) -> None:
    """Send what a keyless peer would; after its failed handshake libzmq may hold no pipe to queue it on (then a
    blocking send would wait for ever): nothing is sent then, which is the point."""
    try:
        peer.send_multipart(list(frames), flags=zmq.NOBLOCK)
    except zmq.Again:
        pass


def test_a_rogue_worker_without_keys_gets_no_task(secure_stack: Addresses) -> None:
    addresses = secure_stack
    hello = m.Hello(m.PROTOCOL_VERSION, client_hello().python_version, os.getpid(), "rogue", m.WorkerInfo(capacity=8))
    with keyless_peer(addresses.scheduler, new_worker_id("ROGUE")) as rogue:
        offer(rogue, codec.encode(hello))
        with Client(addresses.scheduler) as client:  # finds the user's keys by itself
            assert client.map(square, range(20)) == [x * x for x in range(20)]
        with monitor(addresses.monitor) as next_snapshot:
            workers = next_snapshot(lambda snapshot: len(snapshot.workers) >= 1).workers
            assert [w.hostname for w in workers if w.hostname == "rogue"] == [], "the rogue is not a worker"
            assert len(workers) == 1, workers
        assert not rogue.poll(0), "the rogue worker was sent something"


def test_a_peer_without_keys_cannot_take_a_clients_identity(secure_stack: Addresses, tmp_path: Path) -> None:
    addresses = secure_stack
    flag = tmp_path / "finish"
    with Client(addresses.scheduler) as alice:
        running = alice.submit(wait_for_file, str(flag), 7)
        with keyless_peer(addresses.scheduler, alice.identity) as thief:
            offer(thief, codec.encode(m.TaskCancel((running.task_id,))), codec.encode(m.Heartbeat()))
            flag.touch()
            assert running.result(timeout=30) == 7, "the thief's cancel did not reach the scheduler"
            assert alice.submit(square, 5).result(timeout=30) == 25
            assert not thief.poll(0), "alice's results went to alice, not to the thief"


def test_a_result_forged_without_keys_is_not_delivered(secure_stack: Addresses, tmp_path: Path) -> None:
    addresses = secure_stack
    flag = tmp_path / "finish"
    with Client(addresses.scheduler) as client, monitor(addresses.monitor) as next_snapshot:
        running = client.submit(wait_for_file, str(flag), 5)
        snapshot = next_snapshot(lambda s: any(w.assigned for w in s.workers))  # the feed is read with keys
        worker_id = snapshot.workers[0].worker_id
        forged = m.TaskResult(
            running.task_id, m.ResultStatus.SUCCESS, m.PayloadKind.INLINE, DefaultSerializer.serialize(666),
            worker_id=worker_id,
        )  # fmt: skip
        with keyless_peer(addresses.scheduler, worker_id) as forger:
            offer(forger, codec.encode(forged))
            flag.touch()
            assert running.result(timeout=30) == 5, "the forged result was delivered"
            assert not forger.poll(0)


OTHER_USER = """
import os, sys
from pathlib import Path
keys = Path(os.environ["XDG_CONFIG_HOME"]) / "scaler" / "keys" / "client.key_secret"
try:
    keys.read_bytes()
    print("read the keys")
except PermissionError:
    print("cannot read the keys")
from scaler import Client, SchedulerClusterCombo
try:
    with Client(sys.argv[1], timeout_seconds=20) as client:
        print("ran", client.submit(pow, 2, 5).result(timeout=20))
except ConnectionRefusedError as error:
    print("refused:", error)
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="running a process as another user (nobody) needs root")
def test_a_process_of_another_user_cannot_read_the_keys_and_is_refused(secure_stack: Addresses) -> None:
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("setpriv (util-linux) is not installed")
    addresses = secure_stack
    command = [setpriv, "--reuid=nobody", "--regid=nogroup", "--clear-groups", sys.executable, "-c", OTHER_USER]
    environment = {**os.environ, "HOME": "/nonexistent"}  # the same XDG_CONFIG_HOME: it tries the user's keys
    done = subprocess.run(
        [*command, addresses.scheduler], capture_output=True, text=True, timeout=60, env=environment, cwd="/"
    )
    assert "cannot read the keys" in done.stdout, done.stdout + done.stderr
    assert "refused: the scheduler at" in done.stdout and "requires CURVE keys" in done.stdout, (
        done.stdout + done.stderr
    )
    assert "ran" not in done.stdout


def test_exported_keys_let_another_machine_in(launcher: Launcher, tmp_path: Path) -> None:
    """`scaler_keygen export DIR --role worker|client` writes what another machine needs and prints its flags: a
    worker pool and a client that see none of this user's configuration (another XDG_CONFIG_HOME, as on another
    machine) connect with them. Checked to fail by dropping the printed flags: the worker pool never registers."""
    addresses, _scheduler, _storage = launcher.stack(workers=0)
    exported = tmp_path / "for-elsewhere"
    done = subprocess.run([str(BIN_DIR / "scaler_keygen"), "export", str(exported), "--role", "worker"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    flags = done.stdout.split(addresses.scheduler.split("://")[0] + "://THIS_HOST:PORT ")[1].split("\n")[0].split()
    assert flags[0::2] == ["--curve-secret-key", "--curve-server-key"], done.stdout
    assert oct(os.stat(exported / "workers.key_secret").st_mode & 0o777) == "0o600"
    assert oct(os.stat(exported).st_mode & 0o777) == "0o700"
    elsewhere = {"XDG_CONFIG_HOME": str(tmp_path / "elsewhere")}
    launcher.cluster(addresses.scheduler, 1, *flags, env=elsewhere)
    wait_for_workers(addresses.monitor, 1)
    done = subprocess.run([str(BIN_DIR / "scaler_keygen"), "export", str(exported), "--role", "client"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    keys = {"curve_secret_key": str(exported / "client.key_secret"), "curve_server_key": str(exported / "server.key")}
    assert f"curve_secret_key='{keys['curve_secret_key']}'" in done.stdout
    with Client(addresses.scheduler, **keys) as client:
        assert client.map(square, range(5)) == [x * x for x in range(5)]
    again = subprocess.run([str(BIN_DIR / "scaler_keygen"), "export", str(exported), "--role", "client"],
                           capture_output=True, text=True)  # fmt: skip
    assert again.returncode == 2 and "exists" in again.stderr, "a secret key file is never overwritten"


def test_a_worker_without_keys_is_told_what_is_wrong(
    launcher: Launcher, secure_stack: Addresses, tmp_path: Path
) -> None:
    """A worker that finds other keys (another XDG_CONFIG_HOME, as another user: it makes keys of its own there)
    logs why it cannot connect, from the socket monitor's handshake failure, instead of waiting out its death
    timeout in silence (a side with no keys at all is told "requires CURVE keys": the other user's test).
    Checked to fail with the worker's monitor watching EVENT_DISCONNECTED only (as before): no such line."""
    addresses = secure_stack
    worker = launcher.worker(addresses.scheduler, env={"XDG_CONFIG_HOME": str(tmp_path / "elsewhere")})
    worker.wait_for_log(f"authentication failed with the scheduler at {addresses.scheduler}: the CURVE handshake")
    worker.wait_for_log("run `scaler_keygen export DIR --role worker` as the scheduler's user, then give "
                        "--curve-secret-key DIR/workers.key_secret --curve-server-key DIR/server.key")  # fmt: skip


ANOTHER_USERS_CLIENT = """
import sys
from scaler import Client
try:
    Client(sys.argv[1], timeout_seconds=20)
except ConnectionRefusedError as error:
    print("refused:", error)
"""


def test_a_client_with_another_users_keys_is_told_the_export_that_fixes_it(
    secure_stack: Addresses, tmp_path: Path
) -> None:
    """issue 60: a client of another user (another XDG_CONFIG_HOME: it finds keys of its own) was told that the
    handshake did not complete, not what to do: it names `scaler_keygen export DIR --role client` now, as
    troubleshooting.md answers. Checked to fail before: the message ended at "started with --insecure)"."""
    addresses = secure_stack
    environment = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "another-user")}
    done = subprocess.run([sys.executable, "-c", ANOTHER_USERS_CLIENT, addresses.scheduler], capture_output=True,
                          text=True, timeout=60, env=environment, cwd=tmp_path)  # fmt: skip
    said = done.stdout + done.stderr
    assert f"refused: authentication failed with the scheduler at {addresses.scheduler}" in said, said
    assert (
        "run `scaler_keygen export DIR --role client` as the scheduler's user, then give Client(..., "
        "curve_secret_key='DIR/client.key_secret', curve_server_key='DIR/server.key')"
    ) in said, said


def test_insecure_is_explicit_warns_and_local_sides_follow(launcher: Launcher) -> None:
    """`--insecure` servers log a warning naming the risk and register connection files that say so: a local
    worker pool and client (whose user has keys) connect without keys, as to any plain server. Checked to fail
    without the insecure connection files: the workers and the client then take the user's keys and are refused."""
    addresses = free_addresses()
    storage = launcher.object_storage(addresses.object_storage, "--insecure")
    scheduler = launcher.scheduler(addresses, "--insecure")
    for server in (storage, scheduler):
        server.wait_for_log("anyone who can reach its ports can submit tasks, read every client's task arguments")
    launcher.cluster(addresses.scheduler, 1)
    wait_for_workers(addresses.monitor, 1)
    with Client(addresses.scheduler) as client:
        assert client.map(square, range(5)) == [x * x for x in range(5)]


def test_an_insecure_local_cluster_is_reached_without_keys() -> None:
    """`SchedulerClusterCombo(insecure=True)`: plain TCP, which its workers and a local client use although the
    user has keys. Checked to fail without the combo's insecure connection files written before its workers
    start: the workers take the user's keys, are refused, and the task never runs."""
    with SchedulerClusterCombo(n_workers=1, insecure=True) as cluster:
        assert cluster.client_keys == {}
        with Client(cluster.get_address()) as client:
            assert client.submit(square, 4).result(timeout=60) == 16
