"""The blocking shell of the object storage client (its protocol: `client_core.py`): `ObjectStorageConnection`,
lock-step requests from plain threads (the client, processors, the offload proxy, readiness probes, tools), and
`BlockingLink`, the socket side it shares with the pipelined puts (`put_pipeline.py`).

On the server's host (local_segments.py) objects move through its segment directory: a put from 64 KiB on writes
a file there and asks for its adoption, a get maps the object's segment file (a processor maps it by its name without
asking first). Elsewhere, and for what is not in a segment file, bytes cross the socket.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import math
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Generic, TypeVar

import zmq
from zmq.utils.monitor import parse_monitor_message

from scaler.errors import MissingObjects, ObjectStorageException
from scaler.io.sockets import SocketFactory, Sockets, TransportSecurity
from scaler.object_storage.client_core import (
    CONNECT_TIMEOUT_SECONDS,
    DEFAULT_TIMEOUT_SECONDS,
    Answered,
    Failed,
    Notice,
    ObjectBytes,
    Outcome,
    Part,
    Payload,
    Reconnect,
    StorageClientCore,
    frames_as_put,
    frames_or_pieces,
    hello_operation,
    object_from_frames,
    on_the_wire,
    payload_frames,
    put_operation,
    reply_value,
)
from scaler.object_storage.followed_put import FollowedPuts, followable
from scaler.object_storage.local_segments import LocalSegments, local_segments
from scaler.protocol.codec import DecodeError, decode_storage_reply, encode_storage_request
from scaler.protocol.handshake import local_python_version
from scaler.protocol.ids import ObjectID
from scaler.protocol.storage_messages import (
    Adopt,
    Delete,
    DeleteOwner,
    Exists,
    GetInParts,
    GetMapped,
    Info,
    MappedSize,
    ObjectSize,
    Put,
    SegmentDirectory,
    StorageInfo,
    StorageOperation,
)

__all__ = [
    "DEFAULT_TIMEOUT_SECONDS",
    "BlockingLink",
    "ObjectBytes",
    "ObjectInParts",
    "ObjectStorageConnection",
    "Payload",
]

#: Roles that may read every object (the server's WORKER_ROLES): they map an object by its name, asking nothing.
READS_BY_NAME = frozenset({"worker", "processor", "offload-proxy"})

logger = logging.getLogger(__name__)

T = TypeVar("T")


def open_dealer(sockets: Sockets, address: str, immediate: bool = False, events: int = 0) -> zmq.Socket[Any]:
    """A DEALER connected to the server (the factory's options: unbounded queues, no linger, TCP keep-alive).
    `immediate`: messages are queued only to a completed connection (a send finds out the server is gone).
    `events`: connection events watched from before it connects (`Sockets.event_monitor`)."""
    try:
        return sockets.dealer(address, immediate=immediate, events=events)
    except zmq.ZMQError as error:
        raise ObjectStorageException(f"cannot connect to object storage at {address}: {error}") from None


class BlockingLink(Generic[T]):
    """A core and the DEALER it talks through, for one thread at a time: sends what the core queued and feeds it the
    answers and the time. Carries out `Reconnect` (the socket goes; the next send opens a new one) and `Notice`;
    returns the other outcomes. Its socket's monitor reports a dropped connection (the server stopped or crashed)
    to the core, which sends what was unanswered again (client_core rule 9), on a new socket: a request lost with a
    server that died before answering is not left to time out."""

    def __init__(self, core: StorageClientCore[T], sockets: Sockets, immediate: bool) -> None:
        self.core = core
        self._sockets = sockets
        self._immediate = immediate
        self._socket: zmq.Socket[Any] | None = None
        self._monitor: zmq.Socket[Any] | None = None

    @property
    def socket(self) -> zmq.Socket[Any]:
        if self._socket is None:
            dropped = zmq.EVENT_DISCONNECTED
            # watched from before it connects: a server that dies before the first wait, even before the monitor
            # would have been attached to a connected socket, is heard (rule 9)
            self._socket = open_dealer(self._sockets, self.core.address, immediate=self._immediate, events=dropped)
            self._monitor = self._sockets.event_monitor(self._socket, dropped)
        return self._socket

    @property
    def monitor(self) -> zmq.Socket[Any]:
        """The socket's connection events (made with the socket)."""
        _ = self.socket
        assert self._monitor is not None
        return self._monitor

    def flush(self) -> list[Outcome[T]]:
        """Send what the core queued, in order."""
        if not self.core.has_outgoing:
            return []
        secured = self._sockets.security is not None
        for request, payload in self.core.take_outgoing():
            request, payload = on_the_wire(request, payload, secured)
            refusal = self._send([encode_storage_request(request), *payload])
            if refusal is not None:
                return self.carry_out(refusal)
        return []

    def wait(self, deadline: float | None) -> list[Outcome[T]]:
        """Until an answer comes or `deadline` passes (None: until an answer): what the answer, or the time, did."""
        timeout_ms = -1 if deadline is None else max(0, math.ceil((deadline - time.monotonic()) * 1000))
        sock, monitor = self.socket, self.monitor
        poller = zmq.Poller()
        poller.register(sock, zmq.POLLIN)
        poller.register(monitor, zmq.POLLIN)
        events = dict(poller.poll(timeout_ms))
        if not events:
            return self.carry_out(self.core.on_tick(time.monotonic()))
        outcomes: list[Outcome[T]] = []
        if sock in events:
            outcomes += self.receive()
        if monitor in events:  # after the answers that came before the connection dropped: they settle requests
            outcomes += self.events()
        return outcomes + self.flush()

    def events(self) -> list[Outcome[T]]:
        """Every connection event waiting in the monitor; a dropped connection is told to the core (rule 9)."""
        monitor = self._monitor
        dropped = False
        while monitor is not None and monitor is self._monitor:
            try:
                frames = monitor.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                break
            dropped = dropped or int(parse_monitor_message(frames)["event"]) == zmq.EVENT_DISCONNECTED
        if not dropped:
            return []
        answered = self.receive()  # the answers that came before the connection dropped settle their requests first
        # What goes again goes on a new socket: libzmq reports the drop before it ends the dead connection's pipe, and
        # with IMMEDIATE a request sent again on this socket at once could go into that pipe and be lost with it,
        # answered never (a read after a storage restart waited out its timeout).
        self.drop()
        return answered + self.carry_out(self.core.on_disconnected())

    def receive(self) -> list[Outcome[T]]:
        """Every answer waiting in the socket, fed to the core (then what the core queued in turn is sent)."""
        outcomes: list[Outcome[T]] = []
        sock = self.socket
        while self._socket is sock:
            try:
                frames = sock.recv_multipart(zmq.NOBLOCK, copy=False)
            except zmq.Again:
                break
            outcomes += self._feed(frames)
        return outcomes + self.flush()

    def _feed(self, frames: list[Any]) -> list[Outcome[T]]:
        try:
            reply = decode_storage_reply(frames[0].bytes)
        except DecodeError as error:
            return self.carry_out(self.core.on_bad_reply(str(error)))
        return self.carry_out(self.core.on_reply(reply, [frame.buffer for frame in frames[1:]], now=time.monotonic()))

    def carry_out(self, outcomes: Iterable[Outcome[T]]) -> list[Outcome[T]]:
        others: list[Outcome[T]] = []
        for outcome in outcomes:
            if isinstance(outcome, Reconnect):
                self.drop()
            elif isinstance(outcome, Notice):
                logger.info("%s", outcome.text)
            else:
                others.append(outcome)
        return others

    def drop(self) -> None:
        if self._monitor is not None:
            assert self._socket is not None
            self._socket.disable_monitor()
            self._monitor.close(linger=0)
            self._monitor = None
        if self._socket is not None:
            self._socket.close(linger=0)
            self._socket = None

    def _send(self, frames: list[Any]) -> list[Outcome[T]] | None:
        """Send without blocking. A send refused with EAGAIN (no connection is up: an immediate socket before its
        connection, or one lost between the poll and the send) waits for the socket to take it until the core's
        send deadline (rule 6); returns what a failed send did to the core, or None once sent."""
        sock = self.socket
        deadline = None
        while True:
            try:
                sock.send_multipart(frames, zmq.NOBLOCK, copy=False)
                return None
            except zmq.Again:
                if deadline is None:
                    deadline = self.core.send_deadline(time.monotonic())
                remaining_ms = max(0, math.ceil((deadline - time.monotonic()) * 1000))
                if remaining_ms == 0 or not sock.poll(remaining_ms, zmq.POLLOUT):
                    return self.core.on_unreachable()
            except zmq.ZMQError as error:
                return self.core.on_send_failed(str(error))


class _StartedOver(ObjectStorageException):
    """The answer being read started over (the request was sent again, client_core rule 9): its reader reads it again
    from its start (a ScalerError, so that a reader passes it on as a failed read, not as a value it could not make)."""


class ObjectInParts:
    """An object read with getInParts, as it comes (a `serializer.FrameSource`), over a BlockingLink whose lock the
    caller holds: waits for the header, then hands out each part's bytes as the part comes. An answer that came whole
    (a server that sends it so) is read from its frames."""

    def __init__(
        self, link: BlockingLink[None], ticket: int, address: str, header: Part | Answered | None = None,
        sent: Sequence[Outcome[None]] = (),
    ) -> None:  # fmt: skip
        """`header`: the start of an answer that started over (its header, or the answer whole), `sent`: what sending
        the request did, or what came after that start."""
        self._link = link
        self._ticket = ticket
        self.address = address
        self._queue: collections.deque[Part | Answered] = collections.deque()
        self._take(sent)
        self._frames: collections.deque[memoryview] = collections.deque()
        self._done = False
        first = header if header is not None else self._next()
        self._in_parts = isinstance(first, Part)
        if isinstance(first, Answered):  # whole: a small object, or a server that sends every get whole
            self._done = True
            frames = first.frames
            self.frame_bytes: tuple[int, ...] = first.reply.frame_bytes or tuple(len(frame) for frame in frames)
            self._frames.extend(frames)
            total = reply_value(first.reply, ObjectSize, address).total_bytes
        else:
            self.frame_bytes = first.reply.frame_bytes
            total = reply_value(first.reply, ObjectSize, address).total_bytes
            if not self.frame_bytes:
                raise ObjectStorageException(f"object storage at {address} answered in parts without naming the frames")
        if sum(self.frame_bytes) != total or (self._done and sum(len(frame) for frame in self._frames) != total):
            raise ObjectStorageException(f"object storage at {address} sent a truncated object")

    @property
    def in_parts(self) -> bool:
        """The answer comes in parts (a header, then each piece as a message of its own); False: it came whole."""
        return self._in_parts

    @property
    def complete(self) -> bool:
        """The whole answer has come (what is left to read is here)."""
        return self._done or any(isinstance(outcome, Answered) for outcome in self._queue)

    def again(self) -> ObjectInParts:
        """A source over the answer that started over (its start came last)."""
        start = self._queue.popleft()
        return ObjectInParts(self._link, self._ticket, self.address, start, list(self._queue))

    def readinto(self, view: memoryview) -> int:
        while not self._frames:
            if self._done:
                return 0
            outcome = self._next()
            if (outcome.reply.parts > 0) is isinstance(outcome, Part):
                # a new header, or the answer whole: the request went again (rule 9), and its answer starts over
                self._queue.appendleft(outcome)
                raise _StartedOver()
            if isinstance(outcome, Answered):
                self._done = True
            else:
                self._frames.extend(memoryview(frame).cast("B") for frame in outcome.frames)
        frame = self._frames[0]
        count = min(len(view), len(frame))
        view[:count] = frame[:count]
        if count == len(frame):
            self._frames.popleft()
        else:
            self._frames[0] = frame[count:]
        return count

    def _next(self) -> Part | Answered:
        """The next part (or the answer) of this request, waiting for it. Raises what failed it."""
        link = self._link
        while not self._queue:
            self._take(link.wait(link.core.next_deadline()))
        return self._queue.popleft()

    def _take(self, outcomes: Sequence[Outcome[None]]) -> None:
        for outcome in outcomes:
            if isinstance(outcome, (Part, Answered)) and outcome.ticket == self._ticket:
                self._queue.append(outcome)
            elif isinstance(outcome, Failed) and outcome.ticket == self._ticket:
                raise outcome.error


def _frames_of(source: ObjectInParts) -> list[memoryview]:
    """The object's frames as they were put, each filled from the pieces as they come (this process's own buffers:
    writable)."""
    frames = []
    for size in source.frame_bytes:
        frame = memoryview(bytearray(size))
        filled = 0
        while filled < size:
            count = source.readinto(frame[filled:])
            if count == 0:
                raise ObjectStorageException(f"object storage at {source.address} sent a truncated object")
            filled += count
        frames.append(frame)
    return frames


class ObjectStorageConnection:
    """Lock-step requests over one DEALER socket. Safe to share between threads (one request at a time). Replies are
    matched by request id: a late answer to a request that timed out is dropped."""

    def __init__(
        self,
        address: str,
        role: str,
        sockets: SocketFactory | None = None,
        timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
        security: TransportSecurity | None = None,
        owner_id: bytes = b"",
        map_local: bool = True,
        cache_address: str = "",
        connect_seconds: float = CONNECT_TIMEOUT_SECONDS,
    ) -> None:
        """`owner_id`: a client's id; the server lets a client store, read and delete only its own objects.
        `map_local`: on the server's host, objects move through its segment directory (False: over the socket, as
        from any other host). `cache_address`: a host cache's (role "cache"), where other hosts' caches reach it.
        `connect_seconds`: how long a request waits for a connection before it fails (a server that cannot be
        reached)."""
        self._address = address
        self._is_factory_owned = sockets is None
        #: `security` secures the connection's own factory; a factory passed in brings its own
        self._sockets = sockets if sockets is not None else SocketFactory(security=security)
        core: StorageClientCore[None] = StorageClientCore(
            address,
            hello_operation(role, local_python_version(), owner_id, cache_address),
            timeout_seconds,
            connect_seconds,
        )
        #: the socket queues only to a live connection (IMMEDIATE): a server that is down is reported after the
        #: connect timeout, instead of the request waiting the full reply timeout in a queue
        self._link = BlockingLink(core, self._sockets, immediate=True)
        self._lock = threading.Lock()
        self._is_closed = False
        self._owner_id = owner_id
        self._map_local = map_local
        self._reads_by_name = role in READS_BY_NAME
        self._role = role
        self._timeout_seconds = timeout_seconds
        self._followed: FollowedPuts | None = None  #: writes readers follow, over a connection of their own
        #: called on a writer's thread each time the writes readers follow that this connection began are all finished
        #: (set before the first `put_followed`)
        self.on_followed_settled: Callable[[], None] | None = None

    def open(self) -> None:
        """Open the socket now rather than at the first request: its connection and handshake go on meanwhile."""
        with self._lock:
            if not self._is_closed:
                _ = self._link.socket

    @property
    def address(self) -> str:
        return self._address

    def __enter__(self) -> ObjectStorageConnection:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def put(self, object_id: bytes, payload: Payload, owner_id: bytes = b"", name: str = "") -> None:
        """Store an object (replacing one with the same id). Buffers are sent without being copied; on the server's
        host, one of 64 KiB or more is written into its segment directory instead, and adopted."""
        buffers: list[Any] = list(payload) if isinstance(payload, (list, tuple)) else [payload]
        local = self.local_segments()
        adopt_file = local.write(object_id, owner_id, name, buffers) if local is not None else None
        if local is not None and adopt_file is not None:
            size = sum(memoryview(buffer).nbytes for buffer in buffers)
            try:
                self._call(Adopt(ObjectID(bytes(object_id)), bytes(owner_id), adopt_file, size, name))
            except BaseException:
                local.discard(adopt_file)
                raise
            return
        frames = payload_frames(payload)
        self._call(put_operation(object_id, frames, owner_id, name), frames)

    def ask_turn(self, object_id: bytes, total_bytes: int, owner_id: bytes = b"", name: str = "") -> None:
        """A host cache's turn to upload an object of `total_bytes` (upload_admission.py): returns once the server
        admits the upload, which then follows on this connection. Raises TurnsUnknown from a server that gives none."""
        self._call(Put(ObjectID(bytes(object_id)), bytes(owner_id), total_bytes, name, (), True))

    def hold(
        self, object_id: bytes, total_bytes: int, owner_id: bytes, name: str, piece_digests: tuple[bytes, ...]
    ) -> None:
        """A host cache holds an object and will upload it (held_results.py): returns once the server recorded it.
        Raises HoldsUnknown from a server that records none, ObjectStorageFullError beyond its bound."""
        put = Put(ObjectID(bytes(object_id)), bytes(owner_id), total_bytes, name, (), False, True, piece_digests)
        self._call(put)

    def wanted(self, object_id: bytes, total_bytes: int, owner_id: bytes = b"") -> bool:
        """Whether a reader waits at the server for an object this host cache holds and has not uploaded
        (held_results.py H8). Raises HeldObjectGone when the server neither holds it as held nor stores it (deleted),
        WantsUnknown from a server that does not say."""
        put = Put(ObjectID(bytes(object_id)), bytes(owner_id), total_bytes, "", (), False, False, (), True)
        return reply_value(self._call(put).reply, bool, self._address)

    def put_followed(self, object_id: bytes, payload: Payload, owner_id: bytes = b"", name: str = "") -> bool:
        """Begin storing a large object that readers may follow while it is written (followed_put.py): True when the
        object may be announced now (readers wait for it at the server; it counts as stored once a thread of this
        connection has written it and its adopt is answered). False when it is not one for that (off the server's host,
        small, or with buffers that could change meanwhile): nothing was done, `put` it."""
        buffers: list[Any] = list(payload) if isinstance(payload, (list, tuple)) else [payload]
        local = self.local_segments() if followable(buffers) else None
        directory = self._link.core.segment_directory
        if local is None or (isinstance(directory, SegmentDirectory) and directory.host_cache):
            return False  # off the server's host, small or changing, or a host cache (it takes no writeBegin)
        with self._lock:
            if self._is_closed:
                raise ObjectStorageException(f"the connection to object storage at {self._address} was closed")
            if self._followed is None:
                writer = ObjectStorageConnection(
                    self._address, self._role, self._sockets, self._timeout_seconds, owner_id=self._owner_id
                )
                self._followed = FollowedPuts(
                    writer.call, writer.close, self.on_followed_settled, lambda: writer.greetings
                )
            followed = self._followed
        return followed.start(local, object_id, owner_id, name, buffers)

    def wait_followed(self) -> None:
        """Until the writes readers follow that this connection began are finished (stored, or given up)."""
        with self._lock:
            followed = self._followed
        if followed is not None:
            followed.wait()

    @property
    def writing_followed(self) -> bool:
        """Whether a write readers follow that this connection began is not finished yet. Without the connection's
        lock, which a request holds until answered: a processor asks this before each task's end it tells its agent."""
        followed = self._followed  # one attribute read: atomic
        return followed is not None and followed.writing

    @property
    def greetings(self) -> int:
        """How many times a server accepted this connection's hello (once more after each restart of the server)."""
        return self._link.core.greetings

    def call(self, operation: StorageOperation) -> Answered:
        """One request without payload: its answer when ok; raises what a failed one means."""
        return self._call(operation)

    def get(self, object_id: bytes) -> ObjectBytes:
        """The object's bytes; raises MissingObjects when it is not stored."""
        frames = self.get_frames(object_id)
        return object_from_frames(frames, sum(len(frame) for frame in frames), self._address)

    def get_frames(self, object_id: bytes, copy_on_write: bool = False, pieces: bool = False) -> list[memoryview]:
        """The object's bytes as the frames it was put in: on the server's host, views of its segment file mapped
        (no copy; read-only and shared, or private and writable with `copy_on_write`); off it, read in parts
        (`read_in_parts`: each piece shows the transfer moving) into this process's own buffers, one per frame
        (writable: no further copy for `copy_on_write`). `pieces` lets a caller that joins pieces itself
        (`serializer.deserialize_frames`) take a reply's pieces as received when the server answers a mapped read
        with the bytes (`client_core.frames_or_pieces`). Processors map any object by its name, a client its own ones
        (the file's header says their owner); other reads ask `getMapped` first. Raises MissingObjects."""
        local = self.local_segments()
        if local is not None:
            if self._reads_by_name or self._owner_id:  # a client maps its own objects by name (their owner's file)
                frames = local.read(object_id, copy_on_write, None if self._reads_by_name else self._owner_id)
                if frames is not None:
                    return frames
            answer = self._call(GetMapped(ObjectID(bytes(object_id))))
            if isinstance(answer.reply.value, MappedSize):
                frames = local.read(object_id, copy_on_write)
                if frames is not None:
                    return frames
                # deleted or left memory between the answer and the map: ask for the bytes, as a get after it
            else:
                return self._received(answer, copy_on_write, pieces)
        # in parts: each piece that comes shows the transfer moving (client_core rule 5), however slow the link
        return self.read_in_parts(object_id, _frames_of)

    def map_together(self, object_ids: Sequence[bytes]) -> dict[bytes, list[memoryview]]:
        """The frames of `object_ids`, those not mapped at once by name asked for all at once (one `getMapped` each,
        pipelined), read-only as `get_frames` gives them: a host cache that lacks several fetches them side by side,
        each from the host that holds it, where reads one after another would fetch them in turn. Only where objects
        are mapped (`maps_objects`); an object not given here (missing, a request that failed, deleted before its
        map) is left out, for `get_frames` to read and to raise about."""
        local = self.local_segments()
        if local is None or not object_ids:
            return {}
        frames: dict[bytes, list[memoryview]] = {}
        asked: list[bytes] = []
        for object_id in map(bytes, object_ids):
            by_name = local.read(object_id, False) if self._reads_by_name else None  # as `get_frames` maps it
            if by_name is None:
                asked.append(object_id)
            else:
                frames[object_id] = by_name
        answers: list[tuple[bytes, Answered]] = []
        with self._lock:
            link = self._link
            now = time.monotonic()
            tickets = {link.core.request(GetMapped(ObjectID(object_id)), now=now): object_id for object_id in asked}
            outcomes = link.flush()
            while tickets:
                for outcome in outcomes:
                    if isinstance(outcome, (Answered, Failed)) and outcome.ticket in tickets:
                        object_id = tickets.pop(outcome.ticket)
                        if isinstance(outcome, Answered):
                            answers.append((object_id, outcome))
                if tickets:
                    outcomes = link.wait(link.core.next_deadline())
        for object_id, answer in answers:
            if isinstance(answer.reply.value, MappedSize):
                read = local.read(object_id, False)
                if read is not None:  # else deleted or evicted between the answer and the map: get_frames asks again
                    frames[object_id] = read
                continue
            with contextlib.suppress(ObjectStorageException, MissingObjects):  # get_frames' own read says why
                frames[object_id] = self._received(answer, False)  # answered with its bytes: not asked for again
        return frames

    def read_in_parts(self, object_id: bytes, consume: Callable[[ObjectInParts], T]) -> T:
        """`consume(source)`: what it makes of the object read over the socket as it comes (a getInParts: a large
        object's pieces come as messages of their own, so `consume` copies each to its place while the next ones
        cross; `serializer.deserialize_source`). For a reader off the server's host (on it, `get_frames` maps the
        object). A connection that drops mid-read has the request sent again (client_core rule 9): `consume` then
        starts over on the new answer. Raises MissingObjects."""
        with self._lock:
            link = self._link
            ticket = link.core.request(GetInParts(ObjectID(bytes(object_id))), now=time.monotonic())
            try:
                source = ObjectInParts(link, ticket, self._address, sent=link.flush())
                while True:
                    try:
                        return consume(source)
                    except _StartedOver:
                        source = source.again()
            finally:
                link.core.abandon(ticket)  # settled already, unless `consume` stopped early or raised

    def _received(self, answer: Answered, copy_on_write: bool, pieces: bool = False) -> list[memoryview]:
        total = reply_value(answer.reply, ObjectSize, self._address).total_bytes
        if sum(len(view) for view in answer.frames) != total:
            raise ObjectStorageException(f"object storage at {self._address} sent a truncated object")
        as_frames = frames_or_pieces if pieces else frames_as_put
        frames = list(as_frames(answer.reply, answer.frames, self._address))
        if copy_on_write:  # a received frame is this process's own and writable: only a read-only one is copied
            return [memoryview(bytearray(frame)) if frame.readonly else frame for frame in frames]
        return frames

    def maps_objects(self) -> bool:
        """Objects are mapped from the server's segment directory here (this process is on its host and sees it):
        `get_frames` maps them; elsewhere `read_in_parts` reads them as they come."""
        return self.local_segments() is not None

    def segment_directory(self) -> SegmentDirectory | None:
        """What the server's hello reply said of its segment directory (None: it has none), greeting it first."""
        core = self._link.core
        if not core.is_greeted:
            self._call(Info())
        described = core.segment_directory
        return described if isinstance(described, SegmentDirectory) and described.path else None

    def local_segments(self) -> LocalSegments | None:
        """The server's segment directory, when this process is on its host and sees it (greets the server first
        when this connection has not yet)."""
        if not self._map_local:
            return None
        core = self._link.core
        if not core.is_greeted:
            self._call(Info())  # the hello's reply says where the segment directory is
        return local_segments(core.segment_directory)

    def delete(self, object_ids: Iterable[bytes]) -> int:
        """Delete objects (missing ones are ignored); returns how many were removed."""
        ids = tuple(ObjectID(bytes(object_id)) for object_id in object_ids)
        if not ids:
            return 0
        return reply_value(self._call(Delete(ids)).reply, int, self._address)

    def exists(self, object_id: bytes) -> bool:
        return reply_value(self._call(Exists(ObjectID(bytes(object_id)))).reply, bool, self._address)

    def info(self) -> StorageInfo:
        return reply_value(self._call(Info()).reply, StorageInfo, self._address)

    def delete_owner(self, owner_id: bytes) -> int:
        """Delete every object put with this owner id; returns how many were removed."""
        return reply_value(self._call(DeleteOwner(bytes(owner_id))).reply, int, self._address)

    def close(self) -> None:
        """Close, once the writes readers follow that this connection began are done (followed_put.py)."""
        with self._lock:
            followed, self._followed = self._followed, None
        if followed is not None:
            followed.close()
        with self._lock:
            if self._is_closed:
                return
            self._is_closed = True
            self._link.core.on_closed()
            self._link.drop()
            if self._is_factory_owned:
                self._sockets.close()

    def _call(self, operation: StorageOperation, payload: list[memoryview] | tuple[()] = ()) -> Answered:
        with self._lock:
            link = self._link
            ticket = link.core.request(operation, payload, now=time.monotonic())
            outcomes = link.flush()
            while True:
                for outcome in outcomes:
                    if isinstance(outcome, Answered) and outcome.ticket == ticket:
                        return outcome
                    if isinstance(outcome, Failed) and outcome.ticket == ticket:
                        raise outcome.error
                outcomes = link.wait(link.core.next_deadline())
