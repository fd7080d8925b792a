"""The pure object table (store.py) and the pure request handling of the server (StorageService)."""

from __future__ import annotations

import pytest

from scaler.object_storage.service import StorageService
from scaler.object_storage.store import ObjectStore
from scaler.protocol.codec import encode_storage_request
from scaler.protocol.ids import ObjectID
from scaler.protocol.messages import PROTOCOL_VERSION
from scaler.protocol.storage_messages import (
    Delete,
    DeleteOwner,
    Exists,
    Get,
    Info,
    ObjectSize,
    Put,
    StorageHello,
    StorageInfo,
    StorageOperation,
    StorageRequest,
    StorageStatus,
)

A, B, C = b"object-a", b"object-b", b"object-c"
ALICE, BOB = b"Client|alice", b"Client|bob"


# ---------------------------------------------------------------- ObjectStore


def test_put_then_get_keeps_frames_as_given() -> None:
    store = ObjectStore()
    frames = [b"ab", b"", b"cde"]
    store.put(A, ALICE, frames, "name")
    stored = store.get(A)
    assert stored is not None
    assert stored.frames == tuple(frames)
    assert stored.frames[0] is frames[0]  # kept, not copied or joined
    assert (stored.owner_id, stored.total_bytes, stored.name) == (ALICE, 5, "name")
    assert store.exists(A)
    assert not store.exists(B)
    assert store.get(B) is None


def test_info_counts_objects_bytes_and_owners() -> None:
    store = ObjectStore()
    assert store.info() == StorageInfo(0, 0, 0)
    store.put(A, ALICE, [b"123"])
    store.put(B, ALICE, [b"45"])
    store.put(C, BOB, [b"6"])
    assert store.info() == StorageInfo(3, 6, 2)
    assert len(store) == 3


def test_replacing_an_object_keeps_accounting_right() -> None:
    store = ObjectStore()
    store.put(A, ALICE, [b"12345"])
    store.put(A, ALICE, [b"12"])
    assert store.info() == StorageInfo(1, 2, 1)
    store.put(A, BOB, [b"1", b"23"])  # a new owner takes it over
    assert store.info() == StorageInfo(1, 3, 1)
    assert store.delete_owner(ALICE) == 0
    assert store.delete_owner(BOB) == 1
    assert store.info() == StorageInfo(0, 0, 0)


def test_delete_counts_only_what_existed() -> None:
    store = ObjectStore()
    store.put(A, ALICE, [b"1"])
    store.put(B, BOB, [b"22"])
    assert store.delete([A, C, A]) == 1
    assert not store.exists(A)
    assert store.info() == StorageInfo(1, 2, 1)
    assert store.delete([]) == 0


def test_delete_owner_removes_only_that_owners_objects() -> None:
    store = ObjectStore()
    store.put(A, ALICE, [b"1"])
    store.put(B, ALICE, [b"22"])
    store.put(C, BOB, [b"333"])
    assert store.delete_owner(ALICE) == 2
    assert store.info() == StorageInfo(1, 3, 1)
    assert store.exists(C)
    assert store.delete_owner(ALICE) == 0


def test_objects_without_owner_are_not_indexed() -> None:
    store = ObjectStore()
    store.put(A, b"", [b"1"])
    assert store.info() == StorageInfo(1, 1, 0)
    assert store.delete_owner(b"") == 0
    assert store.exists(A)


def test_empty_object() -> None:
    store = ObjectStore()
    store.put(A, ALICE, [])
    stored = store.get(A)
    assert stored is not None and stored.total_bytes == 0 and stored.frames == ()
    assert store.info() == StorageInfo(1, 0, 1)


# ---------------------------------------------------------------- StorageService

PEER = b"peer-1"


def _header(operation: StorageOperation, request_id: int = 7) -> bytes:
    return encode_storage_request(StorageRequest(request_id, operation))


def _greeted_service() -> StorageService:
    service = StorageService()
    answer = service.handle(PEER, _header(StorageHello(PROTOCOL_VERSION, "0.0.0", "scheduler")), [])
    assert answer.reply.status is StorageStatus.OK  # another Python version is fine for storage
    return service


def test_requests_before_hello_are_not_carried_out() -> None:
    service = StorageService()
    answer = service.handle(PEER, _header(Put(ObjectID(A), ALICE, 1)), [b"x"])
    assert answer.reply.status is StorageStatus.HELLO_REQUIRED
    assert answer.reply.request_id == 7
    assert not service.store.exists(A)


def test_incompatible_protocol_is_refused_with_a_reason() -> None:
    service = StorageService()
    answer = service.handle(PEER, _header(StorageHello(PROTOCOL_VERSION + 1, "3.11.0", "worker")), [])
    assert answer.reply.status is StorageStatus.REFUSED
    assert f"protocol version {PROTOCOL_VERSION + 1}" in answer.reply.reason
    assert answer.is_rejection
    assert service.handle(PEER, _header(Info()), []).reply.status is StorageStatus.HELLO_REQUIRED


def test_put_get_exists_delete_through_the_service() -> None:
    service = _greeted_service()
    assert service.handle(PEER, _header(Put(ObjectID(A), ALICE, 3, "n")), [b"a", b"bc"]).reply.status is (
        StorageStatus.OK
    )
    get = service.handle(PEER, _header(Get(ObjectID(A))), [])
    assert get.reply.value == ObjectSize(3)
    assert get.payload == (b"a", b"bc")
    assert service.handle(PEER, _header(Exists(ObjectID(A))), []).reply.value is True
    assert service.handle(PEER, _header(Info()), []).reply.value == StorageInfo(1, 3, 1)
    assert service.handle(PEER, _header(Delete((ObjectID(A), ObjectID(B)))), []).reply.value == 1
    missing = service.handle(PEER, _header(Get(ObjectID(A))), [])
    assert missing.reply.status is StorageStatus.NOT_FOUND
    assert A.hex() in missing.reply.reason
    service.handle(PEER, _header(Put(ObjectID(B), BOB, 0)), [])
    assert service.handle(PEER, _header(DeleteOwner(BOB)), []).reply.value == 1


@pytest.mark.parametrize(
    ("header", "payload", "reason"),
    [
        (b"", [], "undecodable request header"),
        (b"\x00garbage\xff" * 3, [], "undecodable request header"),
        (_header(Put(ObjectID(A), ALICE, 10)), [b"123"], "header says 10 bytes"),
        (_header(Put(ObjectID(A), ALICE, 1)), [], "add up to 0"),
        (_header(Put(ObjectID(b""), ALICE, 0)), [], "empty object id"),
        (_header(Get(ObjectID(A))), [b"extra"], "get requests carry no payload"),
        (_header(Info()), [b"", b""], "2 extra frame(s)"),
    ],
)
def test_malformed_requests_get_bad_request(header: bytes, payload: list[bytes], reason: str) -> None:
    service = _greeted_service()
    answer = service.handle(PEER, header, payload)
    assert answer.reply.status is StorageStatus.BAD_REQUEST
    assert reason in answer.reply.reason
    assert answer.is_rejection
    assert service.store.info() == StorageInfo(0, 0, 0)


def test_bad_request_reasons_are_one_line() -> None:
    service = _greeted_service()
    garbage = bytes(range(256)) * 8  # a segment table pointing far past the end: capnp adds a stack trace
    answer = service.handle(PEER, garbage, [])
    assert answer.reply.status is StorageStatus.BAD_REQUEST
    assert "\n" not in answer.reply.reason


def test_forgotten_peers_are_asked_to_greet_again() -> None:
    service = StorageService(max_greeted_peers=2)
    hello = _header(StorageHello(PROTOCOL_VERSION, "3.11.0", "client", ALICE))
    for peer in (b"p1", b"p2", b"p3"):
        assert service.handle(peer, hello, []).reply.status is StorageStatus.OK
    assert service.handle(b"p1", _header(Info()), []).reply.status is StorageStatus.HELLO_REQUIRED
    assert service.handle(b"p3", _header(Info()), []).reply.status is StorageStatus.OK


# ---------------------------------------------------------------- isolation between clients (issue 11)


class _Folder:
    """The authorised folder as a dict: z85 key -> roles (empty: not authorised, or revoked)."""

    def __init__(self, roles: dict[bytes, frozenset[str]]) -> None:
        self.roles = roles

    def roles_of(self, public_key: bytes) -> frozenset[str]:
        return self.roles.get(public_key, frozenset())


def _hello(service: StorageService, peer: bytes, role: str, owner: bytes = b"", key: bytes | None = None) -> str:
    answer = service.handle(peer, _header(StorageHello(PROTOCOL_VERSION, "3.11.0", role, owner)), [], key)
    return answer.reply.reason if answer.reply.status is not StorageStatus.OK else ""


def _two_clients_and_a_worker(service: StorageService) -> None:
    assert _hello(service, b"alice", "client", ALICE) == ""
    assert _hello(service, b"bob", "client", BOB) == ""
    assert _hello(service, b"worker", "processor") == ""
    assert service.handle(b"alice", _header(Put(ObjectID(A), ALICE, 1)), [b"a"]).reply.status is StorageStatus.OK
    # a worker stores a task's result for its client
    assert service.handle(b"worker", _header(Put(ObjectID(B), ALICE, 1)), [b"r"]).reply.status is StorageStatus.OK


def test_a_client_cannot_read_overwrite_delete_or_clear_another_clients_objects() -> None:
    service = StorageService()
    _two_clients_and_a_worker(service)
    for operation in (Get(ObjectID(A)), Get(ObjectID(B))):
        assert service.handle(b"bob", _header(operation), []).reply.status is StorageStatus.NOT_FOUND
    assert service.handle(b"bob", _header(Exists(ObjectID(A))), []).reply.value is False
    overwrite = service.handle(b"bob", _header(Put(ObjectID(A), BOB, 1)), [b"x"])
    assert overwrite.reply.status is StorageStatus.REFUSED and "another owner" in overwrite.reply.reason
    forged = service.handle(b"bob", _header(Put(ObjectID(b"new"), ALICE, 1)), [b"x"])
    assert forged.reply.status is StorageStatus.REFUSED and "its own id" in forged.reply.reason
    assert service.handle(b"bob", _header(Delete((ObjectID(A), ObjectID(B)))), []).reply.value == 0
    clear = service.handle(b"bob", _header(DeleteOwner(ALICE)), [])
    assert clear.reply.status is StorageStatus.REFUSED
    assert service.refusals == 5
    # alice's objects are untouched and hers to read, delete and clear
    assert service.handle(b"alice", _header(Get(ObjectID(A))), []).payload == (b"a",)
    assert service.handle(b"alice", _header(Get(ObjectID(B))), []).payload == (b"r",)
    assert service.handle(b"alice", _header(DeleteOwner(ALICE)), []).reply.value == 2


def test_the_worker_side_reads_any_object_but_neither_deletes_nor_overwrites_a_foreign_one() -> None:
    service = StorageService()
    _two_clients_and_a_worker(service)
    assert service.handle(b"worker", _header(Get(ObjectID(A))), []).payload == (b"a",)
    overwrite = service.handle(b"worker", _header(Put(ObjectID(A), BOB, 1)), [b"x"])
    assert overwrite.reply.status is StorageStatus.REFUSED
    assert service.handle(b"worker", _header(Delete((ObjectID(A),))), []).reply.status is StorageStatus.REFUSED
    assert service.handle(b"worker", _header(DeleteOwner(ALICE)), []).reply.status is StorageStatus.REFUSED
    assert service.store.info().object_count == 2


def test_a_client_hello_without_its_id_is_refused() -> None:
    assert "client id" in _hello(StorageService(), b"anon", "client")


def test_with_keys_roles_owner_ids_and_revocation_are_enforced() -> None:
    folder = _Folder(
        {b"k-alice": frozenset({"client"}), b"k-bob": frozenset({"client"}), b"k-pool": frozenset({"worker"})}
    )
    service = StorageService(roles=folder)
    assert _hello(service, b"alice", "client", ALICE, b"k-alice") == ""
    # a client key cannot pass for the worker side, nor claim another client's id
    assert "may not connect as a processor" in _hello(service, b"bob", "processor", key=b"k-bob")
    assert "belongs to another CURVE key" in _hello(service, b"bob", "client", ALICE, b"k-bob")
    assert "not authenticated" in _hello(service, b"anon", "client", BOB, None)
    assert _hello(service, b"pool", "processor", key=b"k-pool") == ""
    # another key on a greeted identity is refused
    taken = service.handle(b"alice", _header(Info()), [], b"k-bob")
    assert taken.reply.status is StorageStatus.REFUSED and "another CURVE key" in taken.reply.reason
    # revoking alice's key refuses her next request
    assert service.handle(b"alice", _header(Info()), [], b"k-alice").reply.status is StorageStatus.OK
    del folder.roles[b"k-alice"]
    revoked = service.handle(b"alice", _header(Info()), [], b"k-alice")
    assert revoked.reply.status is StorageStatus.REFUSED and "revoked" in revoked.reply.reason
    assert service.handle(b"alice", _header(Info()), [], b"k-alice").reply.status is StorageStatus.HELLO_REQUIRED
