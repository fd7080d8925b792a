"""Turns for the host caches' large uploads over real connections (object_storage/upload_admission.py, rule A5, and the
server's watch of its router's connections): a cache that holds a turn and whose connection ends (it died, or closed)
frees it, and the next cache waiting is granted at once, not after the bound; a peer that is not a host cache is told
that it gets no turns (what a cache hears from a server that does not know them, and uploads without asking).

Checked with the mechanism off (`_ServerShell.on_socket_event` doing nothing): the waiting cache's ask is not answered
within its connection's timeout (shorter than the bound) and the test fails."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from scaler.object_storage.client_core import TurnsUnknown
from scaler.object_storage.connection import ObjectStorageConnection
from scaler.object_storage.upload_admission import MAX_WAIT_SECONDS
from tests.integration.conftest import ProcessWatch, session_security
from tests.integration.storage_behind_link import storage_server

pytestmark = pytest.mark.integration

MB = 1_000_000
#: The waiting cache's connection timeout: well under the bound, after which its ask would be granted anyway.
WAIT_SECONDS = MAX_WAIT_SECONDS / 3


@pytest.mark.timeout(120)
def test_a_turn_whose_holder_disconnected_goes_to_the_next_cache(processes: ProcessWatch, tmp_path: Path) -> None:
    address, _server = storage_server(processes, tmp_path / "server.log")
    security = session_security("worker")
    holder = ObjectStorageConnection(address, "cache", security=security, map_local=False)
    waiter = ObjectStorageConnection(address, "cache", security=security, map_local=False, timeout_seconds=WAIT_SECONDS)
    try:
        holder.ask_turn(b"h" * 32, 10 * MB)  # granted at once: nothing else is admitted
        waiter.exists(b"w" * 32)  # greeted
        outcome: list[BaseException | None] = []

        def ask() -> None:
            try:
                waiter.ask_turn(b"w" * 32, 10 * MB)
                outcome.append(None)
            except BaseException as error:
                outcome.append(error)

        asking = threading.Thread(target=ask, daemon=True)
        asking.start()
        asking.join(1.0)
        assert not outcome, f"the second ask was answered while the first turn was held: {outcome}"
        holder.close()  # its connection ends: the server frees its turn
        asking.join(WAIT_SECONDS + 10)
        assert outcome == [None], f"the waiting cache was not granted the freed turn: {outcome}"
    finally:
        holder.close()
        waiter.close()


@pytest.mark.timeout(60)
def test_a_peer_that_is_no_host_cache_gets_no_turns(processes: ProcessWatch, tmp_path: Path) -> None:
    address, _server = storage_server(processes, tmp_path / "server.log")
    with ObjectStorageConnection(address, "worker", security=session_security("worker"), map_local=False) as worker:
        with pytest.raises(TurnsUnknown, match="gives no upload turns"):
            worker.ask_turn(b"o" * 32, 10 * MB)
