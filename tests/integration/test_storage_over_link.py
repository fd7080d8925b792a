"""A large object through `scaler_link` to a CURVE-secured object storage server, as from a laptop: it arrives intact
both ways; it crosses in pieces of WIRE_PIECE_BYTES (so that libzmq's encryption and decryption overlap the transfer,
scaler/protocol/storage_chunks.py); and the server stores the frames it was put in, not the pieces (a reader on the
server's host maps them as put); a read that asks for writable frames gets the received ones (this process's own),
not a copy.

Checked by hand to fail with the mechanism off: with the server sending its frames as they are, the laptop's large
frame is a received frame, not pieces joined; with the reader not joining the pieces (the reply's frame_bytes
ignored), it gets 5 frames, not the 2 of the put; with the service ignoring `Put.frame_bytes`, the frames mapped on
the server's host are the pieces; with every received frame copied on write, the small frame read with
`copy_on_write` is a bytearray; with `frames_or_pieces` joining always, the read with `pieces` gets 2 frames, not the
5 pieces."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from scaler.io.address import free_tcp_port_block
from scaler.object_storage.connection import ObjectStorageConnection
from scaler.protocol.storage_messages import WIRE_PIECE_BYTES
from tests.integration.conftest import ProcessWatch, session_security
from tests.integration.storage_behind_link import link_to, storage_server

pytestmark = pytest.mark.integration

OWNER = b"Client|laptop-test"


@pytest.mark.timeout(120)
def test_a_large_object_crosses_the_link_in_pieces_and_is_stored_as_put(
    processes: ProcessWatch, tmp_path: Path
) -> None:
    log = tmp_path / "server.log"
    address, server = storage_server(processes, log)
    listen = free_tcp_port_block(1)
    link_to(processes, listen, address)
    frames = [b"a small first frame", os.urandom(3 * WIRE_PIECE_BYTES + 17)]
    security = session_security("client")
    far = ObjectStorageConnection(
        f"tcp://127.0.0.1:{listen}", "client", security=security, owner_id=OWNER, map_local=False, timeout_seconds=60
    )  # fmt: skip
    near = ObjectStorageConnection(address, "client", security=security, owner_id=OWNER, timeout_seconds=60)
    try:
        far.put(b"o" * 32, frames, owner_id=OWNER)
        received = far.get_frames(b"o" * 32)
        assert b"".join(bytes(frame) for frame in received) == b"".join(frames)
        assert [bytes(frame) for frame in received] == frames, "the reader sees the frames of the put, not pieces"
        # off the server's host a read comes in parts (each piece shows the transfer moving, client_core rule 5),
        # copied as it comes into this process's own buffers, one per frame of the put: writable, copy on write or not
        assert all(isinstance(frame.obj, bytearray) for frame in received), "filled from the pieces as they came"
        writable = far.get_frames(b"o" * 32, copy_on_write=True)
        assert [bytes(frame) for frame in writable] == frames
        assert not any(frame.readonly for frame in writable)
        # a reader that could join pieces itself (`pieces`) gets the frames of the put too, whatever order they had
        assert [bytes(frame) for frame in far.get_frames(b"o" * 32, pieces=True)] == frames
        far.put(b"p" * 32, frames[::-1], owner_id=OWNER)
        assert [bytes(frame) for frame in far.get_frames(b"p" * 32, pieces=True)] == frames[::-1]
        assert near.local_segments() is not None, "the test runs on the server's host: it maps what is stored"
        mapped = near.get_frames(b"o" * 32)
        assert [bytes(frame) for frame in mapped] == frames, "stored as the frames of the put, not the pieces"
    finally:
        far.close()
        near.close()
    assert server.poll() is None, log.read_text()
