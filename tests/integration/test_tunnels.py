"""Whole stacks over the tunnelled addresses (scaler.io.tunnel): `ws://`, `wss://` and `tls://`, with the stack's
CURVE keys inside (the combo's default), their tasks' small and large (object storage) data, and what a plain HTTP
GET at a WebSocket port answers. The certificates are the test's own (tests/tls_certificates.py)."""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from scaler import Client, SchedulerClusterCombo
from scaler.io.address import free_tcp_port_block
from tests.integration.conftest import DEADLINE_SECONDS
from tests.tls_certificates import Authority, make_authority

pytestmark = [pytest.mark.integration]

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
