"""Request handling of the object storage server: one request (peer, header, payload frames) in, its answer out.

Pure, apart from decoding the capnp header: no socket, no event loop, no file. `StorageService` checks hellos,
validates requests, decides who may do what, and carries the operation out on an `ObjectStore`. A request that
waits on the disk (a put until its spill and segment files are written, an adopt until its file is in place, a get
until its object is read back) is answered later: `handle` returns None, the store hands the disk work out
(`take_work`), and `write_finished`, `segment_written`, `adopted` and `read_finished` return the answers that were
waiting, with the peers they go to.

A get of an object held as a segment file is answered with `StorageAnswer.segment` set: the shell maps the file and
sends its frames. A getMapped (a peer of the server's host) is answered `mapped` instead: the peer maps the file itself.
A getInParts is answered as a get, marked `in_parts`: the shell may send its payload as messages of their own.
An object being written by a peer of the server's host (writeBegin) is followed by its readers (followed_writes.py):
their answers, and the pieces sent as the write goes on, are what `take_outgoing` returns after each event. A large
result a host cache holds and will upload (a put's `hold`, held_results.py) is waited for by its readers here until
its upload is stored, and the scheduler asks what became of it (`fates`).
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from scaler.object_storage.followed_writes import FilePiece, FollowedWrites, Outgoing, WaitingRead
from scaler.object_storage.held_results import NOTHING_TO_WAIT_FOR, HeldResults
from scaler.object_storage.host_cache.cache_rules import C6_REFUSAL, FETCHER, CacheRole
from scaler.object_storage.host_ledger import HostLedger
from scaler.object_storage.store import (
    NO_OWNER,
    AdoptResult,
    AdoptSegment,
    DiskWork,
    ObjectStore,
    PayloadBuffer,
    Refusal,
    Segment,
)
from scaler.object_storage.traffic import TrafficBook
from scaler.object_storage.upload_admission import Grant, UploadAdmission
from scaler.protocol.codec import DecodeError, decode_storage_request
from scaler.protocol.handshake import incompatibility
from scaler.protocol.ids import ObjectID
from scaler.protocol.storage_messages import (
    Adopt,
    AdoptMany,
    AdoptOutcome,
    AdoptOutcomes,
    ClientKey,
    Delete,
    DeleteOwner,
    Exists,
    Fates,
    Get,
    GetInParts,
    GetMapped,
    HostReport,
    Info,
    KeyOwners,
    MappedSize,
    ObjectFates,
    ObjectSize,
    ObjectSource,
    Put,
    SegmentDirectory,
    SourceRequest,
    StorageHello,
    StorageOperation,
    StorageReply,
    StorageStatus,
    WriteBegin,
    WriteProgress,
    joined_pieces,
)
from scaler.security.roles import storage_refusal

if TYPE_CHECKING:
    from scaler.io.sockets import PeerRoles

#: Peers remembered as having said hello. The least recently active are forgotten beyond this; such a
#: peer gets `helloRequired` on its next request and says hello again, as after a server restart.
MAX_GREETED_PEERS = 65536

REVOKED_TEXT = "this connection's CURVE key was revoked (removed from the authorised keys)"

_OPERATION_NAMES: dict[type, str] = {
    StorageHello: "hello",
    Put: "put",
    Get: "get",
    Delete: "delete",
    Exists: "exists",
    Info: "info",
    DeleteOwner: "deleteOwner",
    Adopt: "adopt",
    GetMapped: "getMapped",
    AdoptMany: "adoptMany",
    GetInParts: "getInParts",
    WriteBegin: "writeBegin",
    WriteProgress: "writeProgress",
    SourceRequest: "source",
    HostReport: "hostReport",
    Fates: "fates",
    ClientKey: "clientKey",
}

#: What a client may ask a host cache (its reads of the results the cache holds: host_ledger S5); anything else is
#: refused, and a read of what the cache does not hold is answered notFound at once (nothing is fetched for it).
CLIENT_AT_CACHE = (Get, GetInParts)
CLIENT_AT_CACHE_TEXT = "a host cache serves a client its reads of the objects it holds (get, getInParts), nothing else"

#: The most adopts one adoptMany may carry (a client sends at most put_pipeline's batch).
MAX_ADOPTS_PER_REQUEST = 4096


@dataclass(frozen=True, slots=True)
class StorageAnswer:
    """The reply to one request, plus the payload frames that follow its header (the object a get asks for)."""

    reply: StorageReply
    payload: tuple[PayloadBuffer, ...] = ()
    #: an object id: the payload is the frames of that object's segment file (the shell maps it)
    segment: bytes = b""
    #: a getInParts' answer: the shell may send the payload as messages of their own (StorageReply.parts)
    in_parts: bool = False
    #: a part of a followed write's answer: its payload frame is this piece of a segment directory's file
    file_piece: FilePiece | None = None
    #: a source's answer (host_ledger.py): the shell fills in the digests of the object's pieces (its payload, or the
    #: segment file named by `segment`) and sends no payload
    digests: bool = False

    @property
    def is_rejection(self) -> bool:
        """A reply worth a WARNING on the server: the request was malformed or the peer incompatible."""
        return self.reply.status in (StorageStatus.BAD_REQUEST, StorageStatus.REFUSED)


@dataclass(frozen=True, slots=True)
class Reply:
    """An answer that waited on the disk, and the peer it goes to."""

    peer: bytes
    answer: StorageAnswer


@dataclass(slots=True)
class _Batch:
    """An adoptMany on its way: one outcome per adopt, answered once none is missing."""

    peer: bytes
    request_id: int
    outcomes: list[AdoptOutcome | None]
    missing: int

    def settle(self, index: int, outcome: AdoptOutcome) -> Reply | None:
        """Note one adopt's outcome; the batch's answer once it was the last one missing."""
        self.outcomes[index] = outcome
        self.missing -= 1
        if self.missing:
            return None
        outcomes = tuple(each for each in self.outcomes if each is not None)
        return Reply(self.peer, _ok(self.request_id, AdoptOutcomes(outcomes)))


@dataclass(frozen=True, slots=True)
class _InBatch:
    """A waiting adopt that is one of an adoptMany's (its index there)."""

    batch: _Batch
    index: int


#: Who waits on an object's put or adopt to settle: (peer, request id) of a put or adopt, or one adopt of a batch.
_Waiter = tuple[bytes, int] | _InBatch


def bad_request(request_id: int, reason: str) -> StorageAnswer:
    return StorageAnswer(StorageReply(request_id, StorageStatus.BAD_REQUEST, reason))


def _ok(
    request_id: int, value: Any = None, payload: tuple[PayloadBuffer, ...] = (), in_parts: bool = False
) -> StorageAnswer:
    return StorageAnswer(StorageReply(request_id, StorageStatus.OK, "", value), payload, in_parts=in_parts)


@dataclass(frozen=True, slots=True)
class _Greeted:
    """A peer that said hello: the role it gave, a client's owner id, and (with CURVE) the key it came with."""

    role: str
    owner: bytes
    key: bytes | None
    cache_address: str = ""  #: a host cache's, where the caches of other hosts reach it (host_ledger.py)


NOT_FOUND = StorageStatus.NOT_FOUND

#: Roles that store and read any client's objects: the worker side runs every client's tasks (a host cache is the
#: worker side of its host).
WORKER_ROLES = frozenset({"worker", "processor", "offload-proxy", "cache"})


class StorageService:
    """Request handling over an `ObjectStore`: hello bookkeeping, validation, who may do what, then the operation.

    Isolation, secured or not: a client (role "client", owner id in its hello) stores objects under its own id
    only, and reads, deletes and clears only its own objects; nobody but the scheduler replaces another owner's
    object or clears another owner's objects; the worker side reads every object (it runs every client's tasks)
    and stores results for their clients. With CURVE (`key` given to `handle`), an owner id belongs to the first
    key that claims it, and `roles` (the authorised folder's view) decides which roles a key may take; a key
    that is revoked is refused on its next request.
    """

    def __init__(
        self,
        store: ObjectStore | None = None,
        max_greeted_peers: int = MAX_GREETED_PEERS,
        roles: PeerRoles | None = None,
        segment_directory: SegmentDirectory | None = None,
        cache: bool = False,
        client_owners: Callable[[bytes], frozenset[bytes]] | None = None,
    ) -> None:
        """`segment_directory`: what a hello's reply tells a peer of the store's segment directory (None: it has
        none; every object is then held in this process). `cache`: this is a host cache (host_cache/cache_rules.py):
        misses are fetched from upstream, puts stored there too. `client_owners` (a host cache's, with CURVE): the
        client ids its storage server bound to a client's key; a client here may claim only those (none without
        it), so that a key cannot read another client's results by claiming its id where that client never came."""
        self.store = store if store is not None else ObjectStore()
        self._segment_directory = segment_directory
        #: peer identity -> what it said in its hello; least recently active first.
        self._greeted: OrderedDict[bytes, _Greeted] = OrderedDict()
        self._max_greeted_peers = max_greeted_peers
        self._roles = roles
        self._client_owners = client_owners
        #: with CURVE: a client's owner id -> the key that first claimed it (until its objects are cleared)
        self._owner_keys: dict[bytes, bytes] = {}
        self.refusals = 0  #: requests refused for lack of rights (forged ids, foreign objects, revoked keys)
        #: (object id, generation) -> the puts and adopts waiting for that object to settle
        self._waiting_puts: dict[tuple[bytes, int], list[_Waiter]] = {}
        #: (object id, generation) -> (peer, request id, mapped: a getMapped) of the gets waiting for that spill file
        #: to be read back
        #: (peer, request id, getMapped, getInParts) of the gets waiting for a spill file's read
        self._waiting_gets: dict[tuple[bytes, int], list[tuple[bytes, int, bool, bool]]] = {}
        #: the objects being written that readers may follow, and what is to be sent to those readers
        self.writes = FollowedWrites()
        self._outgoing: list[Reply] = []
        #: the cache role's waiting reads, puts and exists, and its upstream work (None: a storage server)
        self.cache: CacheRole[WaitingRead, _Waiter] | None = CacheRole() if cache else None
        #: which host caches hold or fetch which object (a storage server's: the sources it names)
        self.ledger = HostLedger()
        #: the bytes sent and received, the copies of large objects sent, the host caches' reports (traffic.py)
        self.traffic = TrafficBook()
        #: turns for the host caches' large uploads (a storage server's: upload_admission.py)
        self.admission = UploadAdmission()
        #: the results host caches hold and will upload, and those lost with their holder (held_results.py)
        self.held: HeldResults[WaitingRead] = HeldResults()
        self._now = 0.0  #: the time of the request being handled (`act`'s `now`)
        #: a host cache's address -> the CURVE public key it serves with (its hello's key): told to a client that reads
        #: a result from it (host_ledger S5)
        self._cache_keys: OrderedDict[str, bytes] = OrderedDict()
        if cache:  # the cache's own fetcher stores what it fetched through the requests any peer makes
            self._greeted[FETCHER] = _Greeted("worker", b"", None)

    def role_of(self, peer: bytes) -> str | None:
        greeted = self._greeted.get(peer)
        return greeted.role if greeted is not None else None

    def take_outgoing(self) -> list[Reply]:
        """What is to be sent to the readers of objects being written since the last call (followed_writes.py)."""
        outgoing, self._outgoing = self._outgoing, []
        return outgoing

    def recover_writes(self, begins: Sequence[WriteBegin]) -> int:
        """The writes a previous server's peers began, found at start (followed_writes rule 6): each object not
        stored awaits its writer. How many."""
        recovered = 0
        for begin in begins:
            if begin.object_id and self.store.get(begin.object_id) is None:
                self.writes.recover(begin)
                recovered += 1
        return recovered

    def sweep_writes(self) -> None:
        """End the writes not heard of since the last sweep (a writer that died; followed_writes rule 4)."""
        self._send(self.writes.sweep())

    def _send(self, outgoing: list[Outgoing]) -> None:
        for peer, reply, piece in outgoing:
            self._outgoing.append(Reply(peer, StorageAnswer(reply, file_piece=piece)))

    def take_work(self) -> list[DiskWork]:
        """The disk work the requests handled so far call for (see `ObjectStore.take_work`)."""
        return self.store.take_work()

    def handle(
        self, peer: bytes, header: bytes, payload: Sequence[PayloadBuffer], key: bytes | None = None, now: float = 0.0
    ) -> StorageAnswer | None:
        """The answer to one request, or None when it waits on the disk (`write_finished`, `read_finished`), or for
        an upload's turn (upload_admission.py). `now`: the time, in seconds (monotonic)."""
        try:
            request = decode_storage_request(header)
        except DecodeError as error:
            # Cap'n Proto appends a native stack trace on further lines; the first line says what is wrong.
            return bad_request(0, f"undecodable request header: {str(error).splitlines()[0]}")
        return self.act(peer, request.request_id, request.operation, payload, key, now)

    def act(
        self,
        peer: bytes,
        request_id: int,
        operation: StorageOperation,
        payload: Sequence[PayloadBuffer] = (),
        key: bytes | None = None,
        now: float = 0.0,
    ) -> StorageAnswer | None:
        """The answer to one decoded request (`handle` after decoding; a host cache's fetcher calls it directly)."""
        self._now = now
        if isinstance(operation, StorageHello):
            return self._hello(peer, request_id, operation, payload, key)
        greeted = self._greeted.get(peer)
        if greeted is None:
            return StorageAnswer(StorageReply(request_id, StorageStatus.HELLO_REQUIRED, "say hello before any request"))
        if self._roles is not None and peer != FETCHER:  # the cache's own fetcher is no connection
            if key != greeted.key:
                return self._refused(request_id, "this identity said hello with another CURVE key")
            if not self._roles.roles_of(key or b""):
                self._greeted.pop(peer, None)
                return self._refused(request_id, f"authentication: {REVOKED_TEXT}")
        self._greeted.move_to_end(peer)
        if self.cache is not None and greeted.role == "client" and not isinstance(operation, CLIENT_AT_CACHE):
            return bad_request(request_id, CLIENT_AT_CACHE_TEXT)
        if isinstance(operation, Put):
            if operation.turn:
                return self._turn(peer, request_id, operation, payload, greeted)
            if operation.hold:
                return self._hold(peer, request_id, operation, payload, greeted)
            if operation.wanted:
                return self._wanted(request_id, operation, payload, greeted)
            return self._put(peer, request_id, operation, payload, greeted)
        if payload:
            name = _OPERATION_NAMES[type(operation)]
            return bad_request(request_id, f"{name} requests carry no payload, got {len(payload)} extra frame(s)")
        return self._operate(peer, request_id, operation, greeted)

    def _operate(
        self, peer: bytes, request_id: int, operation: StorageOperation, greeted: _Greeted
    ) -> StorageAnswer | None:
        """A request without payload, from a greeted peer."""
        if isinstance(operation, (Get, GetMapped, GetInParts)):
            mapped, in_parts = isinstance(operation, GetMapped), isinstance(operation, GetInParts)
            return self._get(peer, request_id, operation.object_id, greeted, mapped, in_parts)
        if isinstance(operation, Adopt):
            return self._adopt(peer, request_id, operation, greeted)
        if isinstance(operation, AdoptMany):
            return self._adopt_many(peer, request_id, operation, greeted)
        if isinstance(operation, WriteBegin):
            return self._write_begin(peer, request_id, operation, greeted)
        if isinstance(operation, WriteProgress):
            return self._write_progress(peer, request_id, operation)
        if isinstance(operation, SourceRequest):
            return self._source(request_id, operation, greeted)
        if isinstance(operation, HostReport):
            return self._host_report(request_id, operation, greeted)
        if isinstance(operation, Fates):
            return self._fates(request_id, operation, greeted)
        if isinstance(operation, ClientKey):
            return self._client_key(request_id, operation, greeted)
        if isinstance(operation, Exists) and self.cache is not None and peer != FETCHER:
            self.cache.check(operation.object_id, (peer, request_id))  # C5: the upstream's answer
            return None
        return self._execute(request_id, operation, greeted)

    def write_finished(self, object_id: bytes, generation: int, error: str | None) -> list[Reply]:
        """A spill file was written (`error` None) or could not be: the answers of the puts that waited for it."""
        refusal = self.store.write_finished(object_id, generation, error)
        if refusal is not None:
            waiting = self._waiting_puts.pop((object_id, generation), [])
            return _answers(waiting, StorageStatus.FULL, refusal.reason)
        return self._settled(object_id, generation)

    def segment_written(self, object_id: bytes, generation: int, error: str | None) -> list[Reply]:
        """A segment file was written and placed (`error` None), or could not be (the object stays in the server's
        memory): the answers of the puts that waited for it."""
        self.store.segment_written(object_id, generation, error)
        return self._settled(object_id, generation)

    def adopted(self, work: AdoptSegment, outcome: str | AdoptResult | None) -> list[Reply]:
        """The file of an adopt is in place (`outcome` None), was refused (a string says why), or was adopted before
        (ADOPTED_BEFORE: a request sent again for an object held already): the answers of the adopts that waited."""
        object_id, generation = work.object_id, work.generation
        settles = self.store.adopted(work, outcome)
        if isinstance(outcome, str):
            self._write_ended(object_id, f"its adopt was refused: {outcome}")
            waiting = self._waiting_puts.pop((object_id, generation), [])
            return _answers(waiting, StorageStatus.BAD_REQUEST, outcome)
        if settles != generation:  # a held object replaced by the file: answered once the new one settles
            moved = self._waiting_puts.pop((object_id, generation), [])
            self._waiting_puts.setdefault((object_id, settles), []).extend(moved)
        return self._settled(object_id, settles)

    def _settled(self, object_id: bytes, generation: int) -> list[Reply]:
        if not self.store.settled(object_id, generation):
            return []
        waiting: list[WaitingRead] = []
        if object_id in self.writes:  # stored: its followers get the rest, the reads that waited their answers
            pieces, waiting = self.writes.stored(object_id)
            self._send(pieces)
        puts = self._waiting_puts.pop((object_id, generation), [])
        if self.cache is not None:
            waiting += self.cache.fetch_ended(object_id)  # C2: a fetch's copy is stored
            uploads = [waiter for waiter in puts if isinstance(waiter, _InBatch) or waiter[0] != FETCHER]
            if uploads:  # C4: a peer's object is answered once the upstream holds it, or knows that this cache does
                stored = self.store.get(object_id)
                self.cache.upload(object_id, generation, uploads, stored.total_bytes if stored is not None else 0)
                puts = [waiter for waiter in puts if waiter not in uploads]
        self._answer_reads(object_id, waiting)
        # H3: a held result's upload, or a put of one lost (made again): its readers' answers leave with the put's, once
        # the shell placed the object's segment file (outgoing answers leave before the shell's disk work)
        return _answers(puts, StorageStatus.OK, "") + self._read_answers(object_id, self.held.stored(object_id))

    def _answer_reads(self, object_id: bytes, waiting: Sequence[WaitingRead]) -> None:
        """The reads that waited for the object, answered as reads of what is stored now."""
        self._outgoing += self._read_answers(object_id, waiting)

    def _read_answers(self, object_id: bytes, waiting: Sequence[WaitingRead]) -> list[Reply]:
        replies = []
        for read in waiting:
            greeted = self._greeted.get(read.peer)
            answer = None if greeted is None else self._get(
                read.peer, read.request_id, ObjectID(object_id), greeted, read.mapped, read.in_parts
            )  # fmt: skip
            if answer is not None:
                replies.append(Reply(read.peer, answer))
        return replies

    # ------------------------------------------------------------ turns for the host caches' uploads

    def admission_tick(self, now: float) -> None:
        """The turns the bound lets go by `now` (upload_admission A4); their answers are outgoing."""
        self._granted(self.admission.tick(now))

    def watched(self, peer: bytes) -> bool:
        """Whether the end of this peer's connection matters: it holds or asks for an upload's turn, or holds results
        not stored yet (the shell then remembers its connection)."""
        return self.admission.asked(peer) or self.held.holds(peer)

    def connections_ended(self, peers: list[bytes], now: float) -> list[bytes]:
        """The connections of `peers` ended: their turns and asks go (upload_admission A5), and the results they held
        and had not uploaded are lost (held_results H4; their readers wait on, for their tasks made again): which."""
        self._granted(self.admission.ended(peers, now))
        lost = self.held.ended(peers)
        self.ledger.forget(lost)  # nobody is sent to the holder that went
        return lost

    def _hold(
        self, peer_id: bytes, request_id: int, put: Put, payload: Sequence[PayloadBuffer], peer: _Greeted
    ) -> StorageAnswer:
        """A host cache holds a result and will upload it (held_results H1): answered once recorded."""
        if payload:
            return bad_request(request_id, f"a hold's put carries no payload, got {len(payload)} frame(s)")
        if peer.role != "cache" or self.cache is not None:
            return bad_request(request_id, "hold: only a host cache holds, and only its storage server records it")
        if not put.object_id:
            return bad_request(request_id, "hold with an empty object id")
        refusal = self._store_refusal(put.object_id, put.owner_id, peer, "hold")
        if refusal is not None:
            return self._refused(request_id, refusal)
        if self.store.get(put.object_id) is not None or put.object_id in self.writes:
            return _ok(request_id)  # stored (or being written) here already: nothing to wait for
        if not self.held.hold(
            put.object_id, put.owner_id, put.total_bytes, peer_id, peer.cache_address, tuple(put.piece_digests)
        ):
            reason = f"this server records at most {len(self.held)} results held by their hosts: upload it first"
            return StorageAnswer(StorageReply(request_id, StorageStatus.FULL, reason))
        if peer.cache_address:  # host_ledger S4: other hosts fetch it from the host that made it, from now on
            self.ledger.uploaded(put.object_id, peer.cache_address)
        return _ok(request_id)

    def _wanted(self, request_id: int, put: Put, payload: Sequence[PayloadBuffer], peer: _Greeted) -> StorageAnswer:
        """What of an object its host holds is wanted (held_results H8): whether a reader waits for it here; notFound
        when it is neither held nor stored (deleted)."""
        if payload:
            return bad_request(request_id, f"a wanted put carries no payload, got {len(payload)} frame(s)")
        if peer.role != "cache" or self.cache is not None:
            return bad_request(request_id, "wanted: only a host cache asks, and only its storage server answers")
        held = self.held.get(put.object_id)
        if held is not None:
            return _ok(request_id, bool(held.reads))
        if self.store.get(put.object_id) is not None or put.object_id in self.writes:
            return _ok(request_id, False)
        reason = f"object {put.object_id.hex()} is neither held nor stored here: it was deleted"
        return StorageAnswer(StorageReply(request_id, NOT_FOUND, reason))

    def _fates(self, request_id: int, fates: Fates, peer: _Greeted) -> StorageAnswer:
        """What became of the objects the scheduler asks about (held_results H6)."""
        if peer.role != "scheduler":
            return self._refused(request_id, f"a {peer.role or 'peer'} does not ask for fates: the scheduler does")
        return _ok(request_id, ObjectFates(tuple(self._fate(object_id) for object_id in fates.object_ids)))

    def _fate(self, object_id: bytes) -> int:
        if self.store.get(object_id) is not None:
            return NOTHING_TO_WAIT_FOR
        if object_id in self.writes:
            return 0
        return self.held.fate(object_id)

    def _turn(
        self, peer_id: bytes, request_id: int, put: Put, payload: Sequence[PayloadBuffer], peer: _Greeted
    ) -> StorageAnswer | None:
        """A host cache asks for its turn to upload an object (upload_admission A1): answered once granted."""
        if payload:
            return bad_request(request_id, f"a turn's put carries no payload, got {len(payload)} frame(s)")
        if peer.role != "cache" or self.cache is not None:
            return bad_request(request_id, "turn: only a host cache asks, and only its storage server answers")
        self._granted(self.admission.ask(peer_id, request_id, put.object_id, put.total_bytes, self._now))
        return None

    def _granted(self, grants: list[Grant]) -> None:
        for grant in grants:
            self._outgoing.append(Reply(grant.peer, _ok(grant.request_id)))

    # ------------------------------------------------------------ a host cache's upstream (cache_rules.py)

    def fetch_failed(self, object_id: bytes, reason: str) -> None:
        """C3: the fetch of the object failed: every read waiting or following it is told why."""
        assert self.cache is not None
        self._write_ended(object_id, reason)
        writing = self.writes.get(object_id)
        if writing is not None and writing.writer == FETCHER:
            self.writes.forget(object_id)  # a later read starts a new fetch
        not_found = f"object {ObjectID(object_id).hex()} could not be fetched: {reason}"
        for read in self.cache.fetch_ended(object_id):
            self._outgoing.append(Reply(read.peer, StorageAnswer(StorageReply(read.request_id, NOT_FOUND, not_found))))

    def uploaded(self, object_id: bytes, generation: int, status: StorageStatus, reason: str) -> list[Reply]:
        """C4: the upstream's answer to an upload, for the puts and adopts that waited for it."""
        assert self.cache is not None
        return _answers(self.cache.uploaded(object_id, generation), status, reason)

    def held_answer(self, object_id: bytes, generation: int, recorded: bool) -> list[Reply]:
        """C4: the upstream answered a hold: recorded, the puts and adopts that waited for it are answered ok (the
        upload goes on); not, they wait for the upload."""
        assert self.cache is not None
        return _answers(self.cache.held(object_id, generation, recorded), StorageStatus.OK, "")

    def checked(self, object_id: bytes, exists: bool | None, reason: str = "") -> list[Reply]:
        """C5: the upstream's answer to an exists (None: it could not be asked, `reason` says why); a copy of an object
        it no longer holds is dropped."""
        assert self.cache is not None
        if exists is False and self.store.get(object_id) is not None:
            self.store.delete([object_id])
        askers = self.cache.checked(object_id)
        if exists is None:
            return _answers(askers, StorageStatus.NOT_FOUND, reason)
        return [Reply(peer, _ok(request_id, exists)) for peer, request_id in _pairs(askers)]

    def _write_ended(self, object_id: bytes, why: str) -> None:
        if object_id in self.writes:
            self._send(self.writes.end(object_id, why))

    def read_finished(
        self,
        object_id: bytes,
        generation: int,
        frames: Sequence[PayloadBuffer] | None,
        problem: str = "",
        in_segment: bool = False,
    ) -> list[Reply]:
        """A spill file was read back (`frames`; `in_segment`: into a segment file too), or found torn or unreadable
        (`problem`): the answers of the gets that waited. A get that waited is answered with what it asked for even if
        a delete came meanwhile (a getMapped with the bytes then: its segment file is gone)."""
        self.store.read_finished(object_id, generation, frames, in_segment)
        waiting = self._waiting_gets.pop((object_id, generation), [])
        if frames is None:
            reason = f"object {object_id.hex()} is lost: its spill file {problem}"
            return [
                Reply(peer, StorageAnswer(StorageReply(rid, StorageStatus.NOT_FOUND, reason)))
                for peer, rid, _, _ in waiting
            ]
        total = sum(len(frame) for frame in frames)
        stored = self.store.get(object_id)
        placed = stored is not None and stored.generation == generation and stored.segment is Segment.READY
        as_bytes = tuple(frames)
        for _ in [waiter for waiter in waiting if not (waiter[2] and placed)]:
            self.traffic.copy_sent(object_id, total)
        return [
            Reply(
                peer, _ok(rid, MappedSize(total)) if mapped and placed else _ok(rid, ObjectSize(total), as_bytes, parts)
            )
            for peer, rid, mapped, parts in waiting
        ]

    def _hello(
        self, peer: bytes, request_id: int, hello: StorageHello, payload: Sequence[PayloadBuffer], key: bytes | None
    ) -> StorageAnswer:
        if payload:
            return bad_request(request_id, f"hello requests carry no payload, got {len(payload)} extra frame(s)")
        # Storage moves opaque bytes, so only the protocol version must match: passing our own Python
        # version makes `incompatibility` check the protocol alone, with the same wording as everywhere.
        reason = incompatibility(hello.protocol_version, hello.python_version, None, hello.role or "peer")
        if reason is None:
            reason = self._hello_refusal(hello, key)
        if reason is not None:
            self._greeted.pop(peer, None)
            return StorageAnswer(StorageReply(request_id, StorageStatus.REFUSED, reason))
        if hello.role == "client" and key is not None:
            self._owner_keys.setdefault(hello.owner_id, key)
        self._greeted[peer] = _Greeted(hello.role, hello.owner_id, key, hello.cache_address)
        self._greeted.move_to_end(peer)
        if hello.role == "cache" and hello.cache_address and key is not None:
            self._cache_keys[hello.cache_address] = key
            self._cache_keys.move_to_end(hello.cache_address)
            while len(self._cache_keys) > self._max_greeted_peers:
                self._cache_keys.popitem(last=False)
        while len(self._greeted) > self._max_greeted_peers:
            self._greeted.popitem(last=False)
        return _ok(request_id, self._segment_directory)

    def _hello_refusal(self, hello: StorageHello, key: bytes | None) -> str | None:
        if hello.role == "client" and not hello.owner_id:
            return "a client's hello must carry its client id (the owner of the objects it stores)"
        if self.cache is not None and hello.role not in WORKER_ROLES | {"readiness-probe", "client"}:
            return f"a host cache serves the workers of its host, not a {hello.role or 'peer'}: use the storage server"
        if self._roles is None:
            return None
        if key is None:
            return "refused: this connection is not authenticated"
        refusal = storage_refusal(self._roles.roles_of(key), hello.role)
        if refusal is not None:
            return refusal
        owner_key = self._owner_keys.get(hello.owner_id) if hello.role == "client" else None
        if owner_key is not None and owner_key != key:
            return "refused: this client id belongs to another CURVE key"
        if self.cache is not None and hello.role == "client":
            owners = self._client_owners(key) if self._client_owners is not None else frozenset()
            if bytes(hello.owner_id) not in owners:
                return "refused: the storage server has not bound this client id to this CURVE key"
        return None

    def _put(
        self, peer_id: bytes, request_id: int, put: Put, payload: Sequence[PayloadBuffer], peer: _Greeted
    ) -> StorageAnswer | None:
        if not put.object_id:
            return bad_request(request_id, "put with an empty object id")
        if peer.role == "cache" and self.cache is None:  # the upload a turn was given for (upload_admission A2)
            self._granted(self.admission.done(peer_id, put.object_id, self._now))
        received = sum(len(frame) for frame in payload)
        if received != put.total_bytes:
            return bad_request(
                request_id,
                f"put of object {put.object_id.hex()}: header says {put.total_bytes} bytes, "
                f"the {len(payload)} payload frame(s) add up to {received}",
            )
        if put.frame_bytes:  # pieces of larger frames (a CURVE connection's): the object's frames again
            frames = joined_pieces(payload, put.frame_bytes)
            if frames is None:
                return bad_request(
                    request_id,
                    f"put of object {put.object_id.hex()}: the {len(payload)} payload frame(s) are not pieces of "
                    f"frames of {list(put.frame_bytes)} bytes",
                )
            payload = frames
        refusal = self._store_refusal(put.object_id, put.owner_id, peer, "put")
        if refusal is not None:
            return self._refused(request_id, refusal)
        stored = self.store.put(put.object_id, put.owner_id, payload, put.name)
        if isinstance(stored, Refusal):
            if peer.role == "cache":
                self._held_refused(put.object_id, stored.reason)
            return _full(request_id, stored)
        if peer.role == "cache" and peer.cache_address and self.cache is None:  # host_ledger S4: a host's result
            self.ledger.uploaded(put.object_id, peer.cache_address)
        if not self.store.settled(put.object_id, stored.generation):  # answered once its files are written
            self._waiting_puts.setdefault((put.object_id, stored.generation), []).append((peer_id, request_id))
            return None
        if self.cache is not None:
            self._outgoing += self._settled_here(put.object_id, stored.generation, peer_id, request_id)
            return None
        self._answer_reads(put.object_id, self.held.stored(put.object_id))  # H3
        return _ok(request_id)

    def _held_refused(self, object_id: bytes, why: str) -> None:
        """H3: a held result's upload was refused: its readers are told why it is not stored."""
        reason = f"object {object_id.hex()} was not stored: its upload was refused: {why}"
        for read in self.held.refused(object_id):
            self._outgoing.append(Reply(read.peer, StorageAnswer(StorageReply(read.request_id, NOT_FOUND, reason))))

    def _settled_here(self, object_id: bytes, generation: int, peer_id: bytes, request_id: int) -> list[Reply]:
        """A host cache's put that settled at once: answered as `_settled` answers those that waited."""
        self._waiting_puts.setdefault((object_id, generation), []).append((peer_id, request_id))
        return self._settled(object_id, generation)

    def _adopt(self, peer_id: bytes, request_id: int, adopt: Adopt, peer: _Greeted) -> StorageAnswer | None:
        if self._segment_directory is None or not self._segment_directory.path:
            return bad_request(request_id, "this server has no segment directory: store objects with put")
        outcome = self._adopt_one(adopt, peer)
        if isinstance(outcome, AdoptOutcome):
            return StorageAnswer(StorageReply(request_id, outcome.status, outcome.reason))
        # answered once its file is in place (the shell does it before the next request) and its spill file written
        self._waiting_puts.setdefault((adopt.object_id, outcome), []).append((peer_id, request_id))
        return None

    def _adopt_many(self, peer_id: bytes, request_id: int, many: AdoptMany, peer: _Greeted) -> StorageAnswer | None:
        """Each adopt as `_adopt` carries it out; one answer when all are settled, one outcome each in their order."""
        if self._segment_directory is None or not self._segment_directory.path:
            return bad_request(request_id, "this server has no segment directory: store objects with put")
        if not many.adopts or len(many.adopts) > MAX_ADOPTS_PER_REQUEST:
            return bad_request(request_id, f"adoptMany carries 1 to {MAX_ADOPTS_PER_REQUEST} adopts, got "
                                           f"{len(many.adopts)}")  # fmt: skip
        batch = _Batch(peer_id, request_id, [None] * len(many.adopts), len(many.adopts))
        answer = None
        for index, adopt in enumerate(many.adopts):
            outcome = self._adopt_one(adopt, peer)
            if isinstance(outcome, AdoptOutcome):
                answer = batch.settle(index, outcome)
            else:
                self._waiting_puts.setdefault((adopt.object_id, outcome), []).append(_InBatch(batch, index))
        return None if answer is None else answer.answer

    def _adopt_one(self, adopt: Adopt, peer: _Greeted) -> AdoptOutcome | int:
        """One adopt's outcome when it is answered at once (refused), else the generation whose settling answers it
        (its file is renamed into place by the shell before the next request, and its spill file written)."""
        if not adopt.object_id:
            return AdoptOutcome(StorageStatus.BAD_REQUEST, "adopt with an empty object id")
        if "/" in adopt.file_name or not adopt.file_name.endswith(".put"):
            return AdoptOutcome(StorageStatus.BAD_REQUEST, f"adopt: {adopt.file_name!r} is not the name of a .put file")
        refusal = self._store_refusal(adopt.object_id, adopt.owner_id, peer, "adopt")
        if refusal is not None:
            self.store.refuse_adopt(adopt.file_name)
            self.refusals += 1
            return AdoptOutcome(StorageStatus.REFUSED, refusal)
        writing = self.writes.get(adopt.object_id)
        if writing is not None and writing.ended:  # its readers were told it would not be stored (followed_writes 4)
            self.writes.forget(adopt.object_id)
            self.store.refuse_adopt(adopt.file_name)
            reason = f"object {adopt.object_id.hex()} was not stored: {writing.ended}"
            return AdoptOutcome(StorageStatus.NOT_FOUND, reason)
        stored = self.store.adopt(adopt.object_id, adopt.owner_id, adopt.total_bytes, adopt.file_name, adopt.name)
        if isinstance(stored, Refusal):
            self.store.refuse_adopt(adopt.file_name)
            self._write_ended(adopt.object_id, f"no room: {stored.reason}")
            return AdoptOutcome(StorageStatus.FULL, stored.reason)
        if peer.role == "cache" and peer.cache_address and self.cache is None:  # host_ledger S4
            self.ledger.uploaded(adopt.object_id, peer.cache_address)
        return stored.generation

    def _write_begin(self, peer_id: bytes, request_id: int, begin: WriteBegin, peer: _Greeted) -> StorageAnswer:
        """A peer of the server's host starts writing an object's segment file (followed_writes.py)."""
        if self.cache is not None and peer_id != FETCHER:
            return bad_request(request_id, C6_REFUSAL)
        if self._segment_directory is None or not self._segment_directory.path:
            return bad_request(request_id, "this server has no segment directory: store objects with put")
        if not begin.object_id or "/" in begin.file_name or not begin.file_name.endswith(".put"):
            return bad_request(request_id, f"writeBegin: no object id, or {begin.file_name!r} is not a .put file")
        refusal = self._store_refusal(begin.object_id, begin.owner_id, peer, "writeBegin")
        if refusal is not None:
            return self._refused(request_id, refusal)
        if self.store.get(begin.object_id) is not None:
            return bad_request(request_id, f"object {begin.object_id.hex()} is stored already: put it instead")
        problem = self.writes.begin(begin, peer_id)
        if problem is not None:
            return bad_request(request_id, problem)
        if self.cache is not None:  # C2: the reads that waited for the fetch follow it
            for read in self.cache.fetch_began(begin.object_id):
                self._send(self.writes.follow(begin.object_id, read.peer, read.request_id, read.mapped, read.in_parts))
        return _ok(request_id)

    def _write_progress(self, peer_id: bytes, request_id: int, progress: WriteProgress) -> StorageAnswer:
        writing = self.writes.get(progress.object_id)
        if writing is None or writing.writer != peer_id:
            return StorageAnswer(StorageReply(request_id, StorageStatus.NOT_FOUND, "no such write of this peer's"))
        if writing.ended:  # the writer may stop: its adopt will be refused
            reason = f"object {progress.object_id.hex()} will not be stored: {writing.ended}"
            return StorageAnswer(StorageReply(request_id, StorageStatus.NOT_FOUND, reason))
        self._send(self.writes.progress(progress.object_id, peer_id, progress.written_bytes, progress.failed))
        return _ok(request_id)

    def _store_refusal(self, object_id: ObjectID, owner_id: bytes, peer: _Greeted, verb: str) -> str | None:
        if peer.role == "client" and owner_id != peer.owner:
            return f"{verb} of object {object_id.hex()}: a client stores under its own id"
        if peer.role not in ("client", "scheduler") and peer.role not in WORKER_ROLES:
            return f"a {peer.role or 'peer'} does not store objects"
        existing = self.store.get(object_id)
        if existing is not None and existing.owner_id != owner_id and peer.role != "scheduler":
            return f"object {object_id.hex()} belongs to another owner"
        return None

    def _get(
        self, peer_id: bytes, request_id: int, object_id: ObjectID, peer: _Greeted, mapped: bool = False,
        in_parts: bool = False,
    ) -> StorageAnswer | None:  # fmt: skip
        stored = self.store.get(object_id)
        writing = self.writes.get(object_id) if stored is None else None
        if writing is not None and self._may_read(peer, writing.begin.owner_id):
            if writing.ended:  # the reason its readers were given (followed_writes rule 4)
                reason = f"object {object_id.hex()} was not stored: {writing.ended}"
                return StorageAnswer(StorageReply(request_id, StorageStatus.NOT_FOUND, reason))
            self._send(self.writes.follow(object_id, peer_id, request_id, mapped, in_parts))
            if not mapped:
                self.traffic.copy_sent(object_id, writing.begin.total_bytes)
            return None  # answered as the write goes on, or once it is stored
        held = self.held.get(object_id) if stored is None and writing is None else None
        if held is not None and self._may_read(peer, held.owner_id):  # H2: answered once its upload is stored
            if self.held.wait(object_id, WaitingRead(peer_id, request_id, mapped, in_parts)):
                self.admission.ahead(object_id)  # upload_admission A6
            return None
        if stored is None and self.cache is not None and peer_id != FETCHER and self._waits_for_fetch(peer, object_id):
            self.cache.miss(object_id, WaitingRead(peer_id, request_id, mapped, in_parts))  # C1: fetched from upstream
            return None
        if stored is None or not self._may_read(peer, stored.owner_id):
            # a foreign object is "not stored" to a client: its id must not be confirmed either
            return StorageAnswer(StorageReply(request_id, StorageStatus.NOT_FOUND, _not_found(object_id)))
        if stored.frames is not None:
            self.traffic.copy_sent(object_id, stored.total_bytes)
            return _ok(request_id, ObjectSize(stored.total_bytes), stored.frames, in_parts)
        if stored.segment is Segment.READY:
            if mapped:
                return _ok(request_id, MappedSize(stored.total_bytes))
            self.traffic.copy_sent(object_id, stored.total_bytes)
            return StorageAnswer(
                StorageReply(request_id, StorageStatus.OK, "", ObjectSize(stored.total_bytes)), (), object_id, in_parts
            )
        reading = self.store.read_back(object_id)
        # an object neither held here nor in a segment file is on disk only (an adopt's file is placed by the shell
        # before the next request is handled)
        assert reading is not None, f"object {object_id.hex()} is {stored.residence} with segment {stored.segment}"
        self._waiting_gets.setdefault(reading, []).append((peer_id, request_id, mapped, in_parts))
        return None

    def _source(self, request_id: int, request: SourceRequest, peer: _Greeted) -> StorageAnswer:
        """Where a host cache fetches an object from (host_ledger.py): another host's cache, with the digests of the
        object's pieces (the shell takes them), or this server ("")."""
        if self.cache is not None or not (peer.cache_address or peer.role == "client"):
            return bad_request(
                request_id, "source: only a host cache or a client asks, and only a storage server answers"
            )  # fmt: skip
        if not peer.cache_address:
            return self._client_source(request_id, request.object_id, peer)
        stored = self.store.get(request.object_id)
        settled = stored is not None and self.store.settled(request.object_id, stored.generation)
        source = self.ledger.source(request.object_id, peer.cache_address, request.failed)
        # held by its host (H1), its upload not stored yet or its files still being written (the hold ends once they
        # are, H3): its holder's digests are its own
        holding = None if settled else self.held.get(request.object_id)
        if holding is not None and source and holding.piece_digests:
            return _ok(request_id, ObjectSource(source, holding.piece_digests))
        held = stored is not None and (stored.frames is not None or stored.segment is Segment.READY)
        if stored is None or not settled or not source or not held:
            return _ok(request_id, ObjectSource())
        segment = request.object_id if stored.frames is None else b""
        reply = StorageReply(request_id, StorageStatus.OK, "", ObjectSource(source))
        return StorageAnswer(reply, stored.frames or (), segment, digests=True)

    def _client_source(self, request_id: int, object_id: bytes, peer: _Greeted) -> StorageAnswer:
        """Where a client reads a large result of its own from (host_ledger S5): the host cache that holds it, the key
        it serves with and the digests of the object's pieces (the shell takes them from the stored copy), or nowhere
        ("": from this server). Held (H1) or stored here alike; nothing is recorded."""
        nowhere = _ok(request_id, ObjectSource())
        stored = self.store.peek(object_id)
        settled = stored is not None and self.store.settled(object_id, stored.generation)
        holding = None if settled else self.held.get(object_id)  # as in `_source`
        if holding is not None:
            holder = self.ledger.holder(object_id)
            greeted = self._greeted.get(holding.holder)
            if not holding.holder or not holder or not holding.piece_digests or greeted is None:
                return nowhere  # lost with its holder (H4): its readers wait here for it made again
            if not self._may_read(peer, holding.owner_id):
                return nowhere
            key = self._cache_keys.get(holder, b"")
            if self._roles is not None and not key:
                return nowhere
            return _ok(request_id, ObjectSource(holder, holding.piece_digests, key.decode()))
        if stored is None or not self._may_read(peer, stored.owner_id):
            return nowhere
        in_memory = stored.frames is not None or stored.segment is Segment.READY
        holder = self.ledger.holder(object_id) if settled and in_memory else ""
        key = self._cache_keys.get(holder, b"")
        if not holder or (self._roles is not None and not key):
            return nowhere
        segment = object_id if stored.frames is None else b""
        reply = StorageReply(request_id, StorageStatus.OK, "", ObjectSource(holder, (), key.decode()))
        return StorageAnswer(reply, stored.frames or (), segment, digests=True)

    def _client_key(self, request_id: int, request: ClientKey, peer: _Greeted) -> StorageAnswer:
        """Whether a host cache lets a peer with this public key in as a client, and which client ids it may claim
        there: those bound here to that key (its clients' sessions); refused when the key is not a client's."""
        if peer.role != "cache" or self.cache is not None:
            return bad_request(request_id, "clientKey: only a host cache asks, and only its storage server answers")
        key = request.public_key.encode()
        if self._roles is not None and storage_refusal(self._roles.roles_of(key), "client") is not None:
            return StorageAnswer(StorageReply(request_id, StorageStatus.REFUSED, "not a client's key"))
        owners = tuple(owner for owner, owner_key in self._owner_keys.items() if owner_key == key)
        return _ok(request_id, KeyOwners(owners))

    def _host_report(self, request_id: int, report: HostReport, peer: _Greeted) -> StorageAnswer:
        """What a host cache holds and moves (traffic.py T3): for the info's traffic."""
        if peer.role != "cache" or self.cache is not None:
            return bad_request(request_id, "hostReport: only a host cache reports, and only to its storage server")
        self.traffic.reported(peer.cache_address, report)
        return _ok(request_id)

    def _describe(self, object_id: bytes) -> tuple[int, str] | None:
        """A stored object's size and name, for the traffic's view (a look that is no use of it)."""
        stored = self.store.peek(object_id)
        return None if stored is None else (stored.total_bytes, stored.name)

    def _waits_for_fetch(self, peer: _Greeted, object_id: bytes) -> bool:
        """C1: a read from this host waits for its fetch; one from another host's cache only for a fetch under way (it
        asks no fetch: its own host fetches from elsewhere when this one has nothing)."""
        assert self.cache is not None
        if peer.role == "cache":
            return self.cache.is_fetching(object_id)
        return peer.role in WORKER_ROLES

    def _execute(self, request_id: int, operation: StorageOperation, peer: _Greeted) -> StorageAnswer:
        store = self.store
        if isinstance(operation, Exists):
            stored = store.get(operation.object_id)
            if stored is None and operation.object_id in self.writes:  # announced: a read waits for it
                writing = self.writes.get(operation.object_id)
                return _ok(request_id, writing is not None and self._may_read(peer, writing.begin.owner_id))
            held = self.held.get(operation.object_id) if stored is None else None
            if held is not None:  # held by its host, or lost and made again (held_results H1): a read waits for it
                return _ok(request_id, self._may_read(peer, held.owner_id))
            return _ok(request_id, stored is not None and self._may_read(peer, stored.owner_id))
        if isinstance(operation, Delete):
            if peer.role in WORKER_ROLES or peer.role == "readiness-probe":
                return self._refused(request_id, f"a {peer.role} does not delete objects")
            if peer.role == "client":
                mine = [i for i in operation.object_ids if (o := store.get(i)) is None or o.owner_id == peer.owner]
                self.refusals += len(operation.object_ids) - len(mine)
                ended = self._end_deleted_writes(mine, peer.owner)
                ended |= self._forget_held(mine)
                self.ledger.forget(mine)
                self.traffic.forget(mine)
                return _ok(request_id, len(ended) + store.delete(mine))
            ended = self._end_deleted_writes(operation.object_ids, None)
            ended |= self._forget_held(operation.object_ids)
            self.ledger.forget(operation.object_ids)
            self.traffic.forget(operation.object_ids)
            return _ok(request_id, len(ended) + store.delete(operation.object_ids))
        if isinstance(operation, DeleteOwner):
            if peer.role != "scheduler" and not (peer.role == "client" and operation.owner_id == peer.owner):
                return self._refused(request_id, "only the scheduler clears another owner's objects")
            if self._owner_keys.get(operation.owner_id) is not None and peer.role == "scheduler":
                del self._owner_keys[operation.owner_id]  # the client left: its id may be claimed again
            for object_id in self.writes.owned_by(operation.owner_id):
                self._write_ended(object_id, "its owner's objects were deleted while it was being written")
            self._forget_held(self.held.owned_by(operation.owner_id))
            return _ok(request_id, store.delete_owner(operation.owner_id))
        if isinstance(operation, Info):
            return _ok(request_id, dataclasses.replace(store.info(), traffic=self.traffic.view(self._describe)))
        raise AssertionError(f"unhandled storage operation {operation!r}")  # hello, put and get are handled earlier

    def _end_deleted_writes(self, object_ids: Sequence[bytes], owner: bytes | None) -> set[bytes]:
        """Deleted while being written (followed_writes rule 4): `owner`, a client's, ends only its own. The writes
        that ended and whose object is not stored yet: each counts as an object deleted (it was announced); one
        stored already (its write's end not yet heard) is counted once, by the store's delete."""
        ended = set()
        for object_id in object_ids:
            writing = self.writes.get(object_id)
            if writing is not None and not writing.ended and (owner is None or writing.begin.owner_id == owner):
                self._write_ended(object_id, "it was deleted while it was being written")
                if self.store.get(object_id) is None:
                    ended.add(object_id)
        return ended

    def _forget_held(self, object_ids: Sequence[bytes]) -> set[bytes]:
        """Deleted while held by their host, or lost (held_results H5): their readers are told; the ones not stored,
        each counted as an object deleted."""
        forgotten = {bytes(object_id) for object_id in object_ids if bytes(object_id) in self.held}
        for object_id in sorted(forgotten):
            reason = f"object {object_id.hex()} was deleted before its host's upload of it was stored"
            for read in self.held.forget([object_id]):
                self._outgoing.append(Reply(read.peer, StorageAnswer(StorageReply(read.request_id, NOT_FOUND, reason))))
        return {object_id for object_id in forgotten if self.store.get(object_id) is None}

    @staticmethod
    def _may_read(peer: _Greeted, owner: bytes) -> bool:
        if peer.role == "client":
            return owner in (peer.owner, NO_OWNER)
        return peer.role == "scheduler" or peer.role in WORKER_ROLES

    def _refused(self, request_id: int, reason: str) -> StorageAnswer:
        self.refusals += 1
        return StorageAnswer(StorageReply(request_id, StorageStatus.REFUSED, reason))


def _answers(waiting: list[_Waiter], status: StorageStatus, reason: str) -> list[Reply]:
    """The replies to what waited on one object: a put's or an adopt's own, or its batch's once complete."""
    replies = []
    for waiter in waiting:
        if isinstance(waiter, _InBatch):
            reply = waiter.batch.settle(waiter.index, AdoptOutcome(status, reason))
            if reply is not None:
                replies.append(reply)
        else:
            peer, request_id = waiter
            replies.append(Reply(peer, StorageAnswer(StorageReply(request_id, status, reason))))
    return replies


def _pairs(waiting: list[_Waiter]) -> list[tuple[bytes, int]]:
    return [waiter for waiter in waiting if not isinstance(waiter, _InBatch)]


def _full(request_id: int, refusal: Refusal) -> StorageAnswer:
    return StorageAnswer(StorageReply(request_id, StorageStatus.FULL, refusal.reason))


def _not_found(object_id: ObjectID) -> str:
    return f"object {object_id.hex()} is not stored"
