"""A client reads a large result from the host that made it (docs/architecture.md, "Results read from their host").

A result of 1 MiB or more made on a host with a host cache is held there (cache rule C4) and uploaded to the storage
server in the background; read at the storage server, it crosses the storage host's link twice (its upload, then the
read) and the read waits for the upload. So before reading a result the client asks its storage server where it is
(`source`, host_ledger S5): the host cache that holds it, the key it serves with and the digests of its pieces. It then
reads it from that cache in parts, on connections kept per holder (one per result read at once: the reads of
read_ahead.py and eager_reads.py overlap there as they do at the storage server), checking each piece against its
digest as it comes (`CheckedSource`), and falls back to the storage server when the holder cannot be reached within
`CONNECT_SECONDS` (a laptop off the workers' network, a firewall, a key the cache does not let in: no handshake),
refuses, answers notFound (evicted), stays silent for the storage timeout (silence, not the total, is bounded) or sends
a piece that does not match: said once per host in the log, and that host not tried again by this client; a client
that reached no holder and gave up UNREACHED_HOSTS of them (a laptop off the workers' network) tries no holder more,
said once. Nothing is
taken from a piece that did not match: the value is made only once every piece was checked. A storage server that
answers no client's `source` (an older one) is not asked again, and one that named no usable holder for QUIET_AFTER
reads in a row (no host caches: one machine; or none the client reaches) is asked before one read in QUIET_AFTER only,
since each ask is a round trip over the client's link.

`SourceChoice` is the pure part: whether to ask, which holder an answer names, which hosts were given up.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from scaler.errors import MissingObjects, ObjectStorageException
from scaler.io.sockets import TransportSecurity
from scaler.object_storage.client_core import PieceMismatch, SourcesUnknown
from scaler.protocol.ids import ObjectID
from scaler.protocol.storage_messages import DIGEST_BYTES, ObjectSource, SourceRequest, piece_lengths
from scaler.security.curve import CurveSecurity

if TYPE_CHECKING:
    from scaler.object_storage.connection import ObjectInParts, ObjectStorageConnection

logger = logging.getLogger(__name__)

T = TypeVar("T")

#: After this many reads in a row for which the storage server named no holder (a deployment without host caches, or
#: a client that reaches none of them), a client asks only before every this-many-th read: each ask is a round trip
#: over the client's link, which a laptop's makes long.
QUIET_AFTER = 8

#: How long a client waits for a holder's connection (and its handshake) before it reads from the storage server
#: instead: paid at most once per host, by a client that cannot reach it.
CONNECT_SECONDS = 2.0

#: A client that read nothing from any holder and gave up this many of them reads every result at the storage server
#: from then on: a laptop off the workers' network would otherwise pay CONNECT_SECONDS once per host of a large
#: cluster.
UNREACHED_HOSTS = 2


class SourceChoice:
    """Where a client reads a result from (pure). `secured`: the client's connections use CURVE (then a holder is
    read only with the key it serves with)."""

    def __init__(self, secured: bool) -> None:
        self._secured = secured
        self.asks = True  #: the storage server answers a client's `source` (until it says it does not)
        self._given_up: set[str] = set()  #: holders this client reads nothing more from
        self._reached = False  #: a read from a holder ended well (the client reaches the workers' hosts)
        self._nowhere = 0  #: reads in a row for which no holder was named (or none usable)
        self._skipped = 0  #: reads not asked about since the last ask, once quiet

    def should_ask(self) -> bool:
        """Whether to ask the storage server where the next result is: always, but after QUIET_AFTER reads in a row
        with no holder named, only before every QUIET_AFTER-th read."""
        if not self.asks:
            return False
        if self._nowhere < QUIET_AFTER:
            return True
        self._skipped += 1
        if self._skipped < QUIET_AFTER:
            return False
        self._skipped = 0
        return True

    def holder(self, source: Any) -> str:
        """The holder the storage server's answer names to read from; "": the storage server."""
        usable = isinstance(source, ObjectSource) and bool(source.address and source.piece_digests)
        if usable and (source.address in self._given_up or (self._secured and not source.server_key)):
            usable = False
        self._nowhere = 0 if usable else self._nowhere + 1
        return source.address if usable else ""

    def unanswered(self) -> None:
        """The storage server answers no client's `source`: reads go there, as before."""
        self.asks = False

    def reached(self) -> None:
        """A read from a holder ended well."""
        self._reached = True

    def failed(self, address: str) -> bool:
        """Reading from `address` failed: it is not tried again; after UNREACHED_HOSTS such hosts and none reached, no
        holder is (`asks` turns False). True the first time for that address (to say so in the log)."""
        first = address not in self._given_up
        self._given_up.add(address)
        if not self._reached and len(self._given_up) >= UNREACHED_HOSTS:
            self.asks = False
        return first


class CheckedSource:
    """A `serializer.FrameSource` over an object read in parts from a holder, checking each piece (the object's frames
    cut as `wire_pieces` cuts them) against its digest as its last byte is read: PieceMismatch at the first that does
    not match, so the bytes of a wrong piece never make a value (a value is made only once every byte was read)."""

    def __init__(self, source: ObjectInParts, digests: Sequence[bytes]) -> None:
        self._source = source
        self.frame_bytes = tuple(source.frame_bytes)
        self._pieces = piece_lengths(self.frame_bytes)
        if len(digests) != len(self._pieces):
            raise PieceMismatch(f"the holder's object has {len(self._pieces)} pieces, {len(digests)} digests named")
        self._digests = list(digests)
        self._index = 0
        self._left = self._pieces[0] if self._pieces else 0
        self._hash = hashlib.blake2b(digest_size=DIGEST_BYTES)
        self._skip_empty()

    @property
    def checked(self) -> bool:
        """Every piece came and matched."""
        return self._index == len(self._pieces)

    def readinto(self, view: memoryview) -> int:
        count = self._source.readinto(view)
        if count == 0:
            if not self.checked:
                raise PieceMismatch(f"the holder sent {self._index} of the object's {len(self._pieces)} pieces")
            return 0
        data = view[:count]
        while len(data):
            taken = min(self._left, len(data))
            self._hash.update(data[:taken])
            data = data[taken:]
            self._left -= taken
            if self._left == 0:
                self._piece_ended()
        return count

    def _piece_ended(self) -> None:
        if self._index >= len(self._pieces) or self._hash.digest() != self._digests[self._index]:
            raise PieceMismatch(f"piece {self._index} of the object does not match its digest")
        self._index += 1
        self._hash = hashlib.blake2b(digest_size=DIGEST_BYTES)
        self._left = self._pieces[self._index] if self._index < len(self._pieces) else 0
        self._skip_empty()

    def _skip_empty(self) -> None:
        while self._index < len(self._pieces) and self._pieces[self._index] == 0:
            self._piece_ended()


class HolderReads:
    """The shell: `read_in_parts(storage, object_id, consume)` reads a result of this client's from its holder when the
    storage server names one, else (or when that fails) from `storage`. Thread-safe (results are read several at
    once); the connections to each holder are kept, idle ones reused, until `close`."""

    def __init__(self, owner_id: bytes, security: TransportSecurity | None, timeout_seconds: float) -> None:
        self._owner_id = owner_id
        self._security = security
        self._timeout_seconds = timeout_seconds
        self._usable = security is None or isinstance(security, CurveSecurity)
        self._choice = SourceChoice(secured=security is not None)
        self._lock = threading.Lock()
        self._idle: dict[str, list[ObjectStorageConnection]] = {}  #: by holder: connections not in use
        self._all: dict[str, list[ObjectStorageConnection]] = {}  #: by holder: every connection
        self._closed = False

    def read_in_parts(self, storage: Any, object_id: bytes, consume: Callable[[Any], T]) -> T:
        source = self._where(storage, object_id)
        if source is not None:
            holder = None
            try:
                holder = self._holder(source)
                digests = source.piece_digests
                value = holder.read_in_parts(object_id, lambda parts: _checked(consume, parts, digests))
            except (ObjectStorageException, MissingObjects, OSError) as error:
                self._failed(source.address, holder, object_id, error)
            except BaseException:  # the value not understood (the read is over): the connection serves the next
                if holder is not None:
                    self._done(source.address, holder)
                raise
            else:
                with self._lock:
                    self._choice.reached()
                self._done(source.address, holder)
                return value
        return storage.read_in_parts(object_id, consume)  # type: ignore[no-any-return]

    def close(self) -> None:
        with self._lock:
            self._closed = True
            holders = [holder for each in self._all.values() for holder in each]
            self._all, self._idle = {}, {}
        for holder in holders:
            holder.close()

    def _where(self, storage: Any, object_id: bytes) -> ObjectSource | None:
        """The holder to read from, as the storage server names it (None: read from the storage server)."""
        with self._lock:
            if not self._usable or self._closed or not self._choice.should_ask():
                return None
        try:
            source = storage.call(SourceRequest(ObjectID(bytes(object_id)))).reply.value
        except SourcesUnknown as error:  # an older server
            with self._lock:
                self._choice.unanswered()
            logger.info("%s: reading every result there", error)
            return None
        except ObjectStorageException:  # a server that cannot answer now: its own read says what is wrong
            return None
        with self._lock:
            return source if self._choice.holder(source) else None

    def _holder(self, source: ObjectSource) -> ObjectStorageConnection:
        from scaler.object_storage.connection import ObjectStorageConnection

        with self._lock:
            if self._closed:
                raise ObjectStorageException("the client's storage connections were closed")
            idle = self._idle.get(source.address)
            if idle:
                return idle.pop()
        security = self._security
        if isinstance(security, CurveSecurity):
            security = CurveSecurity(security.public, security.secret, source.server_key.encode())
        holder = ObjectStorageConnection(
            source.address, role="client", timeout_seconds=self._timeout_seconds, security=security,
            owner_id=self._owner_id, map_local=False, connect_seconds=CONNECT_SECONDS,
        )  # fmt: skip
        with self._lock:
            self._all.setdefault(source.address, []).append(holder)
        return holder

    def _done(self, address: str, holder: ObjectStorageConnection) -> None:
        """A read ended well: its connection is kept for the next."""
        with self._lock:
            if not self._closed and holder in self._all.get(address, []):
                self._idle.setdefault(address, []).append(holder)
                return
        holder.close()

    def _failed(
        self, address: str, holder: ObjectStorageConnection | None, object_id: bytes, error: BaseException
    ) -> None:
        """Reading from `address` failed (on `holder`): that host is given up, its connections closed (one a read is
        under way on is closed when that read ends: `_done`, or here)."""
        with self._lock:
            asked = self._choice.asks
            first = self._choice.failed(address)
            stopped = asked and not self._choice.asks
            self._all.pop(address, None)
            closing = self._idle.pop(address, [])
        for each in [*closing, *([holder] if holder is not None else [])]:
            each.close()
        if first:
            logger.warning(
                "reading result %s from the host that holds it (%s) failed: %s; reading it from the storage server, "
                "as every result that host holds from now on", ObjectID(bytes(object_id)).hex(), address, error,
            )  # fmt: skip
        if stopped:
            logger.warning(
                "this client reached none of the %d hosts that held its results: it reads every result from the "
                "storage server from now on (is it off the workers' network?)", UNREACHED_HOSTS,
            )  # fmt: skip


def _checked(consume: Callable[[Any], T], parts: ObjectInParts, digests: Sequence[bytes]) -> T:
    """`consume` over the holder's answer, each piece checked; every piece must have come and matched."""
    source = CheckedSource(parts, digests)
    value = consume(source)
    if not source.checked:
        raise PieceMismatch("the object was not read to its end")
    return value
