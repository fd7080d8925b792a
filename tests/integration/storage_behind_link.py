"""An object storage server started as a process, and `scaler_link` in front of it (a laptop's link, 10 ms round trip),
for the tests that read and put objects across the link."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from scaler.io.address import free_tcp_address
from tests.integration.conftest import BIN_DIR, ProcessWatch


def storage_server(processes: ProcessWatch, log: Path) -> tuple[str, subprocess.Popen[bytes]]:
    """A server at a free address, its output in `log`; returns the address and the process."""
    address = free_tcp_address()
    with open(log, "wb") as out:
        server = processes.add(subprocess.Popen(
            [sys.executable, "-m", "scaler.entry_points.object_storage_server", address], stdout=out,
            stderr=subprocess.STDOUT,
        ))  # fmt: skip
    return address, server


def link_to(processes: ProcessWatch, listen: int, address: str, *options: str) -> subprocess.Popen[str]:
    """`scaler_link` from 127.0.0.1:`listen` to `address` with a 10 ms round trip (and `options`), once it runs."""
    link = processes.add(subprocess.Popen(
        [str(BIN_DIR / "scaler_link"), f"tcp://127.0.0.1:{listen}={address}", "--ports", "1", "--rtt-ms", "10",
         *options],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    ))  # fmt: skip
    assert link.stdout is not None and "round trip 10 ms" in link.stdout.readline()
    return link
