"""A client's side of object storage: its own connection (opened at first use), the connections that read other
owners' objects (a followed job's results are its submitter's), what it stored (`objects`: each object once, the
task encoder's sink) and the pipeline that stores arguments while `submit` returns (`object_storage.put_pipeline`).
The client's session owns one; nothing here knows about tasks beyond handing them on.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from scaler.client.holder_reads import HolderReads
from scaler.errors import MissingObjects
from scaler.io.sockets import TransportSecurity
from scaler.object_storage.put_pipeline import PutPipeline
from scaler.payload.stored_objects import StoredOnce
from scaler.protocol.ids import ObjectID, TaskID

if TYPE_CHECKING:
    from scaler.client.future import ScalerFuture
    from scaler.object_storage.connection import ObjectStorageConnection

#: A task on its way to the scheduler: its id, its future and its encoded message.
HeldTask = tuple[TaskID, "ScalerFuture[Any]", bytes]

T = TypeVar("T")

#: On a thread that reads results ahead (client/read_ahead.py): the connection of its own it reads with.
_reading = threading.local()


class ClientObjectStorage:
    """Thread-safe. `release` sends tasks on (the client's agent)."""

    def __init__(
        self,
        address: str,
        owner_id: bytes,
        security: TransportSecurity | None,
        timeout_seconds: float,
        release: Callable[[list[HeldTask]], None],
    ) -> None:
        self._address = address
        self._owner_id = owner_id
        self._security = security
        self._timeout_seconds = timeout_seconds
        self._release = release
        #: what this client stored, each object once; a put that failed is forgotten, so its next use stores it again
        self.objects = StoredOnce(self._store_now, self._store_later)
        self._lock = threading.Lock()
        self._own: ObjectStorageConnection | None = None
        self._others: dict[bytes, ObjectStorageConnection] = {}
        self._puts: PutPipeline[HeldTask] | None = None
        self._readers: list[ObjectStorageConnection] = []  #: reading connections not in use (read_ahead.py)
        self._all_readers: list[ObjectStorageConnection] = []
        #: results of this client read from the hosts that hold them (client/holder_reads.py)
        self._holder_reads = HolderReads(owner_id, security, timeout_seconds)

    @property
    def address(self) -> str:
        return self._address

    @property
    def is_pipelining(self) -> bool:
        """Arguments are being stored through the pipeline (tasks may be held behind their puts)."""
        return self._puts is not None

    def connection(self) -> ObjectStorageConnection:
        """The connection of this client's own objects (on a thread reading results ahead, that thread's own)."""
        if getattr(_reading, "side", None) is self:
            return _reading.connection  # type: ignore[no-any-return]
        with self._lock:
            if self._own is None:
                self._own = self._connect(self._owner_id)
            return self._own

    def as_reader(self, function: Callable[[], T]) -> T:
        """`function()` on this thread with a connection of its own for this client's objects (results read ahead,
        several at once: read_ahead.py); the connections are kept for the next ones, and closed with the others."""
        with self._lock:
            connection = self._readers.pop() if self._readers else None
        if connection is None:
            connection = self._connect(self._owner_id)
            with self._lock:
                self._all_readers.append(connection)
        _reading.side, _reading.connection = self, connection
        try:
            return function()
        finally:
            _reading.side = _reading.connection = None
            with self._lock:
                self._readers.append(connection)

    def of_owner(self, owner_id: bytes) -> ObjectStorageConnection:
        """A connection that reads the objects of `owner_id` (with CURVE only a client of the same key may claim
        it)."""
        if owner_id == self._owner_id:
            return self.connection()
        with self._lock:
            connection = self._others.get(owner_id)
            if connection is None:
                connection = self._others[owner_id] = self._connect(owner_id)
            return connection

    def read_result(self, storage: ObjectStorageConnection, object_id: bytes, consume: Callable[[Any], T]) -> T:
        """`consume(source)` of a result of this client's read over a socket (off the storage's host): from the host
        that holds it when the storage server names one, else from `storage` (client/holder_reads.py)."""
        return self._holder_reads.read_in_parts(storage, object_id, consume)

    def reads_locally(self) -> bool:
        """Whether this client's objects are read back without a transfer (it is on the storage's host)."""
        return self.connection().local_segments() is not None

    def stored_frames(self, object_id: ObjectID) -> list[memoryview] | None:
        """One of this client's objects as it was stored (read-only; None when it is not stored any more)."""
        try:
            return self.connection().get_frames(object_id)
        except MissingObjects:
            return None

    def restore(self, held: list[tuple[ObjectID, Callable[[], Any], str]]) -> tuple[int, dict[ObjectID, str]] | None:
        """After a scheduler restart: when storage lost what this client stored (it restarted, empty, with a scheduler
        that started it), store again what it holds (`held`: id, a call that makes the payload again, name) and
        forget the rest, stored again at its next use; (how many were stored again, what is lost for good by id).
        None when storage still has what the client holds (a storage of its own, which did not restart)."""
        connection = self.connection()
        stored = self.objects.names()
        probe = held or [(object_id, lambda: b"", name) for object_id, name in list(stored.items())[:1]]
        missing = [entry for entry in probe if not connection.exists(entry[0])]
        if not missing:
            return None
        missing = [entry for entry in missing if entry in held]
        self.objects.forget_all()
        for object_id, payload, name in missing:
            self.objects.store(object_id, payload(), name)
        again = {object_id for object_id, _, _ in held}
        return len(missing), {object_id: name for object_id, name in stored.items() if object_id not in again}

    def delete_all(self) -> None:
        """Delete every object of this client (`clear()`; the encoder forgets them, `TaskEncoder.forget_stored`)."""
        self.connection().delete_owner(self._owner_id)

    def hand_over(self, tasks: list[HeldTask]) -> None:
        """Tasks on, after the arguments they were encoded with are stored (see put_pipeline)."""
        if self._puts is None:
            self._release(tasks)
        else:
            self._puts.submit(tasks)

    def flush(self) -> None:
        """Before what must not overtake held tasks (a graph, a cancel, clear, leaving)."""
        if self._puts is not None:
            self._puts.flush(self._timeout_seconds)

    def close(self) -> None:
        with self._lock:
            puts, self._puts = self._puts, None
            connections = [self._own, *self._others.values(), *self._all_readers]
            self._own = None
            self._others.clear()
            self._readers.clear()
            self._all_readers.clear()
        for connection in connections:
            if connection is not None:
                connection.close()
        self._holder_reads.close()
        if puts is not None:
            puts.close(0.0)

    def _pipeline(self) -> PutPipeline[HeldTask]:
        with self._lock:
            if self._puts is None or self._puts.is_closed:  # none yet, or stopped by a storage failure
                self._puts = PutPipeline(
                    self._address, self._owner_id, self._security, self._timeout_seconds,
                    release=self._release, fail=_fail_held, forget=self.objects.forget,
                )  # fmt: skip
            return self._puts

    def _store_now(self, object_id: ObjectID, payload: bytes | list[Any], name: str) -> None:
        self.connection().put(object_id, payload, owner_id=self._owner_id, name=name)

    def _store_later(self, object_id: ObjectID, payload: bytes | list[Any], name: str) -> None:
        """An argument's put, pipelined: tasks go through `hand_over`, which holds them until it is stored. On the
        storage's host the object is written into its segment directory here, and only its adoption is pipelined."""
        self._pipeline().put(object_id, payload, name, self.connection().local_segments())

    def _connect(self, owner_id: bytes) -> ObjectStorageConnection:
        from scaler.object_storage.connection import ObjectStorageConnection

        return ObjectStorageConnection(
            self._address, role="client", timeout_seconds=self._timeout_seconds, security=self._security,
            owner_id=owner_id,
        )  # fmt: skip


def _fail_held(tasks: list[HeldTask], error: BaseException) -> None:
    """Tasks whose arguments could not be stored: they never left; their futures fail with the storage's error."""
    for _, future, _ in tasks:
        future.set_failed(error)
