"""Issue 75 item 4: a laptop that may only open HTTPS through its network's proxy reaches its cloud stack's hub over
`wss://` (`[scaler] hub_address`): the hub serves its scheduler, object storage and monitor at the paths of one TLS
port, and the launcher's forwarder reaches them through the HTTP proxy `https_proxy` names, checking the hub's
certificate (the test's authority, `[scheduler] tls_ca`). Rehearsed on the fake cloud with the tests' own CONNECT proxy
in between; the clients and `scaler_top` keep connecting to the file's local addresses. Port 443 stands for any port
here (a free one)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from scaler import Client
from scaler.io.address import free_tcp_port_block
from tests.http_connect_proxy import ConnectProxy
from tests.integration.conftest import monitor
from tests.integration.test_cloud_hub import HubStack, one_unit
from tests.tls_certificates import make_authority

pytestmark = [pytest.mark.integration, pytest.mark.cloud, pytest.mark.timeout(300)]


@pytest.fixture
def proxy() -> Iterator[ConnectProxy]:
    with ConnectProxy() as running:
        yield running


@pytest.fixture
def hub_over_wss(fake_cloud: Any, tmp_path: Path, proxy: ConnectProxy) -> Iterator[tuple[HubStack, int]]:
    authority = make_authority(tmp_path / "authority")
    port = free_tcp_port_block(1)
    certificate = f'tls_cert = "{authority.good.cert}"\ntls_key = "{authority.good.key}"\ntls_ca = "{authority.ca}"\n'

    def over_wss(text: str) -> str:
        """One unit of two workers (what crosses the proxy is the same with four), the hub over wss."""
        text = one_unit(text).replace('hub = "cloud"', f'hub = "cloud"\nhub_address = "wss://0.0.0.0:{port}"')
        return text.replace("[scheduler]\n", f"[scheduler]\n{certificate}")

    proxies = {"https_proxy": proxy.url, "HTTPS_PROXY": proxy.url, "no_proxy": "", "NO_PROXY": ""}
    stack = HubStack(tmp_path, edit=over_wss, **proxies)
    try:
        yield stack, port
    finally:
        stack.kill()  # the hub and its units go with the fake cloud's reset


def test_a_laptop_reaches_its_hub_over_wss_through_the_proxy(
    hub_over_wss: tuple[HubStack, int], proxy: ConnectProxy
) -> None:
    stack, port = hub_over_wss
    with Client(stack.scheduler, timeout_seconds=120) as client:
        assert client.map(pow, range(8), [2] * 8) == [x * x for x in range(8)]
        large = bytes(200_000)
        assert client.submit(len, large).result(timeout=120) == 200_000  # through the hub's object storage
    with monitor(stack.monitor) as next_snapshot:
        next_snapshot()
    tunnels = dict(proxy.tunnels)
    assert any(target.endswith(f":{port}") for target in tunnels), tunnels  # every connection crossed the proxy
    assert set(tunnels) == {target for target in tunnels if target.endswith(f":{port}")}, tunnels
