"""`scaler_link`, the slow link in user space (scaler_rehearsal/fake_cloud/link.py): its relay carries real connections
intact, no earlier than the link allows, and the command relays a scheduler's ports and stops on SIGTERM."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from scaler.io.address import free_tcp_port_block
from scaler.security.connection_files import discovered_connection, register_connection, unregister_connection
from scaler_rehearsal.fake_cloud.link import LinkRelay, LinkShape, Route
from tests.integration.conftest import BIN_DIR, DEADLINE_SECONDS, ProcessWatch

pytestmark = pytest.mark.integration


@pytest.mark.timeout(120)
def test_the_relay_carries_both_ways_intact_and_no_earlier_than_the_link_allows() -> None:
    """2 MB each way through a 30 ms, 40 Mbit/s link: every byte arrives, in order; a round trip takes at least the
    link's round trip (the relay never delivers before the model: a lower bound, not a performance threshold)."""

    async def scenario() -> None:
        payload = os.urandom(2_000_000)

        async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            while data := await reader.read(1 << 16):
                writer.write(data)
                await writer.drain()
            writer.close()

        server = await asyncio.start_server(echo, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        relay = LinkRelay([Route("127.0.0.1", 0, "127.0.0.1", port)], LinkShape(0.030, 0.0, 40e6, 0.0), seed=1)
        await relay.start()
        listen_port = relay._servers[0].sockets[0].getsockname()[1]
        reader, writer = await asyncio.open_connection("127.0.0.1", listen_port)
        loop = asyncio.get_running_loop()
        start = loop.time()
        writer.write(b"x")
        assert await reader.readexactly(1) == b"x"
        assert loop.time() - start >= 0.030
        writer.write(payload)
        await writer.drain()
        writer.write_eof()
        received = await asyncio.wait_for(reader.read(-1), 60)
        assert received == payload
        assert relay.connections == 1 and relay.carried[relay.routes[0]] == [len(payload) + 1] * 2
        writer.close()
        await relay.close()
        server.close()
        await server.wait_closed()

    asyncio.run(asyncio.wait_for(scenario(), 120))


@pytest.mark.timeout(120)
def test_the_command_relays_consecutive_ports_with_its_delay_and_says_what_it_carried(
    processes: ProcessWatch, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two echo servers on consecutive ports behind `scaler_link --ports 2 --rtt-ms 50`: each answers through the
    link, a round trip takes at least 50 ms (a lower bound), and SIGTERM ends the command with its byte counts. The
    first target's connection file (how local sides find its keys) is mirrored at the link's address while it runs;
    checked without the mirroring: no file is found there."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    targets = free_tcp_port_block(2)
    register_connection({"scheduler": f"tcp://127.0.0.1:{targets}"}, None, False)
    servers = []
    for port in (targets, targets + 1):
        server = socket.create_server(("127.0.0.1", port))
        servers.append(server)
    listen = free_tcp_port_block(2)
    command = [str(BIN_DIR / "scaler_link"), f"tcp://127.0.0.1:{listen}=tcp://127.0.0.1:{targets}", "--ports", "2",
               "--rtt-ms", "50", "--bandwidth", "20Mbit"]  # fmt: skip
    link = processes.add(subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    assert link.stdout is not None
    assert "round trip 50 ms" in link.stdout.readline()  # printed once every route listens
    mirrored = discovered_connection(f"tcp://127.0.0.1:{listen}")
    assert mirrored is not None and mirrored.get("insecure") and mirrored.get("pid") == link.pid
    assert discovered_connection(f"tcp://127.0.0.1:{listen + 1}") is None, "nothing registered behind it"
    try:
        for offset, server in enumerate(servers):
            with socket.create_connection(("127.0.0.1", listen + offset), timeout=DEADLINE_SECONDS) as client:
                accepted, _ = server.accept()
                with accepted:
                    start = time.monotonic()
                    client.sendall(b"ping")
                    assert accepted.recv(4) == b"ping"
                    accepted.sendall(b"pong")
                    assert client.recv(4) == b"pong"
                    assert time.monotonic() - start >= 0.050
    finally:
        for server in servers:
            server.close()
    link.send_signal(signal.SIGTERM)
    output, _ = link.communicate(timeout=DEADLINE_SECONDS)
    assert link.returncode == 0
    assert f"127.0.0.1:{listen} -> 127.0.0.1:{targets}: 4 bytes there, 4 back" in output, output
    assert discovered_connection(f"tcp://127.0.0.1:{listen}") is None, "the mirrored file goes with the link"
    unregister_connection([f"tcp://127.0.0.1:{targets}"])
