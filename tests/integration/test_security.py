"""CURVE on a real cluster: a secured stack serves its authorised clients; no key, a wrong key, a revoked key
and a thousand random keys are refused without disturbing it; bad key files stop a command at start."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import zmq

from scaler import Client, SchedulerClusterCombo
from scaler.monitor.feed import FeedReader
from scaler.protocol import codec
from scaler.protocol import messages as m
from scaler.security.curve import curve_security
from tests.integration.conftest import BIN_DIR, Launcher, free_addresses, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]


def keygen(folder: Path, *names: str) -> None:
    for name in names:
        subprocess.run([str(BIN_DIR / "scaler_keygen"), str(folder), name], check=True, capture_output=True)


def square(x: int) -> int:
    return x * x


def test_a_secure_local_cluster_serves_its_client_and_refuses_others(tmp_path: Path) -> None:
    keygen(tmp_path, "mallory")
    with SchedulerClusterCombo(n_workers=2, secure=True) as cluster:
        with Client(cluster.get_address(), **cluster.client_keys) as client:
            assert client.map(square, range(10)) == [x * x for x in range(10)]
            assert client.submit(len, b"x" * 300_000).result() == 300_000  # through the secured object storage
        with pytest.raises(ConnectionRefusedError, match="authentication failed"):  # the user's keys, not the cluster's
            Client(cluster.get_address())
        with pytest.raises(ConnectionRefusedError, match="refused this client's CURVE key"):
            Client(cluster.get_address(), curve_secret_key=str(tmp_path / "mallory.key_secret"),
                   curve_server_key=cluster.client_keys["curve_server_key"])  # fmt: skip


def test_a_secured_stack_from_the_commands_revokes_keys_and_shrugs_off_random_ones(
    launcher: Launcher, tmp_path: Path
) -> None:
    keys, authorized = tmp_path / "keys", tmp_path / "keys" / "authorized"
    keygen(keys, "server", "workers", "alice", "bob")
    (authorized / "workers").mkdir(parents=True)
    for name, place in (("workers", "workers/"), ("alice", ""), ("bob", "")):
        (authorized / f"{place}{name}.key").write_bytes((keys / f"{name}.key").read_bytes())
    server = ("--curve-secret-key", str(keys / "server.key_secret"), "--curve-authorized-keys", str(authorized))
    addresses = free_addresses()
    launcher.start("scaler_object_storage_server", addresses.object_storage, *server)
    scheduler = launcher.start("scaler_scheduler", addresses.scheduler, "-osa", addresses.object_storage, *server)
    scheduler.wait_for_log("scheduler listening on")
    connecting = ("--curve-server-key", str(keys / "server.key"))
    launcher.start("scaler_cluster", "-n", "2", addresses.scheduler, "--curve-secret-key",
                   str(keys / "workers.key_secret"), *connecting)  # fmt: skip

    def client_of(name: str, **options: Any) -> Client:
        return Client(addresses.scheduler, curve_secret_key=str(keys / f"{name}.key_secret"),
                      curve_server_key=str(keys / "server.key"), **options)  # fmt: skip

    with client_of("alice") as alice:
        assert alice.map(square, range(20)) == [x * x for x in range(20)]
        # a thousand handshakes with random keys: each refused, the scheduler unaffected
        context: zmq.Context[Any] = zmq.Context()
        server_public = (keys / "server.key").read_text().split('public-key = "')[1].split('"')[0].encode()
        for _ in range(1000):
            public, secret = zmq.curve_keypair()
            sock = context.socket(zmq.DEALER)
            sock.curve_secretkey, sock.curve_publickey, sock.curve_serverkey = secret, public, server_public
            sock.linger = 0
            sock.connect(addresses.scheduler)
            sock.close()
        context.term()
        assert alice.map(square, range(20)) == [x * x for x in range(20)]
    assert scheduler.is_running()

    (authorized / "bob.key").unlink()  # revoked: the next connection is refused
    with pytest.raises(ConnectionRefusedError, match="refused this client's CURVE key"):
        client_of("bob")
    log = scheduler.wait_for_log("refused a connection: public key")
    bob = (keys / "bob.key").read_text().split('public-key = "')[1].split('"')[0]
    assert log.count(bob) == 1, "a refused key is logged once"

    reader = FeedReader(addresses.monitor, security=curve_security(str(keys / "alice.key_secret"),
                                                                  str(keys / "server.key")))  # fmt: skip
    try:
        # the cluster's two workers, as the feed shows them once both are registered (under load the second one may
        # register after alice's maps, which one worker can run)
        deadline = time.monotonic() + 30
        workers = -1
        while workers != 2 and time.monotonic() < deadline:
            message = reader.receive(0.5)
            workers = len(message.workers) if isinstance(message, m.StatusSnapshot) else workers
        assert workers == 2, f"the monitor feed, secured, to an authorised key: {workers} workers (-1: no snapshot)"
    finally:
        reader.close()


@pytest.mark.parametrize("command", ["scaler_scheduler", "scaler_object_storage_server"])
def test_a_bad_key_file_stops_a_server_at_start_naming_it(launcher: Launcher, tmp_path: Path, command: str) -> None:
    keygen(tmp_path, "server")
    broken = tmp_path / "broken.key_secret"
    broken.write_text("not a key\n")
    address = free_addresses().scheduler
    cases = [
        (("--curve-secret-key", str(broken), "--curve-authorized-keys", str(tmp_path)), "not a ZeroMQ certificate"),
        (("--curve-secret-key", str(tmp_path / "server.key"), "--curve-authorized-keys", str(tmp_path)),
         "this is a public key file"),
        (("--curve-secret-key", str(tmp_path / "server.key_secret"), "--curve-authorized-keys",
          str(tmp_path / "nowhere")), "no such folder of authorised public keys"),
    ]  # fmt: skip
    for flags, reason in cases:
        service = launcher.start(command, address, *flags)
        assert service.wait_exit() == 2, service.log_text()
        assert reason in service.log_text(), service.log_text()


def test_the_secure_example_file_runs_after_its_keygen_commands(tmp_path: Path) -> None:
    example = (Path(__file__).resolve().parents[2] / "config" / "secure_local.toml").read_text()
    addresses = free_addresses()
    text = example.replace("tcp://127.0.0.1:8516", addresses.scheduler)
    text = text.replace("tcp://127.0.0.1:8517", addresses.object_storage)
    (tmp_path / "secure_local.toml").write_text(text)
    for line in example.splitlines():  # the commands the file lists, run as written
        command = line.removeprefix("#").strip()
        if command.startswith(("scaler_keygen", "mkdir")):
            command = command.replace("scaler_keygen", str(BIN_DIR / "scaler_keygen"))
            subprocess.run(command, shell=True, check=True, cwd=tmp_path, capture_output=True)
    log = tmp_path / "scaler.log"
    with open(log, "wb") as output:  # run from the folder holding keys/, as the file's comment says
        stack = subprocess.Popen([str(BIN_DIR / "scaler"), "secure_local.toml"], cwd=tmp_path, stdout=output,
                                 stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)  # fmt: skip
    try:
        wait_for(lambda: "worker manager" in log.read_text(), "the stack to start", 60)
        with Client(addresses.scheduler, curve_secret_key=str(tmp_path / "keys/alice.key_secret"),
                    curve_server_key=str(tmp_path / "keys/server.key")) as client:  # fmt: skip
            assert client.map(square, range(10)) == [x * x for x in range(10)]
    finally:
        stack.send_signal(signal.SIGTERM)
        assert stack.wait(timeout=60) == 0, log.read_text()


def public_key(path: Path) -> str:
    return path.read_text().split('public-key = "')[1].split('"')[0]


def test_keys_are_bound_to_roles_an_identity_to_its_key_and_revocation_drops_open_connections(
    launcher: Launcher, tmp_path: Path
) -> None:
    keys, authorized = tmp_path / "keys", tmp_path / "keys" / "authorized"
    keygen(keys, "server", "workers", "alice", "bob", "eye")
    for name, place in (("workers", "workers"), ("alice", "."), ("bob", "clients"), ("eye", "monitors")):
        (authorized / place).mkdir(parents=True, exist_ok=True)
        (authorized / place / f"{name}.key").write_bytes((keys / f"{name}.key").read_bytes())
    server = ("--curve-secret-key", str(keys / "server.key_secret"), "--curve-authorized-keys", str(authorized))
    addresses = free_addresses()
    launcher.start("scaler_object_storage_server", addresses.object_storage, *server)
    scheduler = launcher.start("scaler_scheduler", addresses.scheduler, "-osa", addresses.object_storage, *server)
    scheduler.wait_for_log("scheduler listening on")

    def keys_of(name: str) -> tuple[str, ...]:
        return ("--curve-secret-key", str(keys / f"{name}.key_secret"), "--curve-server-key", str(keys / "server.key"))

    launcher.start("scaler_cluster", "-n", "1", addresses.scheduler, *keys_of("workers"))

    # a client's key cannot register a worker (which would receive other clients' tasks)
    impostor = launcher.start("scaler_worker", addresses.scheduler, *keys_of("alice"))
    assert impostor.wait_exit() != 0
    assert "authorised as client, which may not connect as a worker" in impostor.log_text()
    scheduler.wait_for_log("refused a worker hello")
    # a monitor-only key reads the feed and nothing else
    with pytest.raises(ConnectionRefusedError, match="refused this client's CURVE key"):
        Client(addresses.scheduler, curve_secret_key=str(keys / "eye.key_secret"),
               curve_server_key=str(keys / "server.key"))  # fmt: skip
    reader = FeedReader(addresses.monitor, security=curve_security(*keys_of("eye")[1::2]))
    try:
        assert isinstance(reader.receive(10), m.StatusSnapshot), "a monitor key reads the feed"
    finally:
        reader.close()

    alice = Client(addresses.scheduler, curve_secret_key=str(keys / "alice.key_secret"),
                   curve_server_key=str(keys / "server.key"))  # fmt: skip
    try:
        assert alice.map(square, range(5)) == [x * x for x in range(5)]
        # bob, authorised as a client, takes alice's identity on a connection of his own: refused
        context: zmq.Context[Any] = zmq.Context()
        bob = context.socket(zmq.DEALER)
        bob_keys = curve_security(*keys_of("bob")[1::2])
        assert bob_keys is not None
        bob.curve_secretkey, bob.curve_publickey, bob.curve_serverkey = (
            bob_keys.secret,
            bob_keys.public,
            bob_keys.server_public,
        )
        bob.setsockopt(zmq.IDENTITY, alice.identity)
        bob.linger = 0
        bob.connect(addresses.scheduler)
        running = alice.submit(time.sleep, 2)
        # nothing bob sends under alice's identity is read while alice is connected, and nothing of hers reaches him
        bob.send_multipart([codec.encode(m.TaskCancel((running.task_id,))), codec.encode(m.Heartbeat())])
        assert running.result(timeout=30) is None, "bob's cancel of alice's task did not reach the scheduler"
        assert not bob.poll(500), "alice's result went to alice, not to bob"
        bob.close()
        context.term()
        assert alice.map(square, range(5)) == [x * x for x in range(5)], "alice's work goes on"

        # revoking alice's key drops her open connection: her next request is refused, naming why
        (authorized / "alice.key").unlink()
        with pytest.raises(ConnectionRefusedError, match="revoked"):
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                alice.submit(square, 3).result(timeout=10)
                time.sleep(0.2)
        scheduler.wait_for_log("was revoked; dropping it")
    finally:
        alice.disconnect()
