"""Where the storage server sends a host cache for an object (object_storage/host_ledger.py), and the service's
`source` answer around it: the hosts of a broadcast fetch in a chain, each from the one before it, never from
themselves; a source that failed is named to nobody again until it asks itself; a deleted object's holders are
forgotten; only a host cache asks, and only an object held and settled is fetched elsewhere, with its pieces'
digests; a result a host's cache stored here is fetched from that host.

Checked with the mechanism off (`HostLedger.source` answering "" always): the chain tests fail; with
`HostLedger.uploaded` doing nothing, the result tests fail."""

from __future__ import annotations

from scaler.object_storage.host_ledger import HostLedger
from scaler.object_storage.service import StorageAnswer, StorageService
from scaler.object_storage.store import ObjectStore
from scaler.protocol.codec import encode_storage_request
from scaler.protocol.ids import ObjectID
from scaler.protocol.messages import PROTOCOL_VERSION
from scaler.protocol.storage_messages import (
    ObjectSource,
    Put,
    SourceRequest,
    StorageHello,
    StorageOperation,
    StorageRequest,
    StorageStatus,
)

OBJECT = ObjectID(b"b" * 32)
A, B, C, D = "tcp://a:1", "tcp://b:1", "tcp://c:1", "tcp://d:1"


def test_a_broadcast_is_fetched_in_a_chain_and_never_from_the_asker() -> None:
    ledger = HostLedger()
    assert ledger.source(OBJECT, A) == "", "the first fetches from the storage server"
    assert ledger.source(OBJECT, B) == A
    assert ledger.source(OBJECT, C) == B
    assert ledger.source(OBJECT, D) == C
    assert ledger.source(OBJECT, B) == A, "asking again: not from C or D, which fetch from it"
    assert ledger.holders(OBJECT) == [A, C, D, B]


def test_a_cache_is_never_sent_to_one_that_fetches_from_it() -> None:
    """A fetched from X, B was sent to A; X fails A: A must not be sent to B, which waits for A (a cycle of waits)."""
    ledger = HostLedger()
    assert ledger.source(OBJECT, "tcp://x:1") == ""
    assert ledger.source(OBJECT, A) == "tcp://x:1"
    assert ledger.source(OBJECT, B) == A
    assert ledger.source(OBJECT, A, failed="tcp://x:1") == "", "not B: B's source is A; the storage server then"
    assert ledger.source(OBJECT, C) == A, "A fetches from the storage server now: C may follow it"


def test_a_failed_source_is_named_to_nobody_until_it_asks_itself() -> None:
    ledger = HostLedger()
    ledger.source(OBJECT, A)
    ledger.source(OBJECT, B)
    assert ledger.source(OBJECT, C) == B
    assert ledger.source(OBJECT, C, failed=B) == A, "B failed C: the one before it"
    assert ledger.source(OBJECT, D) == C
    other = ObjectID(b"o" * 32)
    ledger.source(other, B)
    assert ledger.source(other, A) == B, "B asked since: alive again"


def test_a_deleted_objects_holders_are_forgotten_and_the_oldest_objects_beyond_the_bound() -> None:
    ledger = HostLedger(max_objects=2)
    ledger.source(OBJECT, A)
    ledger.forget([OBJECT])
    assert ledger.source(OBJECT, B) == ""
    ledger.source(ObjectID(b"1" * 32), A)
    ledger.source(ObjectID(b"2" * 32), A)
    assert ledger.holders(OBJECT) == []


def test_a_result_is_fetched_from_the_host_that_uploaded_it() -> None:
    ledger = HostLedger(max_objects=2)
    ledger.source(ObjectID(b"o" * 32), A, failed=B)
    ledger.uploaded(OBJECT, B)
    assert ledger.source(OBJECT, A) == B, "B made it and is alive again (it uploaded)"
    assert ledger.source(OBJECT, C) == A, "then in a chain, as a broadcast"
    ledger.uploaded(ObjectID(b"1" * 32), A)
    ledger.uploaded(ObjectID(b"2" * 32), A)
    assert ledger.holders(OBJECT) == [], "bounded as the fetched ones"


def _call(
    service: StorageService, peer: bytes, operation: StorageOperation, frames: list[bytes] | None = None
) -> StorageAnswer:
    answer = service.handle(peer, encode_storage_request(StorageRequest(1, operation)), frames or [])
    assert answer is not None
    return answer


def test_the_service_names_a_source_with_the_digests_to_take_only_for_a_settled_object() -> None:
    service = StorageService(ObjectStore(1 << 30))
    for peer, address in ((b"cache-a", A), (b"cache-b", B), (b"worker", "")):
        role = "cache" if address else "worker"
        _call(service, peer, StorageHello(PROTOCOL_VERSION, "3.11.0", role, cache_address=address))
    _call(service, b"worker", Put(OBJECT, b"", 5, ""), [b"bytes"])
    first = _call(service, b"cache-a", SourceRequest(OBJECT))
    assert first.reply.value == ObjectSource(), "the first host fetches from the storage server"
    second = _call(service, b"cache-b", SourceRequest(OBJECT))
    assert second.reply.value == ObjectSource(A) and second.digests, "the shell adds the digests"
    assert second.payload == (b"bytes",), "the object's frames, for the shell to digest"
    refused = _call(service, b"worker", SourceRequest(OBJECT))
    assert refused.reply.status is StorageStatus.BAD_REQUEST, "only a host cache asks"
    missing = _call(service, b"cache-b", SourceRequest(ObjectID(b"m" * 32)))
    assert missing.reply.value == ObjectSource(), "an object not stored: asked of the storage server, which says so"


def test_the_service_sends_a_host_to_the_cache_that_stored_a_result() -> None:
    service = StorageService(ObjectStore(1 << 30))
    for peer, address in ((b"cache-a", A), (b"cache-b", B), (b"cache-c", "")):
        _call(service, peer, StorageHello(PROTOCOL_VERSION, "3.11.0", "cache", cache_address=address))
    assert _call(service, b"cache-a", Put(OBJECT, b"", 6, "result"), [b"result"]).reply.status is StorageStatus.OK
    answer = _call(service, b"cache-b", SourceRequest(OBJECT))
    assert answer.reply.value == ObjectSource(A) and answer.digests, "from the host that made it"
    unreachable = ObjectID(b"u" * 32)
    _call(service, b"cache-c", Put(unreachable, b"", 6, "result"), [b"result"])
    assert _call(service, b"cache-b", SourceRequest(unreachable)).reply.value == ObjectSource(), (
        "a cache no other host reaches holds nothing for them"
    )


def test_a_piece_that_does_not_match_its_digest_is_refused() -> None:
    """What a host cache checks of what another host's cache sends (host_cache/upstream.py): every piece against the
    digest the storage server named; a wrong one raises, and the fetch goes elsewhere (never a wrong value)."""
    import pytest

    from scaler.object_storage.host_cache.upstream import PieceMismatch, _Check
    from scaler.protocol.storage_messages import WIRE_PIECE_BYTES, piece_digests, wire_pieces

    frames = [b"m" * 10, bytes(range(256)) * (WIRE_PIECE_BYTES // 128)]  # a frame, and one of two pieces
    digests = piece_digests(frames)
    assert len(digests) == 3
    _Check(digests, [len(frame) for frame in frames]).frames(frames)
    check = _Check(digests, [len(frame) for frame in frames])
    pieces = wire_pieces(frames)
    check.piece(pieces[0])
    with pytest.raises(PieceMismatch, match="piece 1"):
        check.piece(bytes(len(pieces[1])))
    with pytest.raises(PieceMismatch, match="digests"):
        _Check(digests[:2], [len(frame) for frame in frames])
