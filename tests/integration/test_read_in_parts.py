"""A large object read from a CURVE-secured object storage server through `scaler_link` (a laptop's client reading a
task's result) comes in parts (getInParts): its reader gets the first piece while the rest is still crossing the link,
so that the value is built as the bytes come instead of in a pass after the last one (the 100 MB fetched row of
benchmarks/laptop_link.py: 0.12 s of joining after the transfer). The value is the one put, of its type; the result
reader takes this way off the storage's host, and maps the object on it.

A read whose connection drops mid-answer (the link between is killed with the bytes it held, and started again) has its
request sent again (client_core rule 9): the reader starts over on the new answer and gets the object.

Checked by hand to fail with the mechanism off: with the server shell sending a getInParts' answer whole
(`_answer_in_parts` not called), the answer is not in parts; with the result reader
reading with `get_frames` always, the far reader's read count stays at 0; with the reader not starting over on a new
header (`ObjectInParts.readinto`), the dropped read's object has the new answer's bytes after the old ones."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from scaler.io.address import free_tcp_port_block
from scaler.object_storage.connection import ObjectInParts, ObjectStorageConnection
from scaler.payload.result_reader import ResultReader
from scaler.payload.serializer import DefaultSerializer, serialize_to_frames
from scaler.protocol import messages as m
from scaler.protocol.ids import TaskID
from scaler.protocol.storage_messages import WIRE_PIECE_BYTES
from tests.integration.conftest import ProcessWatch, session_security
from tests.integration.storage_behind_link import link_to, storage_server

pytestmark = pytest.mark.integration

OWNER = b"Client|laptop-test"


class Counting(ObjectStorageConnection):
    """Counts its reads in parts."""

    reads_in_parts = 0

    def read_in_parts(self, object_id: bytes, consume: Any) -> Any:
        self.reads_in_parts += 1
        return super().read_in_parts(object_id, consume)


@pytest.mark.timeout(120)
def test_a_large_object_read_over_the_link_comes_in_parts_read_as_they_come(
    processes: ProcessWatch, tmp_path: Path
) -> None:
    log = tmp_path / "server.log"
    address, server = storage_server(processes, log)
    listen = free_tcp_port_block(1)
    link_to(processes, listen, address, "--bandwidth", "100Mbit")
    security = session_security("client")
    far = Counting(
        f"tcp://127.0.0.1:{listen}", "client", security=security, owner_id=OWNER, map_local=False, timeout_seconds=60
    )  # fmt: skip
    near = Counting(address, "client", security=security, owner_id=OWNER, timeout_seconds=60)
    value = os.urandom(6 * WIRE_PIECE_BYTES + 17)
    try:
        far.put(b"o" * 32, serialize_to_frames(DefaultSerializer(), value), owner_id=OWNER)
        seen: list[tuple[int, bool]] = []

        def consume(source: ObjectInParts) -> bytes:
            assert sum(source.frame_bytes) == len(value) + len(serialize_to_frames(DefaultSerializer(), value)[0])
            assert source.in_parts, "a header, then each piece as a message of its own"
            got = bytearray()
            chunk = memoryview(bytearray(WIRE_PIECE_BYTES))
            while count := source.readinto(chunk):
                got += chunk[:count]
                seen.append((count, source.complete))
            return bytes(got)

        got = far.read_in_parts(b"o" * 32, consume)
        assert got.endswith(value)
        assert len(seen) >= 7, "a piece at a time"
        assert seen[-1][1]
        # the result reader reads a task's result this way off the storage's host, and maps it on the host
        result = m.TaskResult(TaskID(b"t" * 16), m.ResultStatus.SUCCESS, m.PayloadKind.OBJECT_ID, b"o" * 32)
        read = ResultReader(DefaultSerializer(), lambda: far, keep_objects=True).read(result)
        assert type(read) is bytes and read == value
        assert far.reads_in_parts == 2
        assert ResultReader(DefaultSerializer(), lambda: near).read(result) == value
        assert near.maps_objects() and near.reads_in_parts == 0
    finally:
        far.close()
        near.close()
    assert server.poll() is None, log.read_text()


def _link(processes: ProcessWatch, listen: int, address: str) -> subprocess.Popen[str]:
    return link_to(processes, listen, address, "--bandwidth", "20Mbit")


@pytest.mark.timeout(120)
def test_a_read_in_parts_whose_connection_drops_starts_over_and_gets_the_object(
    processes: ProcessWatch, tmp_path: Path
) -> None:
    log = tmp_path / "server.log"
    address, server = storage_server(processes, log)
    listen = free_tcp_port_block(1)
    links = [_link(processes, listen, address)]
    security = session_security("client")
    value = os.urandom(8 * WIRE_PIECE_BYTES)
    with ObjectStorageConnection(address, "client", security=security, owner_id=OWNER, map_local=False) as near:
        near.put(b"o" * 32, [value], owner_id=OWNER)  # from the server's side of the link
    far = ObjectStorageConnection(
        f"tcp://127.0.0.1:{listen}", "client", security=security, owner_id=OWNER, map_local=False, timeout_seconds=60
    )  # fmt: skip
    starts: list[bool] = []
    try:

        def consume(source: ObjectInParts) -> bytes:
            starts.append(source.in_parts)
            got = bytearray()
            chunk = memoryview(bytearray(WIRE_PIECE_BYTES))
            while count := source.readinto(chunk):
                got += chunk[:count]
                if len(starts) == 1 and len(got) == WIRE_PIECE_BYTES:  # the first piece read: the link goes
                    links[0].kill()
                    links[0].wait(30)
                    links.append(_link(processes, listen, address))
            return bytes(got)

        assert far.read_in_parts(b"o" * 32, consume) == value
        assert starts == [True, True], "the reader started over on the answer to the request sent again"
    finally:
        far.close()
    assert server.poll() is None, log.read_text()
