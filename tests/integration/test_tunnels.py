"""Whole stacks over the tunnelled addresses (scaler.io.tunnel): `ws://`, `wss://` and `tls://`, with the stack's
CURVE keys inside (the combo's default), their tasks' small and large (object storage) data, and what a plain HTTP
GET at a WebSocket port answers; the same through an HTTP proxy the environment names (tests/http_connect_proxy.py);
and the refusals, one line each: a server's certificate files, a certificate that does not verify, a proxy that
refuses. The certificates are the test's own (tests/tls_certificates.py)."""

from __future__ import annotations

import contextlib
import socket
import ssl
import subprocess
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from scaler import Client, SchedulerClusterCombo
from scaler.io.address import free_tcp_port_block
from scaler.io.sockets import SocketFactory
from scaler.io.tunnel import TunnelError
from scaler.io.tunnel import relay as relay_module
from scaler.io.tunnel.tls import trust_ca_file
from tests.http_connect_proxy import ConnectProxy
from tests.integration.conftest import (
    BIN_DIR,
    COLD_START_SECONDS,
    DEADLINE_SECONDS,
    Launcher,
    kill_tree,
    monitor,
    wait_for_workers,
)
from tests.tls_certificates import Authority, make_authority

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("test_tunnels")]

#: Above the 64 KiB inline limit: arguments and results of this size travel through object storage.
LARGE_BYTES = 200_000


def reversed_bytes(data: bytes) -> bytes:
    return data[::-1]


@pytest.fixture(scope="module")
def authority(tmp_path_factory: pytest.TempPathFactory) -> Authority:
    return make_authority(tmp_path_factory.mktemp("authority"))


@pytest.fixture(scope="module", params=["ws", "wss", "tls"])
def stack(request: pytest.FixtureRequest, authority: Authority) -> Iterator[SchedulerClusterCombo]:
    scheme = str(request.param)
    certificate = {}
    if scheme != "ws":
        certificate = {"tls_cert": authority.good.cert, "tls_key": authority.good.key, "tls_ca": authority.ca}
    address = f"{scheme}://127.0.0.1:{free_tcp_port_block(3)}"
    with SchedulerClusterCombo(n_workers=2, address=address, **certificate) as cluster:  # type: ignore[arg-type]
        yield cluster


@pytest.mark.timeout(180)
def test_a_stack_over_a_tunnel_runs_tasks_with_small_and_large_data(stack: SchedulerClusterCombo) -> None:
    with Client(address=stack.get_address()) as client:
        assert client.map(pow, range(20), [2] * 20) == [x * x for x in range(20)]
        large = bytes(range(256)) * (LARGE_BYTES // 256)
        assert client.submit(reversed_bytes, large).result(timeout=DEADLINE_SECONDS) == large[::-1]
        assert stack.object_storage_address.startswith(stack.get_address().split("://")[0] + "://")


@pytest.mark.timeout(60)
def test_a_plain_get_at_a_websocket_port_says_what_it_is(stack: SchedulerClusterCombo) -> None:
    address = stack.get_address()
    if not address.startswith("ws://"):
        pytest.skip("the page is the same over wss://; the plain ws:// stack shows it")
    http = address.replace("ws://", "http://", 1)
    with urllib.request.urlopen(http, timeout=DEADLINE_SECONDS) as page:
        text = page.read().decode()
    assert "scaler" in text and "WebSocket" in text and "zmtp.scaler" in text
    with pytest.raises(urllib.error.HTTPError) as missing:
        urllib.request.urlopen(http + "elsewhere", timeout=DEADLINE_SECONDS)
    missing.value.close()
    assert missing.value.code == 404


@pytest.fixture
def proxy(stack: SchedulerClusterCombo, monkeypatch: pytest.MonkeyPatch) -> Iterator[ConnectProxy]:
    """An HTTP proxy named by the environment, as a corporate network's: `https_proxy` for tls:// and wss://
    addresses, `http_proxy` for ws:// ones."""
    variable = "http_proxy" if stack.get_address().startswith("ws://") else "https_proxy"
    for name in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "no_proxy", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
    with ConnectProxy() as running:
        monkeypatch.setenv(variable, running.url)
        yield running


@pytest.mark.timeout(120)
def test_a_client_reaches_the_stack_through_the_proxy_the_environment_names(
    stack: SchedulerClusterCombo, proxy: ConnectProxy
) -> None:
    port = stack.get_address().split("://")[1].split("/")[0].rpartition(":")[2]
    storage_port = stack.object_storage_address.split("://")[1].split("/")[0].rpartition(":")[2]
    with Client(address=stack.get_address()) as client:
        large = bytes(range(256)) * (LARGE_BYTES // 256)
        assert client.submit(reversed_bytes, large).result(timeout=DEADLINE_SECONDS) == large[::-1]
    assert proxy.tunnels[f"127.0.0.1:{port}"] >= 1  # the scheduler's connection went through the proxy
    assert proxy.tunnels[f"127.0.0.1:{storage_port}"] >= 1  # and the object storage's


@pytest.mark.timeout(120)
def test_no_proxy_names_hosts_reached_directly(
    stack: SchedulerClusterCombo, proxy: ConnectProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("no_proxy", "localhost,127.0.0.0/8")
    with Client(address=stack.get_address()) as client:
        assert client.submit(pow, 3, 2).result(timeout=DEADLINE_SECONDS) == 9
    assert not proxy.tunnels


@pytest.mark.timeout(120)
def test_a_proxy_that_refuses_connect_is_one_line_naming_it(stack: SchedulerClusterCombo, proxy: ConnectProxy) -> None:
    proxy.refuse_with = "403 Forbidden"
    with pytest.raises(ConnectionError) as refused:
        Client(address=stack.get_address(), connect_timeout_seconds=DEADLINE_SECONDS)
    text = str(refused.value)
    assert f"the proxy {proxy.url}" in text and "refused to CONNECT" in text and "403 Forbidden" in text
    assert "\n" not in text


# ---------------------------------------------------------------- refusals: one line each


def _scheduler(*args: str) -> subprocess.Popen[str]:
    address = f"{args[0]}://127.0.0.1:{free_tcp_port_block(3)}"
    command = [str(BIN_DIR / "scaler_scheduler"), address, "--insecure", *args[1:]]
    return subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, stdin=subprocess.DEVNULL
    )


@pytest.mark.timeout(180)
def test_a_scheduler_without_a_usable_certificate_exits_2_naming_it(authority: Authority, tmp_path: Path) -> None:
    missing = str(tmp_path / "nowhere.pem")
    cases = [
        (("wss",), "is a TLS address: give the server's certificate and key"),
        (("tls", "--tls-cert", missing, "--tls-key", authority.good.key), f"tls_cert {missing}: no such file"),
        (("tls", "--tls-cert", authority.expired.cert, "--tls-key", authority.expired.key), "has expired"),
        (("tls", "-tc", authority.good.cert, "-tk", authority.wrong_host.key), "must be the certificate's"),
        (("tls", "--tls-cert", authority.good.cert), "tls_cert is given without tls_key"),
    ]
    started = [(_scheduler(*args), said) for args, said in cases]  # at once: five cold starts cost one's wait
    try:
        for process, said in started:
            output = process.communicate(timeout=COLD_START_SECONDS)[0]
            assert process.returncode == 2, output
            errors = [line for line in output.splitlines() if "ERROR" in line]
            assert len(errors) == 1 and said in errors[0], output
            assert "Traceback" not in output
    finally:
        for process, _ in started:
            if process.poll() is None:
                kill_tree(process.pid)
                process.wait()
            if process.stdout is not None:
                process.stdout.close()


@pytest.mark.timeout(60)
def test_a_certificate_that_does_not_verify_is_one_line_at_connect(
    authority: Authority, monkeypatch: pytest.MonkeyPatch
) -> None:
    trust_ca_file(authority.ca)  # the process trusts the test authority: only the certificates' faults remain
    # The dial raises what its first try met within its wait (a second): waiting out the whole try instead, a loaded
    # machine's slow handshake cannot let the dial return first.
    monkeypatch.setattr(relay_module, "FIRST_TRY_WAIT_SECONDS", DEADLINE_SECONDS)
    port = free_tcp_port_block(1)
    cases = [
        (authority.untrusted, "its authority is not trusted here"),
        (authority.wrong_host, "the certificate is not for this host name"),
        (authority.expired, "the certificate has expired"),
    ]
    for files, said in cases:
        with _plain_tls_server(port, files.cert, files.key):
            factory = SocketFactory()
            try:
                with pytest.raises(TunnelError) as refused:
                    factory.dealer(f"tls://127.0.0.1:{port}")
            finally:
                factory.close()
            assert said in str(refused.value) and "\n" not in str(refused.value)


@contextlib.contextmanager
def _plain_tls_server(port: int, cert: str, key: str) -> Iterator[None]:
    """A TLS server of the standard library's that presents any certificate, an expired one too (scaler's servers
    refuse to start with one)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    listener = socket.create_server(("127.0.0.1", port))
    listener.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                accepted, _ = listener.accept()
            except TimeoutError:
                continue
            try:
                with context.wrap_socket(accepted, server_side=True):
                    pass
            except (ssl.SSLError, OSError):
                accepted.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(5)
        listener.close()


@pytest.mark.timeout(120)
def test_a_scheduler_serves_a_websocket_front_beside_its_native_address(launcher: Launcher) -> None:
    """`--tunnel-address`: workers on the native address, a client through the front, which is told its object
    storage there (/storage of the same port, at the host and port the client used), and a monitor at /monitor."""
    base = free_tcp_port_block(4)  # the native three, and the front's port after them: never one of theirs
    native, front_port = f"tcp://127.0.0.1:{base}", base + 3
    front = f"ws://127.0.0.1:{front_port}"
    launcher.start("scaler_scheduler", native, "--tunnel-address", front, "-ll", "INFO")
    launcher.cluster(native, 1)
    # The scheduler serves its front before it answers; a cold start under load outlasts a client's connect timeout.
    wait_for_workers(f"tcp://127.0.0.1:{base + 2}", 1, COLD_START_SECONDS)
    with Client(address=f"ws://localhost:{front_port}/", timeout_seconds=DEADLINE_SECONDS) as client:
        assert f"ws://localhost:{front_port}/storage" in client._repr_html_()
        large = bytes(range(256)) * (LARGE_BYTES // 256)
        assert client.submit(reversed_bytes, large).result(timeout=DEADLINE_SECONDS) == large[::-1]
    with monitor(f"{front}/monitor") as next_snapshot:
        assert len(next_snapshot(lambda snapshot: len(snapshot.workers) == 1).workers) == 1
