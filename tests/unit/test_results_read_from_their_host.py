"""A client reads a large result from the host that made it (client/holder_reads.py), the pure parts and the services:

- the storage server's rule (host_ledger S5, `StorageService._client_source`): a client that asks where a result of its
  own is learns its holder, the key that holder serves with and the pieces' digests, held or stored alike, and is
  recorded nowhere; another owner's result, a lost one, or one without a reachable holder: nowhere;
- the admission (host_cache/keys.py): a cache lets in its workers' key and the keys its storage server lets in as
  clients, asking it once per key within `KEY_ANSWER_SECONDS`; the server answers by its authorised folder;
- a host cache serves a client reads of what it holds and nothing else (no put, no fetch on its behalf);
- the client's choice of source (asked seldom where no holder is ever named), and the check of each piece a holder
  sends.

Checked with the mechanism off: with `HostLedger.holder` answering "" the service tests of a client's source fail; with
`CacheSecurity._is_client` answering False the admission test fails; without the cache's check of a client's id against
those its storage server bound to the key (`StorageService._hello_refusal`), the claim test fails; with
`StorageService.act` letting a client do anything at a cache (CLIENT_AT_CACHE holding every operation) the cache test
fails; with `CheckedSource._piece_ended` checking nothing the mismatch tests fail; with `SourceChoice.should_ask` always
true the quiet test fails; with `SourceChoice.failed` never turning `asks` off, the laptop test fails."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
import zmq.auth

from scaler.client.holder_reads import QUIET_AFTER, UNREACHED_HOSTS, CheckedSource, PieceMismatch, SourceChoice
from scaler.object_storage.host_cache.keys import CacheSecurity, ClientKeys
from scaler.object_storage.host_ledger import HostLedger
from scaler.object_storage.service import StorageAnswer, StorageService
from scaler.object_storage.store import ObjectStore
from scaler.protocol.codec import encode_storage_request
from scaler.protocol.ids import ObjectID
from scaler.protocol.messages import PROTOCOL_VERSION
from scaler.protocol.storage_messages import (
    WIRE_PIECE_BYTES,
    ClientKey,
    Exists,
    Get,
    GetInParts,
    GetMapped,
    KeyOwners,
    ObjectSize,
    ObjectSource,
    Put,
    SourceRequest,
    StorageHello,
    StorageOperation,
    StorageRequest,
    StorageStatus,
    piece_digests,
)
from scaler.security.authorized_folder import AuthorizedFolder
from scaler.security.curve import CurveSecurity
from scaler.security.key_files import read_public_key

pytestmark = pytest.mark.timeout(30)

RESULT = ObjectID(b"r" * 32)
A, B = "tcp://a:1", "tcp://b:1"
DIGESTS = (b"d" * 16, b"e" * 16)


def _call(service: StorageService, peer: bytes, operation: StorageOperation, frames: int = 0) -> StorageAnswer:
    answer = service.handle(peer, encode_storage_request(StorageRequest(7, operation)), [b"x" * 1000] * frames)
    assert answer is not None
    return answer


def _keys(folder: Path) -> dict[str, bytes]:
    (folder / "workers").mkdir()
    for name, place in (("alice", folder), ("bob", folder), ("workers", folder / "workers")):
        zmq.auth.create_certificates(str(place), name)
    (folder / "server").mkdir()
    zmq.auth.create_certificates(str(folder / "server"), "server")
    return {
        name: read_public_key(str(place / f"{name}.key"))
        for name, place in (("alice", folder), ("bob", folder), ("workers", folder / "workers"),
                            ("server", folder / "server"))
    }  # fmt: skip


def _server(keys: dict[str, bytes] | None = None, folder: Path | None = None) -> StorageService:
    roles = None if folder is None or keys is None else AuthorizedFolder(str(folder), server=keys["server"])
    service = StorageService(ObjectStore(1 << 30), roles=roles)
    key = None if keys is None else keys["workers"]
    for peer, address in ((b"cache-a", A), (b"cache-b", B)):
        hello = StorageHello(PROTOCOL_VERSION, "3.11.0", "cache", cache_address=address)
        service.handle(peer, encode_storage_request(StorageRequest(1, hello)), [], key=key)
    for peer, owner, name in ((b"client", b"owner", "alice"), (b"other", b"another", "bob")):
        hello = StorageHello(PROTOCOL_VERSION, "3.11.0", "client", owner)
        service.handle(peer, encode_storage_request(StorageRequest(1, hello)), [], key=keys and keys[name])
    return service


def _ask(service: StorageService, peer: bytes, operation: StorageOperation, key: bytes | None = None) -> StorageAnswer:
    answer = service.handle(peer, encode_storage_request(StorageRequest(9, operation)), [], key=key)
    assert answer is not None
    return answer


def test_the_ledger_names_a_client_the_host_that_made_the_result_and_records_nothing() -> None:
    ledger = HostLedger()
    assert ledger.holder(RESULT) == "", "no holder: the storage server"
    ledger.uploaded(RESULT, A)
    ledger.source(RESULT, B)
    assert ledger.holder(RESULT) == A, "the host that made it holds it whole; B may be fetching it still"
    assert ledger.holders(RESULT) == [A, B], "asking changed nothing"
    ledger.source(RESULT, "tcp://c:1", failed=A)
    assert ledger.holder(RESULT) == "tcp://c:1", "its maker failed a cache: the latest holder"
    fetched = ObjectID(b"f" * 32)
    ledger.source(fetched, A)
    ledger.source(fetched, B)
    assert ledger.holder(fetched) == B, "none stored it here: the latest holder"
    ledger.forget([RESULT])
    assert ledger.holder(RESULT) == ""


def test_a_client_learns_where_its_held_result_is_with_the_holders_key(tmp_path: Path) -> None:
    keys = _keys(tmp_path)
    service = _server(keys, tmp_path)
    hold = Put(RESULT, b"owner", 2000, "result", (), False, True, DIGESTS)
    assert _ask(service, b"cache-a", hold, keys["workers"]).reply.status is StorageStatus.OK
    answer = _ask(service, b"client", SourceRequest(RESULT), keys["alice"])
    assert answer.reply.value == ObjectSource(A, DIGESTS, keys["workers"].decode())
    assert not answer.digests, "a hold's digests are its holder's own"
    assert service.ledger.holders(RESULT) == [A], "the client is neither holder nor fetcher"
    foreign = _ask(service, b"other", SourceRequest(RESULT), keys["bob"])
    assert foreign.reply.value == ObjectSource(), "another owner's result: nowhere"
    service.connections_ended([b"cache-a"], 1.0)
    lost = _ask(service, b"client", SourceRequest(RESULT), keys["alice"])
    assert lost.reply.value == ObjectSource(), "lost with its holder: read at the server, which waits for it made again"


def test_a_client_learns_where_its_stored_result_is_while_its_holder_has_it() -> None:
    service = _server()
    assert _call(service, b"cache-a", Put(RESULT, b"owner", 2000, "result"), frames=2).reply.status is StorageStatus.OK
    answer = _call(service, b"client", SourceRequest(RESULT))
    assert answer.reply.value == ObjectSource(A) and answer.digests, "the shell adds the digests of the stored copy"
    assert answer.payload == (b"x" * 1000, b"x" * 1000)
    assert service.ledger.holders(RESULT) == [A]
    missing = _call(service, b"client", SourceRequest(ObjectID(b"m" * 32)))
    assert missing.reply.value == ObjectSource()
    assert _call(service, b"other", SourceRequest(RESULT)).reply.value == ObjectSource(), "not its own"


def test_the_server_says_which_keys_a_cache_lets_in_as_clients(tmp_path: Path) -> None:
    keys = _keys(tmp_path)
    service = _server(keys, tmp_path)
    stranger = zmq.curve_keypair()[0]
    answers = {
        name: _ask(service, b"cache-a", ClientKey(key.decode()), keys["workers"]).reply
        for name, key in (("alice", keys["alice"]), ("workers", keys["workers"]), ("stranger", stranger))
    }
    assert answers["alice"].value == KeyOwners((b"owner",)), "a client's key: the client ids bound to it here"
    assert answers["workers"].value == KeyOwners(()), "a worker's key may open a client too; none bound yet"
    assert answers["stranger"].status is StorageStatus.REFUSED
    refused = _ask(service, b"client", ClientKey(keys["alice"].decode()), keys["alice"])
    assert refused.reply.status is StorageStatus.BAD_REQUEST, "only a host cache asks"


def test_a_cache_lets_in_its_workers_and_the_clients_its_server_names_asking_once_per_key() -> None:
    workers_public, workers_secret = zmq.curve_keypair()
    client, stranger = zmq.curve_keypair()[0], zmq.curve_keypair()[0]
    asked: list[bytes] = []
    now = [0.0]

    def upstream(key: bytes) -> frozenset[bytes] | None:
        asked.append(key)
        return frozenset({b"owner"}) if key == client else None

    security = CacheSecurity(CurveSecurity(workers_public, workers_secret, b"s" * 40), upstream, lambda: now[0])
    assert security.callback("*", workers_public) and asked == [], "its workers' key, without asking"
    assert security.callback("*", client) and security.roles_of(client) == frozenset({"client"})
    assert security.owners_of(client) == {b"owner"} and security.owners_of(stranger) == frozenset()
    assert not security.callback("*", stranger) and security.roles_of(stranger) == frozenset()
    assert security.callback("*", client) and not security.callback("*", stranger)
    assert asked == [client, stranger, client], "a client's key at each handshake (its ids change), a refusal kept"
    now[0] += 60
    security.callback("*", stranger)
    assert asked == [client, stranger, client, stranger], "a refused key asked again once the answer is old"
    closed = CacheSecurity(CurveSecurity(workers_public, workers_secret, b"s" * 40))
    assert not closed.callback("*", client), "no upstream to ask: no client"

    def unreachable(key: bytes) -> frozenset[bytes] | None:
        raise OSError("no route")

    cut_off = CacheSecurity(CurveSecurity(workers_public, workers_secret, b"s" * 40), unreachable)
    assert not cut_off.callback("*", client), "a storage server that cannot be asked lets no client in"


def test_client_keys_are_remembered_for_a_while_and_bounded() -> None:
    keys = ClientKeys(answer_seconds=10, max_keys=2)
    assert not keys.refused_lately(b"k1", 0) and keys.owners_of(b"k1") is None
    keys.answered(b"k1", frozenset({b"o"}), 0)
    keys.answered(b"k2", None, 1)
    assert not keys.refused_lately(b"k1", 5), "a client's key is asked about again at its next handshake"
    assert keys.refused_lately(b"k2", 5) and not keys.refused_lately(b"k2", 11)
    assert keys.owners_of(b"k1") == {b"o"} and keys.owners_of(b"k2") is None
    keys.answered(b"k3", frozenset(), 2)
    assert keys.owners_of(b"k1") is None, "the oldest forgotten beyond the bound"


def test_a_client_at_a_cache_claims_only_the_client_ids_its_storage_server_bound_to_its_key() -> None:
    workers_public, workers_secret = zmq.curve_keypair()
    alice, mallory = zmq.curve_keypair()[0], zmq.curve_keypair()[0]
    bound = {alice: frozenset({b"alice"}), mallory: frozenset({b"mallory"})}
    security = CacheSecurity(CurveSecurity(workers_public, workers_secret, b"s" * 40), bound.get)
    cache = StorageService(ObjectStore(1 << 30), roles=security, cache=True, client_owners=security.owners_of)
    hello = StorageHello(PROTOCOL_VERSION, "3.11.0", "processor")
    assert _ask(cache, b"processor", hello, workers_public).reply.status is StorageStatus.OK
    put = Put(RESULT, b"alice", 2000, "result")
    cache.act(b"processor", 2, put, [b"x" * 1000] * 2, key=workers_public)  # stored, and to upload
    assert security.callback("*", alice) and security.callback("*", mallory), "both are clients' keys"
    claims = {
        (name, owner): _ask(cache, name.encode(), StorageHello(PROTOCOL_VERSION, "3.11.0", "client", owner), key)
        for name, key, owner in (("mallory", mallory, b"alice"), ("alice", alice, b"alice"))
    }
    refused = claims[("mallory", b"alice")].reply
    assert refused.status is StorageStatus.REFUSED and "not bound this client id" in refused.reason, refused
    assert claims[("alice", b"alice")].reply.status is StorageStatus.OK
    assert _ask(cache, b"alice", Get(RESULT), alice).reply.value == ObjectSize(2000)
    assert _ask(cache, b"mallory", Get(RESULT), mallory).reply.status is StorageStatus.HELLO_REQUIRED
    closed = StorageService(ObjectStore(1 << 30), roles=security, cache=True)
    refused_all = _ask(closed, b"alice", StorageHello(PROTOCOL_VERSION, "3.11.0", "client", b"alice"), alice).reply
    assert refused_all.status is StorageStatus.REFUSED, "a cache told no client ids lets no client claim one"


def test_a_cache_serves_a_client_reads_of_what_it_holds_and_nothing_else() -> None:
    cache = StorageService(ObjectStore(1 << 30), cache=True)
    for peer, role, owner in ((b"processor", "processor", b""), (b"client", "client", b"owner")):
        hello = StorageHello(PROTOCOL_VERSION, "3.11.0", role, owner)
        assert _call(cache, peer, hello).reply.status is StorageStatus.OK
    cache.act(b"processor", 2, Put(RESULT, b"owner", 2000, "result"), [b"x" * 1000] * 2)  # stored, and to upload
    assert _call(cache, b"client", Get(RESULT)).reply.value == ObjectSize(2000)
    whole = _call(cache, b"client", GetInParts(RESULT))
    assert whole.reply.status is StorageStatus.OK and whole.in_parts
    missing = _call(cache, b"client", Get(ObjectID(b"m" * 32)))
    assert missing.reply.status is StorageStatus.NOT_FOUND, "answered at once: nothing is fetched for a client"
    assert cache.cache is not None and not cache.cache.is_fetching(ObjectID(b"m" * 32))
    for operation, frames in ((Put(ObjectID(b"p" * 32), b"owner", 1000, ""), 1), (GetMapped(RESULT), 0),
                              (Exists(RESULT), 0), (SourceRequest(RESULT), 0)):  # fmt: skip
        refused = _call(cache, b"client", operation, frames)
        assert refused.reply.status is StorageStatus.BAD_REQUEST, operation


def test_the_client_chooses_a_holder_named_with_its_key_and_gives_up_on_one_that_failed() -> None:
    choice = SourceChoice(secured=True)
    assert choice.holder(ObjectSource(A, DIGESTS, "key")) == A
    assert choice.holder(ObjectSource(A, DIGESTS)) == "", "secured, and no key named: the storage server"
    assert choice.holder(ObjectSource(A, (), "key")) == "", "no digests: nothing to check a piece against"
    assert choice.holder(ObjectSource()) == "" and choice.holder(None) == ""
    assert choice.failed(A) is True and choice.failed(A) is False, "said once"
    assert choice.holder(ObjectSource(A, DIGESTS, "key")) == "", "not tried again"
    assert SourceChoice(secured=False).holder(ObjectSource(B, DIGESTS)) == B
    choice.unanswered()
    assert not choice.asks


def test_a_client_that_reaches_no_holder_stops_trying_holders_after_a_few_and_one_that_reached_one_does_not() -> None:
    """A laptop off the workers' network pays the connect deadline for UNREACHED_HOSTS hosts, not for every host of a
    large cluster; a client that read from a holder once goes on trying others."""
    hosts = [f"tcp://h{index}:1" for index in range(UNREACHED_HOSTS + 2)]
    laptop = SourceChoice(secured=False)
    for host in hosts[:UNREACHED_HOSTS]:
        assert laptop.should_ask() and laptop.holder(ObjectSource(host, DIGESTS)) == host
        laptop.failed(host)
    assert not laptop.should_ask(), "it asks the storage server where results are no more"
    inside = SourceChoice(secured=False)
    inside.holder(ObjectSource(hosts[0], DIGESTS))
    inside.reached()
    for host in hosts[1:]:
        assert inside.holder(ObjectSource(host, DIGESTS)) == host
        inside.failed(host)
    assert inside.should_ask() and inside.holder(ObjectSource(hosts[0], DIGESTS)) == hosts[0]


def test_a_client_whose_server_names_no_holder_asks_it_seldom() -> None:
    """Each ask is a round trip over the client's link (a laptop's is long): where no host caches hold results (one
    machine) or none can be reached, the client asks before one read in QUIET_AFTER, and at each read again once a
    holder is named."""
    choice = SourceChoice(secured=False)
    asked = []
    for _ in range(3 * QUIET_AFTER):
        asked.append(choice.should_ask())
        if asked[-1]:
            choice.holder(ObjectSource())
    assert asked[:QUIET_AFTER] == [True] * QUIET_AFTER, "asked at each read at first"
    assert asked[QUIET_AFTER:].count(True) == 2, asked
    while not choice.should_ask():
        pass
    assert choice.holder(ObjectSource(A, DIGESTS)) == A
    assert all(choice.should_ask() for _ in range(QUIET_AFTER)), "a holder named: asked at each read again"


class _Pieces:
    """An object's frames as a source hands them out (a FrameSource), `cut` bytes at a time."""

    def __init__(self, frames: list[bytes], cut: int) -> None:
        self.frame_bytes = tuple(len(frame) for frame in frames)
        self._data = io.BytesIO(b"".join(frames))
        self._cut = cut

    def readinto(self, view: memoryview) -> int:
        return self._data.readinto(view[: self._cut])


def _read_all(source: CheckedSource) -> bytes:
    out = bytearray()
    buffer = memoryview(bytearray(300_000))
    while count := source.readinto(buffer):
        out += buffer[:count]
    return bytes(out)


def test_each_piece_a_holder_sends_is_checked_and_a_wrong_one_never_makes_a_value() -> None:
    frames = [b"h" * 10, b"", bytes(range(256)) * (WIRE_PIECE_BYTES // 128)]  # three frames, four pieces
    digests = piece_digests(frames)
    assert len(digests) == 4
    checked = CheckedSource(_Pieces(frames, 70_000), digests)  # type: ignore[arg-type]
    assert _read_all(checked) == b"".join(frames) and checked.checked
    wrong = [frames[0], frames[1], frames[2][:-1] + b"!"]
    with pytest.raises(PieceMismatch, match="piece 3"):
        _read_all(CheckedSource(_Pieces(wrong, 70_000), digests))  # type: ignore[arg-type]
    with pytest.raises(PieceMismatch, match="pieces"):
        CheckedSource(_Pieces(frames, 70_000), digests[:3])  # type: ignore[arg-type]


def test_a_holder_that_sends_fewer_bytes_than_named_is_caught() -> None:
    frames = [b"a" * 100, b"b" * 100]
    source = _Pieces(frames, 1000)
    source.frame_bytes = (100, 200)  # names more than it sends
    checked = CheckedSource(source, piece_digests([b"a" * 100, b"b" * 200]))  # type: ignore[arg-type]
    with pytest.raises(PieceMismatch, match="1 of the object's 2 pieces"):
        _read_all(checked)
