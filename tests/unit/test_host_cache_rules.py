"""A host cache's rules (object_storage/host_cache/cache_rules.py) on the real `StorageService`, played as the
server's shell plays it (renames carried out at once in a temporary segment directory), the cache's fetcher played as
host_cache/upstream.py plays it: a miss is fetched once however many readers wait, readers in parts follow the fetch
as it is written, a fetch that fails tells its readers why and a later read fetches again, a processor's put is
answered only once the upstream answered its upload, `exists` is the upstream's, and writes readers follow and
other roles are refused (a client may only read what the cache holds).

Checked with the mechanism off (`StorageService(cache=False)`, a storage server): every test but the refusals fails,
a read of an object not held being answered `notFound` at once and a put at once.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from scaler.object_storage.disk_worker import DiskWorker
from scaler.object_storage.host_cache.cache_rules import FETCHER, Check, Fetch, UploadWork
from scaler.object_storage.segment_files import SegmentWriter
from scaler.object_storage.service import Reply, StorageService
from scaler.object_storage.store import IMMEDIATE_WORK, AdoptSegment, ObjectStore
from scaler.protocol.codec import encode_storage_request
from scaler.protocol.ids import ObjectID
from scaler.protocol.messages import PROTOCOL_VERSION
from scaler.protocol.storage_messages import (
    WIRE_PIECE_BYTES,
    Adopt,
    Exists,
    GetInParts,
    GetMapped,
    MappedSize,
    Put,
    SegmentDirectory,
    StorageHello,
    StorageOperation,
    StorageRequest,
    StorageStatus,
    WriteBegin,
    WriteProgress,
)

READER, OTHER = b"processor-1", b"processor-2"
OBJECT = ObjectID(b"o" * 32)
PAYLOAD = os.urandom(2 * WIRE_PIECE_BYTES + 100)  #: three pieces
FILE = "fetched.1-1.put"

Answer = tuple[StorageStatus, int, str, object, bytes | None]


def _unused(*_: object) -> None:
    raise AssertionError("the test carries out the disk worker's steps itself")


class Shell:
    """The cache's server shell, played synchronously; every reply kept, by peer."""

    def __init__(self, segments: Path) -> None:
        self.segments = str(segments)
        self.worker = DiskWorker(None, _unused, _unused, self.segments, _unused)
        store = ObjectStore(1 << 30)
        store.segments = True
        directory = SegmentDirectory(self.segments, "boot", 1, 1, True)
        self.service = StorageService(store, segment_directory=directory, cache=True)
        self.replies: dict[bytes, list[Answer]] = {}
        self.request_id = 0
        for peer in (READER, OTHER):
            self.call(peer, StorageHello(PROTOCOL_VERSION, "3.11.0", "processor"))
        self.replies.clear()

    def call(self, peer: bytes, operation: StorageOperation, frames: list[bytes] | None = None) -> int:
        self.request_id += 1
        if peer == FETCHER:
            answer = self.service.act(peer, self.request_id, operation, frames or [])
        else:
            request = encode_storage_request(StorageRequest(self.request_id, operation))
            answer = self.service.handle(peer, request, frames or [])
        self.send(([] if answer is None else [Reply(peer, answer)]) + self._work())
        return self.request_id

    def _work(self) -> list[Reply]:
        replies: list[Reply] = []
        while work := self.service.take_work():
            for item in work:
                assert isinstance(item, IMMEDIATE_WORK), item
                outcome = self.worker.carry_out_at_once(item)
                if isinstance(item, AdoptSegment):
                    replies += self.service.adopted(item, outcome)
        return replies

    def send(self, replies: list[Reply]) -> None:
        for reply in replies + self.service.take_outgoing():
            answer, piece = reply.answer, reply.answer.file_piece
            data = None
            if piece is not None:
                with open(os.path.join(self.segments, piece.file_name), "rb") as file:
                    file.seek(piece.offset)
                    data = file.read(piece.length)
            entry = (answer.reply.status, answer.reply.request_id, answer.reply.reason, answer.reply.value, data)
            self.replies.setdefault(reply.peer, []).append(entry)

    def take(self, peer: bytes) -> list[Answer]:
        return self.replies.pop(peer, [])

    def upstream_work(self) -> list[object]:
        cache = self.service.cache
        assert cache is not None
        return list(cache.take_work())


@pytest.fixture
def shell(tmp_path: Path) -> Shell:
    return Shell(tmp_path)


def _fetch(shell: Shell) -> SegmentWriter:
    """The fetcher's file begun (its header written) and its writeBegin answered ok."""
    writer = SegmentWriter(os.path.join(shell.segments, FILE), OBJECT, b"", "", [PAYLOAD])
    shell.call(FETCHER, WriteBegin(OBJECT, b"", FILE, len(PAYLOAD), (len(PAYLOAD),), ""))
    assert [status for status, *_ in shell.take(FETCHER)] == [StorageStatus.OK]
    return writer


def test_a_miss_is_fetched_once_and_its_readers_follow_the_fetch(shell: Shell) -> None:
    in_parts = shell.call(READER, GetInParts(OBJECT))
    mapped = shell.call(OTHER, GetMapped(OBJECT))
    shell.call(OTHER, GetMapped(OBJECT))
    assert shell.take(READER) == [] and shell.take(OTHER) == [], "the readers wait for the fetch"
    assert shell.upstream_work() == [Fetch(OBJECT)], "one fetch for three reads"
    writer = _fetch(shell)
    (header,) = shell.take(READER)
    assert header[:2] == (StorageStatus.OK, in_parts), "the reader in parts follows the fetch: its header at once"
    shell.call(FETCHER, WriteProgress(OBJECT, writer.write_next(WIRE_PIECE_BYTES)))
    assert [data for *_, data in shell.take(READER)] == [PAYLOAD[:WIRE_PIECE_BYTES]], "a piece once it has come"
    shell.call(FETCHER, WriteProgress(OBJECT, writer.write_next(len(PAYLOAD))))
    writer.close()
    shell.call(FETCHER, Adopt(OBJECT, b"", FILE, len(PAYLOAD), ""))
    assert {status for status, *_ in shell.take(FETCHER)} == {StorageStatus.OK}, "progress and adopt answered ok"
    rest = shell.take(READER)
    assert b"".join(data or b"" for *_, data in rest) == PAYLOAD[WIRE_PIECE_BYTES:]
    others = shell.take(OTHER)
    assert [(status, value) for status, _, _, value, _ in others] == [(StorageStatus.OK, MappedSize(len(PAYLOAD)))] * 2
    assert others[0][1] == mapped
    assert shell.upstream_work() == [], "the fetcher's copy is not uploaded"
    shell.call(READER, GetMapped(OBJECT))
    assert shell.take(READER)[0][3] == MappedSize(len(PAYLOAD)), "held now: answered at once"
    assert shell.upstream_work() == []


def test_a_small_object_fetched_is_put(shell: Shell) -> None:
    asked = shell.call(READER, GetMapped(OBJECT))
    assert shell.upstream_work() == [Fetch(OBJECT)]
    shell.call(FETCHER, Put(OBJECT, b"", 5, ""), [b"small"])
    ((status, request_id, _, _, _),) = shell.take(READER)
    assert (status, request_id) == (StorageStatus.OK, asked)
    assert shell.upstream_work() == []


@pytest.mark.parametrize("begun", [False, True])
def test_a_failed_fetch_tells_its_readers_why_and_a_later_read_fetches_again(shell: Shell, begun: bool) -> None:
    shell.call(READER, GetInParts(OBJECT))
    shell.call(OTHER, GetMapped(OBJECT))
    assert shell.upstream_work() == [Fetch(OBJECT)]
    if begun:
        _fetch(shell)
        shell.take(READER)
    shell.service.fetch_failed(OBJECT, "the upstream storage vanished")
    shell.send([])
    for peer in (READER, OTHER):
        ((status, _, reason, _, _),) = shell.take(peer)
        assert status is StorageStatus.NOT_FOUND and "the upstream storage vanished" in reason
    shell.call(READER, GetMapped(OBJECT))
    assert shell.upstream_work() == [Fetch(OBJECT)], "fetched again"


def test_a_put_is_answered_once_the_upstream_holds_it(shell: Shell) -> None:
    asked = shell.call(READER, Put(OBJECT, b"Client|a", 5, "result"), [b"value"])
    assert shell.take(READER) == [], "not before the upstream answered"
    (upload,) = shell.upstream_work()
    assert isinstance(upload, UploadWork) and upload.object_id == OBJECT
    shell.send(shell.service.uploaded(OBJECT, upload.generation, StorageStatus.OK, ""))
    assert [status for status, *_ in shell.take(READER)] == [StorageStatus.OK]
    refused = ObjectID(b"f" * 32)
    shell.call(OTHER, Put(refused, b"Client|a", 5, "result"), [b"value"])
    (upload,) = shell.upstream_work()
    assert isinstance(upload, UploadWork)
    shell.send(shell.service.uploaded(refused, upload.generation, StorageStatus.FULL, "the budget is reached"))
    ((status, _, reason, _, _),) = shell.take(OTHER)
    assert (status, reason) == (StorageStatus.FULL, "the budget is reached"), "the upstream's refusal passed on"
    assert asked


def test_exists_is_the_upstreams_and_a_copy_it_no_longer_holds_is_dropped(shell: Shell) -> None:
    shell.call(FETCHER, Put(OBJECT, b"", 5, ""), [b"small"])
    asked = shell.call(READER, Exists(OBJECT))
    assert shell.take(READER) == [] and shell.upstream_work() == [Check(OBJECT)]
    shell.send(shell.service.checked(OBJECT, False))
    ((status, request_id, _, value, _),) = shell.take(READER)
    assert (status, request_id, value) == (StorageStatus.OK, asked, False)
    assert shell.service.store.get(OBJECT) is None, "the cleared object's copy is gone"


def test_writes_readers_follow_and_clients_are_refused(shell: Shell) -> None:
    shell.call(READER, WriteBegin(OBJECT, b"Client|a", "w.1-1.put", 5, (5,), "result"))
    ((status, _, reason, _, _),) = shell.take(READER)
    assert status is StorageStatus.BAD_REQUEST and "put or adopt" in reason
    shell.call(b"scheduler", StorageHello(PROTOCOL_VERSION, "3.11.0", "scheduler"))
    ((status, _, reason, _, _),) = shell.take(b"scheduler")
    assert status is StorageStatus.REFUSED and "use the storage server" in reason
    shell.call(b"client", StorageHello(PROTOCOL_VERSION, "3.11.0", "client", owner_id=b"Client|a"))
    shell.take(b"client")  # a client reads what the cache holds (host_ledger S5), and does nothing else
    shell.call(b"client", WriteBegin(OBJECT, b"Client|a", "w.1-1.put", 5, (5,), "result"))
    ((status, _, reason, _, _),) = shell.take(b"client")
    assert status is StorageStatus.BAD_REQUEST and "nothing else" in reason
