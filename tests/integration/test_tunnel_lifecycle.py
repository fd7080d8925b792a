"""A tunnel's connections over their life (scaler.io.tunnel): a certificate that stops verifying after the start
(a scheduler restarted with one its peers do not trust) ends a worker and a manager with one line and exit 2, and a
client's work with the same line; a forked child holds none of its parent's tunnelled connections, so that their
end is seen at once; a first dial does not wait out a target that never answers. The certificates are the test's
own (tests/tls_certificates.py)."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator

import pytest

from scaler import Client
from scaler.io.address import free_tcp_port_block
from scaler.io.sockets import SocketFactory, bound_endpoint
from scaler.io.tunnel.tls import ServerCertificate
from tests.integration.conftest import COLD_START_SECONDS, DEADLINE_SECONDS, Launcher, kill_tree, monitor, wait_for
from tests.tls_certificates import Authority, make_authority

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("test_tunnel_lifecycle")]

UNTRUSTED = "its authority is not trusted here"


@pytest.fixture(scope="module")
def authority(tmp_path_factory: pytest.TempPathFactory) -> Authority:
    return make_authority(tmp_path_factory.mktemp("authority"))


@pytest.mark.timeout(300)
def test_a_certificate_that_stops_verifying_ends_workers_managers_and_clients_with_one_line(
    launcher: Launcher, authority: Authority
) -> None:
    port = free_tcp_port_block(3)
    address = f"tls://127.0.0.1:{port}"
    patient = ("--death-timeout-seconds", "600", "--scheduler-lost-grace-seconds", "600", "--tls-ca", authority.ca)
    scheduler = launcher.start(
        "scaler_scheduler", address, "--tls-cert", authority.good.cert, "--tls-key", authority.good.key, "-ll", "INFO"
    )
    worker = launcher.worker(address, *patient)
    manager = launcher.start(
        "scaler_worker_manager", "baremetal_native", address, "-wmi", "tunnel-test", "-ll", "INFO", *patient
    )
    with Client(
        address, tls_ca=authority.ca, timeout_seconds=600, connect_timeout_seconds=COLD_START_SECONDS
    ) as client:
        assert client.submit(pow, 2, 5).result(timeout=COLD_START_SECONDS) == 32
        with monitor(f"tls://127.0.0.1:{port + 2}") as next_snapshot:
            next_snapshot(lambda snapshot: bool(snapshot.managers), COLD_START_SECONDS)
        scheduler.popen.terminate()  # it stops its object storage child (and its segments) before it exits
        assert scheduler.wait_exit(COLD_START_SECONDS) == 0, scheduler.log_text()[-4000:]
        untrusted = ("--tls-cert", authority.untrusted.cert, "--tls-key", authority.untrusted.key)
        launcher.start("scaler_scheduler", address, *untrusted, "-ll", "INFO")
        for service in (worker, manager):
            assert service.wait_exit(COLD_START_SECONDS) == 2, service.log_text()[-4000:]
            errors = [line for line in service.log_text().splitlines() if "ERROR" in line]
            assert len(errors) == 1 and UNTRUSTED in errors[0], service.log_text()[-4000:]
            assert "Traceback" not in service.log_text()
        with pytest.raises(ConnectionError) as refused:
            client.submit(pow, 2, 5).result(timeout=COLD_START_SECONDS)
        assert UNTRUSTED in str(refused.value) and "\n" not in str(refused.value)


#: A peer that connects through a tunnel, forks a child that only sleeps, and says whether it then sees its server
#: close the connection (ZeroMQ's disconnect event) while the child lives.
FORKING_PEER = r"""
import os, sys, time
import zmq
from scaler.io.sockets import SocketFactory
from scaler.io.tunnel.tls import trust_ca_file

trust_ca_file(sys.argv[2])
factory = SocketFactory()
sock = factory.dealer(sys.argv[1], events=zmq.EVENT_DISCONNECTED)
events = factory.event_monitor(sock, zmq.EVENT_DISCONNECTED)
sock.send(b"hello")
assert sock.poll(30_000), "no answer through the tunnel"
sock.recv()
child = os.fork()
if child == 0:
    time.sleep(120)
    os._exit(0)
print("forked", flush=True)
print("disconnected" if events.poll(30_000) else "still connected", flush=True)
os.kill(child, 9)
os.waitpid(child, 0)
"""


@pytest.mark.timeout(120)
def test_a_forked_child_holds_none_of_its_parents_tunnelled_connections(authority: Authority) -> None:
    factory = SocketFactory(certificate=ServerCertificate(authority.good.cert, authority.good.key))
    router = factory.router(f"tls://127.0.0.1:{free_tcp_port_block(1)}")
    peer = subprocess.Popen(
        [sys.executable, "-c", FORKING_PEER, bound_endpoint(router), authority.ca],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    try:
        assert router.poll(int(COLD_START_SECONDS * 1000)), peer.stderr.read() if peer.poll() is not None else ""
        identity, hello = router.recv_multipart()
        router.send_multipart([identity, hello])
        assert peer.stdout is not None and peer.stdout.readline().strip() == "forked"
        router.close(linger=0)  # the server ends the connection; the parent must see it while its child lives
        assert peer.stdout.readline().strip() == "disconnected"
        assert peer.wait(DEADLINE_SECONDS) == 0
    finally:
        router.close(linger=0)
        factory.close()
        if peer.poll() is None:
            kill_tree(peer.pid)
            peer.wait()
        for stream in (peer.stdout, peer.stderr):
            if stream is not None:
                stream.close()


@contextlib.contextmanager
def silent_server() -> Iterator[tuple[int, list[socket.socket]]]:
    """A TCP port that accepts connections and never says a word: a TLS handshake there waits for its timeout."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                accepted.append(listener.accept()[0])

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1], accepted
    finally:
        stop.set()
        thread.join(5)
        listener.close()
        for sock in accepted:
            sock.close()


def _is_open(sock: socket.socket) -> bool:
    """Whether the peer has not closed `sock` (what it sent is read and dropped)."""
    sock.setblocking(False)
    while True:
        try:
            if not sock.recv(65536):
                return False
        except BlockingIOError:
            return True


@pytest.mark.timeout(60)
def test_a_first_dial_does_not_wait_out_a_target_that_never_answers() -> None:
    """The socket connects while the first try still waits for the handshake (the relay goes on trying)."""
    with silent_server() as (port, accepted):
        factory = SocketFactory()
        try:
            sock = factory.dealer(f"tls://127.0.0.1:{port}")
            first = wait_for(lambda: accepted[:1], "the first try's connection")[0]
            assert _is_open(first)  # the dial returned before the try gave up on the handshake
            sock.close(linger=0)
        finally:
            factory.close()
