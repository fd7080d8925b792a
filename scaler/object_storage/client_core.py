"""The object storage client's protocol, pure: what to send, what each reply means, what a restarted or refusing
server does to the requests waiting on it, when a request has waited too long, and which items held behind
pipelined puts may leave. No socket, clock or thread here: the shells bring the replies and the time, send what
the core queued and carry out its outcomes (`connection.py`: blocking, lock-step `ObjectStorageConnection` and the
pipelined `PutPipeline`; `async_connection.py`: asyncio).

Rules, one per event:

1. `request` (and `put_gated`): the request gets the connection's next request id. A connection with no hello on
   its way queues one first; requests follow it without waiting for its answer (the server handles a connection's
   messages in order). A refused connection raises IncompatiblePeerError at once, a closed one
   ObjectStorageException.
2. The answer to the latest hello: ok, the connection is greeted (`Greeted`). Anything else refuses it for good:
   every pending request fails with IncompatiblePeerError, and so does every later one (`Refused`). Answers to
   older hellos are stale.
3. `helloRequired` to a request: the server restarted (or forgot this connection). A hello goes again, unless one
   already went after this request did (the other pipelined requests get the same answer); the request is sent
   again under a new id. Once per request: a second `helloRequired` fails it.
4. Any other answer to a pending request settles it: ok is `Answered` (a gated put's acknowledgement releases what
   its gate now lets go, `Released`), anything else fails it with the error its status means (`Failed`; for a
   gated put, `PutFailed` with the held items that may have needed it). An answer to no pending request is stale
   (its request timed out, or was sent again) and is dropped.
5. `on_tick`: the timeout bounds the server's silence, not a request's duration. A request fails alone once nothing
   came on the connection for its timeout since it was sent (`sent nothing for`): any message counts (an answer, a
   part of a getInParts, a stale one), since the server answers a connection's requests in order and one behind a
   large answer waits for it to cross. A transfer that keeps moving is never cut; a server that stops sending
   (stopped, frozen, cut off) fails the requests after the timeout. Its late answer will be stale (rule 4). The
   connection stays. A put is one message, answered once the server has all of it: nothing can come while its own
   bytes cross, so a single put is still bounded by its whole transfer (pipelined puts are not: each answer is heard).
   An answer that comes whole (a get's) likewise shows nothing until it has all come: reads off the storage's host
   ask for theirs in parts (rule 11).
6. The connection itself is unusable (`on_bad_reply`: an answer whose header cannot be read, so it cannot be matched;
   `on_unreachable`: a send refused with EAGAIN, because no connection is up, until `send_deadline` (a connection
   lost between the poll and the send is retried, not failed); `on_send_failed`): every pending request fails with
   that error and the shell replaces its socket (`Reconnect`); the next request greets the new one.
7. `on_closed`: every pending request fails (`was closed`); later requests raise.
8. The put gate (`PutGate`): a held item leaves only when every gated put issued before it was acknowledged, and
   items leave in the order they were held; a gated put that fails dooms the items held after it was issued.
9. `on_disconnected`: the connection to the server dropped (it stopped or crashed; ZeroMQ connects again to whatever
   server comes at the address). A request sent and not answered may have been lost with it, and no answer would
   ever come: every pending request goes again (under a new id, the time it was sent kept) behind a new hello, in the
   order it was made. Puts, adopts, reads, existence checks and deletes are safe to repeat.
10. Gated adopts queued one after another (a burst of a client's arguments, written while the previous were sent) go
   as one adoptMany of up to MAX_ADOPTS_PER_BATCH when they are taken to be sent: one request and one answer for
   all, each adopt settled by its own outcome in it as if it had gone alone (acknowledged, or failed with the held
   items that may have needed it); an answer that is not ok, or a request that fails, fails each of them. A batch is
   sent again whole (rules 3 and 9).
11. A getInParts answered in parts (its header's `parts`: that many messages follow, each with one payload frame): the
   header and then each part are a `Part`, in order; the request stays pending until its last part, which answers it
   too (`Answered`, with the header's reply). Sent again (rules 3 and 9), it starts over: a new header comes, and a
   reader that took parts of the earlier answer starts again. `abandon`: the caller gives a request up; what comes
   for it later is stale (rule 4).

Outcomes are values; a shell reads the ones that concern it (a lock-step shell its one request's, the asyncio shell
every waiter's, the pipeline the gate's).
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
import math
import pickle
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from scaler.errors import IncompatiblePeerError, MissingObjects, ObjectStorageException, ObjectStorageFullError
from scaler.protocol.ids import ObjectID
from scaler.protocol.messages import PROTOCOL_VERSION
from scaler.protocol.storage_messages import (
    WIRE_PIECE_BYTES,
    Adopt,
    AdoptMany,
    AdoptOutcomes,
    Get,
    GetInParts,
    GetMapped,
    Put,
    SourceRequest,
    StorageHello,
    StorageOperation,
    StorageReply,
    StorageRequest,
    StorageStatus,
    joined_pieces,
    pieces_align,
    split_chunks,
    wire_pieces,
)

T = TypeVar("T")
_Value = TypeVar("_Value")

#: One contiguous buffer: bytes, bytearray, memoryview, a pickle protocol 5 out-of-band buffer, ...
BufferLike = bytes | bytearray | memoryview | pickle.PickleBuffer
#: An object's bytes, whole or as several buffers that are concatenated in order.
Payload = bytes | bytearray | memoryview | Sequence[BufferLike]
#: What a get returns: a view of the single received frame, or the frames joined once.
ObjectBytes = memoryview | bytes | bytearray

DEFAULT_TIMEOUT_SECONDS = 60.0
#: The most gated adopts one adoptMany carries (rule 10).
MAX_ADOPTS_PER_BATCH = 256
#: How long a send refused for want of a connection keeps trying before the request fails (rule 6).
CONNECT_TIMEOUT_SECONDS = 10.0


class SourcesUnknown(ObjectStorageException):
    """The server tells a client nothing of where its results are held (host_ledger S5): an older one, which answered
    its `source` `badRequest`."""


class HoldsUnknown(ObjectStorageException):
    """The server records no results held by their hosts (held_results.py): an older one, which answered a hold's put
    `badRequest` (it carried no payload)."""


class WantsUnknown(ObjectStorageException):
    """The server does not say what of a held object is wanted (held_results.py H8): an older one, which answered the
    wanted put `badRequest` (it carried no payload)."""


class HeldObjectGone(ObjectStorageException):
    """The server neither holds the object as held nor stores it (held_results.py H8): it was deleted."""


class TurnsUnknown(ObjectStorageException):
    """The server gives no turns for uploads (upload_admission.py): an older one, which answered a turn's put
    `badRequest` (it carried no payload)."""


class PieceMismatch(ObjectStorageException):
    """A piece of an object read from another host (a host cache, or the holder a client reads a result from) does
    not match the digest its storage server named for it, or fewer pieces came than named: the read falls back to the
    storage server, and the bytes never make a value."""


# ---------------------------------------------------------------- outcomes


@dataclass(frozen=True)
class Answered:
    """An ordinary request's ok answer, with the payload frames that followed it."""

    ticket: int
    reply: StorageReply
    frames: list[memoryview]


@dataclass(frozen=True)
class Part:
    """A piece of a getInParts' answer (rule 11): its header first (`reply.parts` > 0, no frames; `reply.frame_bytes`
    names the object's frames), then each part's one frame, in order."""

    ticket: int
    reply: StorageReply
    frames: list[memoryview]


@dataclass(frozen=True)
class Failed:
    ticket: int
    error: Exception


@dataclass(frozen=True)
class Released(Generic[T]):
    """Held items that may leave now, in the order they were held."""

    items: list[T]


@dataclass(frozen=True)
class PutFailed(Generic[T]):
    """A gated put failed: its object is not stored; `doomed` are the held items that may have needed it."""

    ticket: int
    object_id: ObjectID
    error: Exception
    doomed: list[T]


@dataclass(frozen=True)
class Greeted:
    """The server accepted the hello."""


@dataclass(frozen=True)
class Refused:
    error: IncompatiblePeerError


@dataclass(frozen=True)
class Reconnect:
    """Replace the socket: the next request opens and greets a new one."""


@dataclass(frozen=True)
class Notice:
    """A line for the shell's log (at info)."""

    text: str


Outcome = Answered | Part | Failed | Released[T] | PutFailed[T] | Greeted | Refused | Reconnect | Notice


# ---------------------------------------------------------------- the put gate


class PutGate(Generic[T]):
    """Which held items may leave, given which puts were issued and acknowledged (rule 8)."""

    def __init__(self) -> None:
        self._sequence = itertools.count(1)
        self._last_issued = 0
        self._unacknowledged: set[int] = set()
        self._held: collections.deque[tuple[int, T]] = collections.deque()

    @property
    def is_idle(self) -> bool:
        return not self._unacknowledged and not self._held

    def issued(self) -> int:
        """A put was issued; returns its sequence number."""
        self._last_issued = next(self._sequence)
        self._unacknowledged.add(self._last_issued)
        return self._last_issued

    def submit(self, items: list[T]) -> list[T]:
        """Items encoded now (after every put issued so far): those that may leave at once, in order."""
        if self.is_idle:
            return items
        self._held.extend((self._last_issued, item) for item in items)
        return self._releasable()

    def acknowledged(self, sequence: int) -> list[T]:
        self._unacknowledged.discard(sequence)
        return self._releasable()

    def failed(self, sequence: int) -> tuple[list[T], list[T]]:
        """Put `sequence` failed: (the held items that may have needed it, the items that may now leave)."""
        self._unacknowledged.discard(sequence)
        doomed = [item for watermark, item in self._held if watermark >= sequence]
        self._held = collections.deque((watermark, item) for watermark, item in self._held if watermark < sequence)
        return doomed, self._releasable()

    def _releasable(self) -> list[T]:
        lowest_pending = min(self._unacknowledged, default=math.inf)
        released = []
        while self._held and self._held[0][0] < lowest_pending:
            released.append(self._held.popleft()[1])
        return released


# ---------------------------------------------------------------- the core


@dataclass
class _Pending:
    ticket: int  #: the caller's handle: stays when the request is sent again under a new id
    operation: StorageOperation
    payload: Sequence[memoryview]
    timeout: float  #: how long the server may be silent while it waits (rule 5)
    sent_at: float  #: when it was first queued (kept when it is sent again: rule 9)
    hello_id: int  #: the hello this request followed
    retried: bool = False
    gate_sequence: int = 0  #: a gated put's sequence in the put gate; 0 for an ordinary request
    size: int = 0  #: a gated put's bytes
    #: an adoptMany's gated adopts (rule 10), each as the _Pending it was queued as; empty for any other request
    batch: tuple[_Pending, ...] = ()
    #: a getInParts answered in parts (rule 11): its header, and how many of its parts have not come yet
    header: StorageReply | None = None
    parts_left: int = 0

    def start_over(self) -> None:
        """Sent again: its answer comes whole again (rule 11)."""
        self.header = None
        self.parts_left = 0


class StorageClientCore(Generic[T]):
    """One connection's requests (see the module's rules). Not thread-safe: a shell calls it under its own lock."""

    def __init__(
        self,
        address: str,
        hello: StorageHello,
        timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
        connect_seconds: float = CONNECT_TIMEOUT_SECONDS,
    ) -> None:
        """`connect_seconds`: how long a send waits for a connection before the request fails (rule 6; at most the
        timeout)."""
        self.address = address
        self.timeout_seconds = timeout_seconds
        self.connect_seconds = min(timeout_seconds, connect_seconds)
        self._hello = hello
        self._ids = itertools.count(1)
        self._pending: dict[int, _Pending] = {}  #: by the request id it was last sent under
        self._outgoing: list[tuple[StorageRequest, Sequence[memoryview]]] = []
        self._hello_id = 0  #: the latest hello's request id on the current socket; 0: none sent
        self._greeted = False
        #: how many times a server accepted this connection's hello: once more after each restart of the server (or a
        #: connection it forgot), so a writer tells a server that lost its write from one that answered it
        self.greetings = 0
        #: what the latest accepted hello's reply said of the server's segment directory (a SegmentDirectory; None:
        #: nothing, or not greeted yet)
        self.segment_directory: Any = None
        self._refusal: IncompatiblePeerError | None = None
        self._closed = False
        self._gate: PutGate[T] = PutGate()
        self._gated_bytes = 0
        #: when the last message came on the connection (any: rule 5)
        self._heard_at = -math.inf

    # ------------------------------------------------------------ what callers ask

    @property
    def is_greeted(self) -> bool:
        return self._greeted

    @property
    def is_idle(self) -> bool:
        """No gated put is unacknowledged and no item is held."""
        return self._gate.is_idle

    @property
    def gated_bytes(self) -> int:
        """Bytes of gated puts issued and not settled yet."""
        return self._gated_bytes

    @property
    def pending_count(self) -> int:
        return len(self._pending)

    def request(
        self, operation: StorageOperation, payload: Sequence[memoryview] = (), *, now: float,
        timeout_seconds: float | None = None,
    ) -> int:  # fmt: skip
        """Queue a request (rule 1); returns its ticket."""
        timeout = self.timeout_seconds if timeout_seconds is None else timeout_seconds
        return self._queue(operation, payload, now, timeout)

    def put_gated(self, object_id: ObjectID, frames: Sequence[memoryview], owner_id: bytes, name: str, *,
                  now: float, adopt_file: str = "") -> int:  # fmt: skip
        """Queue a put that holds back the items held after it (rule 8); returns its ticket. `adopt_file`: the object
        is that file of the server's segment directory, written by this process: an adopt goes instead of the put."""
        size = sum(len(frame) for frame in frames)
        if adopt_file:
            adopt = Adopt(ObjectID(bytes(object_id)), bytes(owner_id), adopt_file, size, name)
            ticket = self._queue(adopt, (), now, self.timeout_seconds)
        else:
            ticket = self._queue(put_operation(object_id, frames, owner_id, name), frames, now, self.timeout_seconds)
        pending = self._pending[ticket]
        pending.gate_sequence = self._gate.issued()
        pending.size = size
        self._gated_bytes += pending.size
        return ticket

    def hold(self, items: list[T]) -> list[T]:
        """Items made now, after every gated put issued so far: those that may leave at once (rule 8)."""
        return self._gate.submit(items)

    def greet(self) -> None:
        """Queue a hello now, if none is on its way (to connect before any request)."""
        self._check_usable()
        if self._hello_id == 0:
            self._send_hello()

    @property
    def has_outgoing(self) -> bool:
        return bool(self._outgoing)

    def take_outgoing(self) -> list[tuple[StorageRequest, Sequence[memoryview]]]:
        """What to send, in order: each request header and the payload frames that follow it; gated adopts queued
        one after another go as one adoptMany (rule 10)."""
        outgoing, self._outgoing = self._outgoing, []
        if sum(1 for request, _ in outgoing if isinstance(request.operation, Adopt)) < 2:
            return outgoing
        merged: list[tuple[StorageRequest, Sequence[memoryview]]] = []
        run: list[_Pending] = []
        for request, payload in outgoing:
            pending = self._pending.get(request.request_id)
            if isinstance(request.operation, Adopt) and pending is not None and pending.gate_sequence:
                del self._pending[request.request_id]
                run.append(pending)
                if len(run) == MAX_ADOPTS_PER_BATCH:
                    merged.append(self._batched(run))
                    run = []
                continue
            if run:
                merged.append(self._batched(run))
                run = []
            merged.append((request, payload))
        if run:
            merged.append(self._batched(run))
        return merged

    def _batched(self, run: list[_Pending]) -> tuple[StorageRequest, Sequence[memoryview]]:
        """Gated adopts as one request (one of them alone goes as it was)."""
        if len(run) == 1:
            request_id = next(self._ids)
            self._pending[request_id] = run[0]
            return StorageRequest(request_id, run[0].operation), ()
        first = run[0]
        operation = AdoptMany(tuple(pending.operation for pending in run if isinstance(pending.operation, Adopt)))
        batch = _Pending(first.ticket, operation, (), first.timeout, min(p.sent_at for p in run), first.hello_id,
                         retried=any(p.retried for p in run), batch=tuple(run))  # fmt: skip
        request_id = next(self._ids)
        self._pending[request_id] = batch
        return StorageRequest(request_id, operation), ()

    def next_deadline(self) -> float | None:
        """When the first pending request will have waited out the server's silence (rule 5), as things stand."""
        return min((self._deadline(pending) for pending in self._pending.values()), default=None)

    def _deadline(self, pending: _Pending) -> float:
        return max(pending.sent_at, self._heard_at) + pending.timeout

    def send_deadline(self, now: float) -> float:
        """Until when a send refused for want of a connection keeps trying (rule 6)."""
        return now + self.connect_seconds

    # ------------------------------------------------------------ what the connection reports

    def abandon(self, ticket: int) -> None:
        """The caller gives the request up: its answer, or what is left of it, will be stale (rule 11)."""
        for request_id, pending in list(self._pending.items()):
            if pending.ticket == ticket and not pending.gate_sequence:
                del self._pending[request_id]

    def on_reply(self, reply: StorageReply, frames: list[memoryview], *, now: float) -> list[Outcome[T]]:
        """A message came at `now` (rules 2-5, 10, 11)."""
        self._heard_at = max(self._heard_at, now)
        if reply.request_id == self._hello_id and self._hello_id:
            return self._hello_answered(reply)
        pending = self._pending.get(reply.request_id)
        if pending is None:
            return []  # stale (rule 4)
        if reply.status is StorageStatus.OK and isinstance(pending.operation, GetInParts):
            part = self._in_parts(reply.request_id, pending, reply, frames)
            if part is not None:
                return part
        del self._pending[reply.request_id]
        if reply.status is StorageStatus.HELLO_REQUIRED and not pending.retried:
            return self._send_again(pending)
        if pending.batch:
            return self._batch_answered(pending, reply)
        if reply.status is StorageStatus.OK:
            if pending.gate_sequence:
                self._gated_bytes -= pending.size
                return self._released(self._gate.acknowledged(pending.gate_sequence))
            return [Answered(pending.ticket, reply, frames)]
        return self._fail(pending, status_error(reply, self.address, pending.operation))

    def _in_parts(
        self, request_id: int, pending: _Pending, reply: StorageReply, frames: list[memoryview]
    ) -> list[Outcome[T]] | None:
        """Rule 11: a getInParts' header or part (None: an answer that came whole, settled as any other)."""
        if pending.header is None:
            if reply.parts <= 0:
                return None
            if frames:
                return self._reset(ObjectStorageException(
                    f"object storage at {self.address} sent payload with the header of an answer in parts"
                ))  # fmt: skip
            pending.header, pending.parts_left = reply, reply.parts
            return [Part(pending.ticket, reply, [])]
        if len(frames) != 1 or reply.parts:
            return self._reset(ObjectStorageException(
                f"object storage at {self.address} sent a part with {len(frames)} payload frames (one expected)"
            ))  # fmt: skip
        pending.parts_left -= 1
        if pending.parts_left > 0:
            return [Part(pending.ticket, reply, frames)]
        del self._pending[request_id]
        return [Part(pending.ticket, reply, frames), Answered(pending.ticket, pending.header, [])]

    def on_tick(self, now: float) -> list[Outcome[T]]:
        """Rule 5: the requests that waited out the server's silence fail."""
        due = [request_id for request_id, pending in self._pending.items() if self._deadline(pending) <= now]
        outcomes: list[Outcome[T]] = []
        for request_id in due:
            pending = self._pending.pop(request_id)
            outcomes += self._fail(pending, silence_error(self.address, pending.timeout))
        return outcomes

    def on_bad_reply(self, reason: str) -> list[Outcome[T]]:
        return self._reset(ObjectStorageException(f"object storage at {self.address} sent a bad reply: {reason}"))

    def on_unreachable(self) -> list[Outcome[T]]:
        seconds = self.connect_seconds
        return self._reset(ObjectStorageException(
            f"object storage at {self.address} is not reachable: no connection within {seconds:g} s "
            f"(is the object storage server running?)"
        ))  # fmt: skip

    def on_send_failed(self, reason: str) -> list[Outcome[T]]:
        return self._reset(ObjectStorageException(f"could not send to object storage at {self.address}: {reason}"))

    def on_disconnected(self) -> list[Outcome[T]]:
        """Rule 9: the pending requests go again behind a new hello (none pending: the next request greets)."""
        if self._closed or self._refusal is not None:
            return []
        self._outgoing = []
        self._greeted = False
        if not self._pending:
            self._hello_id = 0
            return []
        self._send_hello()
        pending, self._pending = self._pending, {}
        for request in sorted(pending.values(), key=lambda each: each.ticket):
            request.hello_id = self._hello_id
            request.start_over()
            request_id = next(self._ids)
            self._pending[request_id] = request
            self._outgoing.append((StorageRequest(request_id, request.operation), request.payload))
        text = (f"the connection to object storage at {self.address} dropped: greeting it again and sending "
                f"{len(pending)} unanswered request(s) again")  # fmt: skip
        return [Notice(text)]

    def on_closed(self) -> list[Outcome[T]]:
        error = ObjectStorageException(f"the connection to object storage at {self.address} was closed")
        outcomes = self._fail_all(error)
        self._closed = True
        return outcomes

    # ------------------------------------------------------------ internals

    def unusable(self) -> Exception | None:
        """Why the core takes no request any more (closed, or its server refused it); None while it does."""
        if self._closed:
            return ObjectStorageException(f"the connection to object storage at {self.address} is closed")
        if self._refusal is not None:
            return IncompatiblePeerError(str(self._refusal))
        return None

    def _check_usable(self) -> None:
        error = self.unusable()
        if error is not None:
            raise error

    def _queue(self, operation: StorageOperation, payload: Sequence[memoryview], now: float, timeout: float) -> int:
        self._check_usable()
        if self._hello_id == 0:
            self._send_hello()
        request_id = next(self._ids)
        pending = _Pending(request_id, operation, payload, timeout, now, self._hello_id)
        self._pending[request_id] = pending
        self._outgoing.append((StorageRequest(request_id, operation), payload))
        return request_id

    def _send_hello(self) -> None:
        self._hello_id = next(self._ids)
        self._greeted = False
        self._outgoing.append((StorageRequest(self._hello_id, self._hello), ()))

    def _hello_answered(self, reply: StorageReply) -> list[Outcome[T]]:
        if reply.status is StorageStatus.OK:
            self._greeted = True
            self.greetings += 1
            self.segment_directory = reply.value
            return [Greeted()]
        reason = reply.reason or reply.status.value
        self._refusal = IncompatiblePeerError(f"object storage at {self.address} refused the connection: {reason}")
        outcomes = self._fail_all(self._refusal)
        outcomes.append(Refused(self._refusal))
        return outcomes

    def _send_again(self, pending: _Pending) -> list[Outcome[T]]:
        outcomes: list[Outcome[T]] = []
        if pending.hello_id == self._hello_id:
            text = f"object storage at {self.address} asks for a hello again; greeting it and retrying"
            outcomes.append(Notice(text))
            self._send_hello()
        pending.retried = True
        pending.hello_id = self._hello_id
        pending.start_over()
        request_id = next(self._ids)
        self._pending[request_id] = pending
        self._outgoing.append((StorageRequest(request_id, pending.operation), pending.payload))
        return outcomes

    def _batch_answered(self, batch: _Pending, reply: StorageReply) -> list[Outcome[T]]:
        """An adoptMany's answer: each adopt settled by its own outcome (rule 10)."""
        value = reply.value
        if reply.status is not StorageStatus.OK:
            return self._fail(batch, status_error(reply, self.address, batch.operation))
        if not isinstance(value, AdoptOutcomes) or len(value.outcomes) != len(batch.batch):
            error = ObjectStorageException(f"object storage at {self.address} answered an adoptMany of "
                                           f"{len(batch.batch)} adopts with {value!r}")  # fmt: skip
            return self._fail(batch, error)
        outcomes: list[Outcome[T]] = []
        for pending, outcome in zip(batch.batch, value.outcomes, strict=True):
            if outcome.status is StorageStatus.OK:
                self._gated_bytes -= pending.size
                outcomes += self._released(self._gate.acknowledged(pending.gate_sequence))
            else:
                alone = StorageReply(reply.request_id, outcome.status, outcome.reason)
                outcomes += self._fail(pending, status_error(alone, self.address, pending.operation))
        return outcomes

    def _fail(self, pending: _Pending, error: Exception) -> list[Outcome[T]]:
        if pending.batch:
            return [outcome for each in pending.batch for outcome in self._fail(each, error)]
        if not pending.gate_sequence:
            return [Failed(pending.ticket, error)]
        self._gated_bytes -= pending.size
        doomed, released = self._gate.failed(pending.gate_sequence)
        operation = pending.operation
        assert isinstance(operation, (Put, Adopt))
        return [PutFailed(pending.ticket, operation.object_id, error, doomed), *self._released(released)]

    def _released(self, items: list[T]) -> list[Outcome[T]]:
        return [Released(items)] if items else []

    def _fail_all(self, error: Exception) -> list[Outcome[T]]:
        pending, self._pending = self._pending, {}
        outcomes: list[Outcome[T]] = []
        for request in sorted(pending.values(), key=lambda each: each.ticket):
            outcomes += self._fail(request, error)
        self._outgoing.clear()
        return outcomes

    def _reset(self, error: Exception) -> list[Outcome[T]]:
        outcomes = self._fail_all(error)
        self._hello_id = 0
        self._greeted = False
        outcomes.append(Reconnect())
        return outcomes


# ---------------------------------------------------------------- payloads, replies and errors


def hello_operation(role: str, python_version: str, owner_id: bytes = b"", cache_address: str = "") -> StorageHello:
    return StorageHello(PROTOCOL_VERSION, python_version, role, owner_id, cache_address)


def _byte_view(buffer: Any) -> memoryview:
    """A flat byte view of a buffer, without copying unless the buffer is not contiguous."""
    try:
        return pickle.PickleBuffer(buffer).raw()
    except BufferError:
        return memoryview(memoryview(buffer).tobytes(order="A"))


def payload_frames(payload: Payload) -> list[memoryview]:
    """The payload as frames of at most CHUNK_BYTES, as views of the caller's buffers (no copy)."""
    buffers: Sequence[Any] = payload if isinstance(payload, (list, tuple)) else (payload,)
    frames: list[memoryview] = []
    for buffer in buffers:
        frames.extend(chunk for chunk in split_chunks(_byte_view(buffer)) if len(chunk))
    return frames


def on_the_wire(
    request: StorageRequest, payload: Sequence[memoryview], secured: bool
) -> tuple[StorageRequest, Sequence[Any]]:
    """A request and its payload frames as a connection sends them. Over CURVE (`secured`), a put's frames over
    WIRE_PIECE_BYTES go in pieces, and its header names the frames' lengths, so that the server joins them again
    (storage_chunks.wire_pieces: libzmq encrypts a message whole before its first byte leaves)."""
    operation = request.operation
    if not secured or not isinstance(operation, Put) or all(len(frame) <= WIRE_PIECE_BYTES for frame in payload):
        return request, payload
    put = dataclasses.replace(operation, frame_bytes=tuple(len(frame) for frame in payload))
    return StorageRequest(request.request_id, put), wire_pieces(payload)


def put_operation(object_id: bytes, frames: Sequence[memoryview], owner_id: bytes, name: str) -> Put:
    return Put(ObjectID(bytes(object_id)), bytes(owner_id), sum(len(frame) for frame in frames), name)


def frames_as_put(reply: StorageReply, frames: Sequence[memoryview], address: str) -> Sequence[memoryview]:
    """A get's payload frames as the object's frames: pieces (a CURVE reply cuts frames over WIRE_PIECE_BYTES, its
    header naming the frames' lengths) joined again, so that a reader sees the frames that were put."""
    if not reply.frame_bytes:
        return frames
    joined = joined_pieces(frames, reply.frame_bytes)
    if joined is None:
        raise ObjectStorageException(
            f"object storage at {address} sent pieces that do not make frames of {list(reply.frame_bytes)} bytes"
        )
    return [memoryview(frame) for frame in joined]


def frames_or_pieces(reply: StorageReply, frames: Sequence[memoryview], address: str) -> Sequence[memoryview]:
    """A get's payload frames for a reader that joins pieces itself (`serializer.deserialize_frames`, which copies
    a large `bytes` object or out-of-band buffer out of its frames anyway): the pieces as received, when the object
    has several frames and its first (the serializer's marker) came whole, so that the reader joins each frame once
    instead of twice; else `frames_as_put`."""
    sizes = reply.frame_bytes
    if len(sizes) >= 2 and sizes[0] <= WIRE_PIECE_BYTES and pieces_align(frames, sizes):
        return frames
    return frames_as_put(reply, frames, address)


def object_from_frames(frames: Sequence[memoryview], total_bytes: int, address: str) -> ObjectBytes:
    """One frame: the view itself (no copy). Several: joined once into a bytearray."""
    sizes = [len(frame) for frame in frames]
    if sum(sizes) != total_bytes:
        raise ObjectStorageException(
            f"object storage at {address} announced {total_bytes} bytes but sent {sum(sizes)} in {len(frames)} frame(s)"
        )
    if not frames:
        return b""
    if len(frames) == 1:
        return frames[0]
    joined = bytearray(total_bytes)
    view = memoryview(joined)
    offset = 0
    for frame, size in zip(frames, sizes, strict=True):
        view[offset : offset + size] = frame
        offset += size
    view.release()
    return joined


def status_error(reply: StorageReply, address: str, operation: StorageOperation) -> Exception:
    """The exception a caller sees for an answer that is not ok."""
    status = reply.status
    if status is StorageStatus.NOT_FOUND and isinstance(operation, (Get, GetMapped, GetInParts)):
        text = f"object {operation.object_id.hex()} is not in object storage at {address}"
        if reply.reason and not reply.reason.endswith(" is not stored"):  # more than "not stored": say it
            text += f": {reply.reason}"
        return MissingObjects(text)
    if status is StorageStatus.REFUSED:
        return IncompatiblePeerError(f"object storage at {address} refused the connection: {reply.reason}")
    if status is StorageStatus.BAD_REQUEST and isinstance(operation, Put) and operation.turn:
        return TurnsUnknown(f"object storage at {address} gives no upload turns: {reply.reason}")
    if isinstance(operation, Put) and operation.wanted:
        if status is StorageStatus.BAD_REQUEST:
            return WantsUnknown(f"object storage at {address} does not say what is wanted of a held object: "
                                f"{reply.reason}")  # fmt: skip
        if status is StorageStatus.NOT_FOUND:
            return HeldObjectGone(reply.reason)
    if status is StorageStatus.BAD_REQUEST and isinstance(operation, Put) and operation.hold:
        return HoldsUnknown(f"object storage at {address} records no results held by their hosts: {reply.reason}")
    if status is StorageStatus.BAD_REQUEST and isinstance(operation, SourceRequest):
        return SourcesUnknown(f"object storage at {address} names no holder of results: {reply.reason}")
    if status is StorageStatus.FULL:
        return ObjectStorageFullError(f"object storage at {address} refused the {type(operation).__name__.lower()}: "
                                      f"{reply.reason}")  # fmt: skip
    return ObjectStorageException(
        f"object storage at {address} answered {status.value} to a {type(operation).__name__.lower()} request"
        + (f": {reply.reason}" if reply.reason else "")
    )


def reply_value(reply: StorageReply, kind: type[_Value], address: str) -> _Value:
    """The reply's value, checked to be of the kind the request expects (exact type: bool is not int)."""
    value = reply.value
    if type(value) is not kind:
        raise ObjectStorageException(
            f"object storage at {address} answered with {type(value).__name__}, expected {kind.__name__}"
        )
    return value


def timeout_error(address: str, timeout_seconds: float) -> ObjectStorageException:
    return ObjectStorageException(f"object storage at {address} did not answer within {timeout_seconds:g} s")


def silence_error(address: str, timeout_seconds: float) -> ObjectStorageException:
    """A request failed by the server's silence (rule 5)."""
    return ObjectStorageException(
        f"object storage at {address} sent nothing for {timeout_seconds:g} s (stopped, frozen or cut off)"
    )
