"""Results held by their host (object_storage/held_results.py, the storage server's pure rule, and the service around
it): a host cache's hold is recorded and answered at once; a read of the held object waits for its upload and asks that
it go first; `exists` says yes; other hosts are sent to the holder; the upload's put answers the reads; a holder whose
connection ends loses what it held (its readers wait on, and the scheduler's `fates` says how many times it was lost);
a put of a lost object (its task made again) answers them; a delete tells them; the bound refuses holds beyond it; a
holder asks whether a reader waits for its upload, and learns when the object was deleted (H8). And the cache's side
(cache_rules C4): a large result's put is answered once its hold is recorded, the upload following without it;
without holds it waits for the upload as before.

Checked with the mechanism off: with `StorageService._hold` answering ok without recording, the three service tests of
a hold fail; with `CacheRole.upload` ignoring `total_bytes`, the cache's test fails; with `StorageService._wanted`
answering ok, false whatever is held, the H8 test fails; with `StorageService._source` and `_client_source` taking
the hold only while nothing is stored (not while the upload's segment file is written), the test of that window
fails."""

from __future__ import annotations

import pytest

from scaler.object_storage.client_core import HoldsUnknown, status_error
from scaler.object_storage.held_results import NOTHING_TO_WAIT_FOR, HeldResults
from scaler.object_storage.host_cache.cache_rules import CacheRole, HoldWork, UploadWork
from scaler.object_storage.service import StorageAnswer, StorageService
from scaler.object_storage.store import ObjectStore, WriteSegment
from scaler.protocol.codec import encode_storage_request
from scaler.protocol.ids import ObjectID
from scaler.protocol.messages import PROTOCOL_VERSION
from scaler.protocol.storage_messages import (
    Delete,
    Exists,
    Fates,
    Get,
    ObjectFates,
    ObjectSource,
    Put,
    SourceRequest,
    StorageHello,
    StorageOperation,
    StorageReply,
    StorageRequest,
    StorageStatus,
)

pytestmark = pytest.mark.timeout(30)

OBJECT = ObjectID(b"r" * 32)
DIGESTS = (b"d" * 16, b"e" * 16)


def test_a_held_object_is_stored_or_lost_with_its_holder() -> None:
    held: HeldResults[str] = HeldResults(max_held=2)
    assert held.hold(b"o1", b"owner", 10, b"cache-a", "tcp://a:1", DIGESTS)
    assert held.fate(b"o1") == 0 and held.holds(b"cache-a")
    assert held.wait(b"o1", "read-1") is True, "the first read asks for the upload to go ahead"
    assert held.wait(b"o1", "read-2") is False
    assert held.ended([b"cache-b"]) == [], "another connection's end loses nothing"
    assert held.ended([b"cache-a"]) == [b"o1"] and held.fate(b"o1") == 1 and not held.holds(b"cache-a")
    assert held.hold(b"o1", b"owner", 10, b"cache-c", "tcp://c:1"), "made again on another host"
    assert held.fate(b"o1") == 1, "its losses are remembered until it is stored"
    assert held.stored(b"o1") == ["read-1", "read-2"], "the reads waited through the loss"
    assert held.fate(b"o1") == NOTHING_TO_WAIT_FOR and not held.holds(b"cache-c")
    assert held.hold(b"o2", b"", 1, b"x", "") and held.hold(b"o3", b"", 1, b"x", "")
    assert not held.hold(b"o4", b"", 1, b"x", ""), "the bound refuses a hold beyond it"
    assert held.forget([b"o2", b"o9"]) == [] and b"o2" not in held


def _call(service: StorageService, peer: bytes, operation: StorageOperation, frames: int = 0) -> StorageAnswer | None:
    return service.handle(peer, encode_storage_request(StorageRequest(7, operation)), [b"x" * 1000] * frames)


def _server(store: ObjectStore | None = None) -> StorageService:
    service = StorageService(store if store is not None else ObjectStore(1 << 30))
    for peer, role in ((b"cache-a", "cache"), (b"cache-b", "cache"), (b"client", "client"), (b"sched", "scheduler")):
        address = f"tcp://{peer.decode()}:1" if role == "cache" else ""
        owner = b"owner" if role == "client" else b""
        _call(service, peer, StorageHello(PROTOCOL_VERSION, "3.11.0", role, owner, cache_address=address))
    return service


def _status(answer: StorageAnswer | None) -> StorageStatus | None:
    return None if answer is None else answer.reply.status


def _fates(service: StorageService) -> tuple[int, ...]:
    answer = _call(service, b"sched", Fates((OBJECT,)))
    assert answer is not None and isinstance(answer.reply.value, ObjectFates)
    return answer.reply.value.losses


def _hold(service: StorageService, peer: bytes) -> StorageAnswer | None:
    return _call(service, peer, Put(OBJECT, b"owner", 2000, "result", (), False, True, DIGESTS))


def test_a_hold_is_answered_at_once_and_its_readers_wait_for_the_upload() -> None:
    service = _server()
    assert _status(_hold(service, b"cache-a")) is StorageStatus.OK
    assert _fates(service) == (0,)
    exists = _call(service, b"client", Exists(OBJECT))
    assert exists is not None and exists.reply.value is True, "a held result exists"
    source = _call(service, b"cache-b", SourceRequest(OBJECT))
    assert source is not None and source.reply.value == ObjectSource("tcp://cache-a:1", DIGESTS), (
        "another host fetches it from the host that made it, with the holder's digests"
    )
    assert _call(service, b"client", Get(OBJECT)) is None, "a read waits for the upload"
    assert service.take_outgoing() == []
    stored = _call(service, b"cache-a", Put(OBJECT, b"owner", 2000, "result"), frames=2)
    assert _status(stored) is StorageStatus.OK
    answers = service.take_outgoing()
    assert [(reply.peer, reply.answer.reply.status, len(reply.answer.payload)) for reply in answers] == [
        (b"client", StorageStatus.OK, 2)
    ]
    assert _fates(service) == (NOTHING_TO_WAIT_FOR,)


def test_other_hosts_are_sent_to_the_holder_while_its_uploads_segment_file_is_written() -> None:
    """The upload stored, its segment file still being written (the hold ends once it is, H3): other hosts are still
    sent to the holder, not to this server (on a loaded machine the write took long enough for a reader of the rig's
    exchange to fetch a partition from the storage host); so is a client reading it."""
    service = _server(ObjectStore(1 << 30, segments=True, segment_from_bytes=1000))
    _hold(service, b"cache-a")
    stored = _call(service, b"cache-a", Put(OBJECT, b"owner", 2000, "result"), frames=2)
    assert stored is None, "the put is answered once its segment file is written"
    (write,) = [work for work in service.take_work() if isinstance(work, WriteSegment)]
    source = _call(service, b"cache-b", SourceRequest(OBJECT))
    assert source is not None and source.reply.value == ObjectSource("tcp://cache-a:1", DIGESTS)
    read = _call(service, b"client", SourceRequest(OBJECT))
    assert read is not None and read.reply.value == ObjectSource("tcp://cache-a:1", DIGESTS)
    assert [reply.peer for reply in service.segment_written(write.object_id, write.generation, None)] == [b"cache-a"]
    settled = _call(service, b"cache-b", SourceRequest(OBJECT))
    assert settled is not None and settled.reply.value == ObjectSource("tcp://cache-a:1"), "its digests from its file"


def test_a_holder_that_goes_loses_the_result_and_its_task_made_again_answers_the_readers() -> None:
    service = _server()
    _hold(service, b"cache-a")
    assert _call(service, b"client", Get(OBJECT)) is None
    assert service.connections_ended([b"cache-a"], 1.0) == [OBJECT]
    assert service.take_outgoing() == [], "the reader waits on, for the task made again"
    assert _fates(service) == (1,), "the scheduler hears it was lost once"
    source = _call(service, b"cache-b", SourceRequest(OBJECT))
    assert source is not None and source.reply.value == ObjectSource(), "nobody is sent to the holder that went"
    assert _status(_hold(service, b"cache-b")) is StorageStatus.OK, "made again on another host"
    assert _fates(service) == (1,)
    assert _status(_call(service, b"cache-b", Put(OBJECT, b"owner", 2000, "result"), frames=2)) is StorageStatus.OK
    assert [reply.peer for reply in service.take_outgoing()] == [b"client"]


def test_a_deleted_held_result_answers_its_readers() -> None:
    service = _server()
    _hold(service, b"cache-a")
    assert _call(service, b"client", Get(OBJECT)) is None
    deleted = _call(service, b"client", Delete((OBJECT,)))
    assert deleted is not None and deleted.reply.value == 1
    assert [(reply.peer, reply.answer.reply.status) for reply in service.take_outgoing()] == [
        (b"client", StorageStatus.NOT_FOUND)
    ]
    assert _fates(service) == (NOTHING_TO_WAIT_FOR,)


def test_only_a_cache_holds_and_only_the_scheduler_asks_fates() -> None:
    service = _server()
    assert _status(_call(service, b"client", Put(OBJECT, b"owner", 2000, "", (), False, True))) is (
        StorageStatus.BAD_REQUEST
    )
    assert _status(_call(service, b"client", Fates((OBJECT,)))) is StorageStatus.REFUSED
    reply = StorageReply(1, StorageStatus.BAD_REQUEST, "put of object 72...: header says 2000 bytes")
    hold = Put(OBJECT, b"", 2000, "", (), False, True)
    assert isinstance(status_error(reply, "tcp://storage:1", hold), HoldsUnknown), "an older server is told apart"


def test_the_cache_answers_a_large_result_once_held_and_uploads_it_after() -> None:
    role: CacheRole[str, tuple[bytes, int]] = CacheRole()
    role.upload(b"big", 1, [(b"processor", 3)], total_bytes=10 << 20)
    assert role.take_work() == [HoldWork(b"big", 1)], "held first; no upload yet"
    assert role.held(b"big", 1, recorded=True) == [(b"processor", 3)], "answered once the upstream recorded it"
    assert role.take_work() == [UploadWork(b"big", 1, held=True)], "its upload may ask what is wanted of it (H8)"
    assert role.uploaded(b"big", 1) == [], "the upload's answer is nobody's"
    role.upload(b"small", 1, [(b"processor", 4)], total_bytes=1000)
    assert role.take_work() == [UploadWork(b"small", 1)], "a small one waits for its upload"
    role.upload(b"other", 1, [(b"processor", 5)], total_bytes=10 << 20)
    role.take_work()
    assert role.held(b"other", 1, recorded=False) == [], "not recorded: its put waits for the upload"
    assert role.take_work() == [UploadWork(b"other", 1)]
    assert role.uploaded(b"other", 1) == [(b"processor", 5)]


def test_the_storage_server_says_what_of_a_held_object_is_wanted() -> None:
    """held_results H8, through the service: a reader waiting for it there, nobody, and deleted."""
    service = _server()
    assert _status(_call(service, b"cache-a", Put(OBJECT, b"owner", 2000, "", (), False, True))) is StorageStatus.OK
    answer = _call(service, b"cache-a", _wanted())
    assert answer is not None and answer.reply.value is False
    assert _call(service, b"client", Get(OBJECT)) is None  # a reader waits for it at the server
    answer = _call(service, b"cache-a", _wanted())
    assert answer is not None and answer.reply.value is True
    _call(service, b"client", Delete((OBJECT,)))
    assert _status(_call(service, b"cache-a", _wanted())) is StorageStatus.NOT_FOUND
    assert _status(_call(service, b"client", _wanted())) is StorageStatus.BAD_REQUEST  # only a cache asks


def _wanted() -> Put:
    return Put(OBJECT, b"owner", 2000, "", (), False, False, (), True)
