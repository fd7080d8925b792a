"""The browser client (`scaler.browser.Client`: ZMTP in Python, no thread, blocking calls that run its loop) against a
real cluster over `tcp://`, as CPython runs it: submit, map (in chunks), get, send_object, a result over 64 KiB read
from object storage, a task's exception; CURVE with the user's keys against a cluster secured by default, and a refusal
in one sentence without them; a refusal when the scheduler runs another Python (naming both versions), and a clear
error for an address nothing answers at. Once more in a process with the pure-Python codec
(`SCALER_PURE_CAPNP=1`), the codec the browser runs. The same client in headless chromium over ws://:
tests/integration/test_browser_page.py."""

from __future__ import annotations

import operator
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from scaler import SchedulerClusterCombo
from scaler.browser import Client
from scaler.errors import IncompatiblePeerError
from scaler.io.address import free_tcp_port_block
from scaler.security.key_folder import user_keys

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300), pytest.mark.xdist_group("test_browser_client")]


@pytest.fixture(scope="module")
def cluster() -> Iterator[SchedulerClusterCombo]:
    with SchedulerClusterCombo(n_workers=2, insecure=True) as cluster:
        yield cluster


def square(value: int) -> int:
    return value * value


def test_submit_map_get_and_send_object(cluster: SchedulerClusterCombo) -> None:
    with Client(cluster.get_address(), timeout_seconds=60) as client:
        assert client.submit(square, 7).result(60) == 49
        assert client.map(square, range(1000)) == [value * value for value in range(1000)]
        assert client.starmap(operator.add, [(1, 2), (3, 4)]) == [3, 7]
        assert client.get([client.submit(square, 3), client.submit(square, 4)]) == [9, 16]
        reference = client.send_object(list(range(100_000)), name="numbers")
        assert client.submit(sum, reference).result(60) == sum(range(100_000))
        assert len(client.submit(bytes, 200_000).result(60)) == 200_000  # stored, read back from object storage
        with pytest.raises(ZeroDivisionError):
            client.submit(operator.truediv, 1, 0).result(60)
        with pytest.raises(ZeroDivisionError) as failed:
            client.map(operator.truediv, [1, 2, 3], [1, 0, 1])
        assert "map item 1 failed" in "".join(getattr(failed.value, "__notes__", []))


def test_a_secured_cluster_with_the_users_keys_and_refused_without() -> None:
    """The cluster secured as it is by default (the user's keys, CURVE on both servers): the client with the user's
    client pair and the server's public key (files, as `scaler_keygen` writes them) runs tasks and stores objects;
    without keys it is refused in one sentence."""
    keys = user_keys()
    with SchedulerClusterCombo(n_workers=1) as secured:
        with Client(secured.get_address(), curve_secret_key=str(keys.path("client.key_secret")),
                    curve_server_key=Path(keys.path("server.key")).read_text()) as client:  # fmt: skip
            assert client.map(square, range(50)) == [value * value for value in range(50)]
            assert client.submit(len, client.send_object(b"x" * 100_000)).result(60) == 100_000
        with pytest.raises(ConnectionError, match=r"secured with keys \(CURVE\)"):
            Client(secured.get_address(), connect_timeout_seconds=10)


def test_a_cluster_of_another_python_refuses_naming_both_versions(
    cluster: SchedulerClusterCombo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The page's Python is Pyodide's: the hello says it, and the scheduler's refusal names both."""
    monkeypatch.setattr("scaler.browser.session.local_python_version", lambda: "3.99.1")
    with pytest.raises(IncompatiblePeerError, match=r"runs Python 3\.99\.1, this side runs Python 3\.\d+"):
        Client(cluster.get_address(), connect_timeout_seconds=30)


def test_nothing_at_the_address_is_a_connection_error_naming_it() -> None:
    port = free_tcp_port_block(1)
    with pytest.raises(ConnectionError, match=f"tcp://127.0.0.1:{port}"):
        Client(f"tcp://127.0.0.1:{port}", connect_timeout_seconds=5)


def test_the_pure_codec_against_the_real_scheduler(cluster: SchedulerClusterCombo) -> None:
    script = textwrap.dedent(f"""
        from scaler.browser import Client
        from scaler.protocol import schemas

        assert schemas.BACKEND == "pure", schemas.BACKEND
        with Client({cluster.get_address()!r}) as client:
            values = client.map(abs, range(-300, 0))
            reference = client.send_object(b"x" * 100_000)
            print(sum(values), client.submit(len, reference).result(60), len(client.submit(bytes, 70_000).result(60)))
    """)
    environment = {**os.environ, "SCALER_PURE_CAPNP": "1"}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          env=environment, stdin=subprocess.DEVNULL)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(sum(range(1, 301))), "100000", "70000"]
