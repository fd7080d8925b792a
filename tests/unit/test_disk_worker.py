"""The disk worker's close, on real threads and a real (temporary) directory: the write under way finishes, the
writes queued are dropped, the removals queued are done, so that a deleted object is not found again by the next
server. Fails with the executor shut down with `cancel_futures=True` (the removal queued behind the write is
cancelled and its file stays)."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any

import pytest

from scaler.object_storage.disk_worker import DiskWorker
from scaler.object_storage.spill_files import object_path, write_object_file
from scaler.object_storage.store import RemoveFile, WriteFile

OWNER = b"Client|alice"


@pytest.mark.timeout(60)
def test_close_finishes_the_write_under_way_does_the_removals_queued_and_drops_the_writes_queued(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = str(tmp_path)
    write_object_file(directory, b"deleted", 1, OWNER, "", [memoryview(b"old")])
    workers: list[DiskWorker] = []

    def write_under_way_when_close_begins(*args: Any) -> None:
        deadline = time.monotonic() + 30
        while not workers[0]._closing:  # on the write thread: hold the write until close has begun
            assert time.monotonic() < deadline, "close never began"
            time.sleep(0.01)
        write_object_file(*args)

    monkeypatch.setattr("scaler.object_storage.disk_worker.write_object_file", write_under_way_when_close_begins)
    reported: list[object] = []

    async def scenario() -> None:
        workers.append(DiskWorker(directory, lambda *done: reported.append(done), lambda *done: reported.append(done)))
        workers[0].run(
            [
                WriteFile(b"under-way", 2, OWNER, "", (b"payload",)),
                RemoveFile(b"deleted", 1),
                WriteFile(b"queued", 3, OWNER, "", (b"payload",)),
            ]
        )
        workers[0].close()

    asyncio.run(scenario())
    assert os.path.exists(object_path(directory, b"under-way", 2))
    assert not os.path.exists(object_path(directory, b"deleted", 1))
    assert not os.path.exists(object_path(directory, b"queued", 3))
    assert reported == []  # nothing is reported once closing: the server no longer answers
