"""What one client has stored: each object id stored once, whichever thread asks first (`StoredOnce`). The task
encoder computes the ids and hands objects here (`ObjectSink`); the client's storage side is built around one and
forgets an object whose put failed, so that its next use stores it again."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Protocol

from scaler.protocol.ids import ObjectID

#: A put: (object id, payload (bytes or frames), the object's name for the storage's listing).
Put = Callable[[ObjectID, Any, str], None]


class ObjectSink(Protocol):
    """Where the task encoder stores objects."""

    def store(self, object_id: ObjectID, payload: Any, name: str, later: bool = False) -> None:
        """Store the object unless this id is stored already. `later`: the put may be pipelined (it returns before
        the object is stored, and the tasks encoded now are held until it is)."""

    def forget_all(self) -> None:
        """The client's objects were deleted (`clear()`): every object is stored again at its next use."""


class StoredReader(Protocol):
    """How the task encoder reads back what it stored, to take a large object's digest from its stored copy
    (`TaskEncoder.put_object`) instead of hashing it on the way in."""

    def reads_locally(self) -> bool:
        """Whether stored objects are read back without a transfer (mapped on the storage's host)."""

    def stored_frames(self, object_id: ObjectID) -> list[memoryview] | None:
        """The stored object's frames, as it was put (None: it is not stored any more)."""


class StoredOnce:
    """An `ObjectSink` over `put` (returns once stored) and, optionally, `put_later` (pipelined). Thread-safe: a
    thread asking for an id another thread is storing right now waits for that put (a task that names the object
    must not reach a processor before the object reaches the storage)."""

    def __init__(self, put: Put, put_later: Put | None = None) -> None:
        self._put = put
        self._put_later = put_later
        self._stored: set[ObjectID] = set()
        self._names: dict[ObjectID, str] = {}  #: what each stored object is ("argument of ndarray"), for messages
        #: objects being stored synchronously right now, so that another thread with the same content waits for it
        self._storing: dict[ObjectID, threading.Event] = {}
        self._lock = threading.Lock()

    def store(self, object_id: ObjectID, payload: Any, name: str, later: bool = False) -> None:
        pipelined = later and self._put_later is not None
        while True:
            with self._lock:
                if object_id not in self._stored:
                    self._stored.add(object_id)  # before the put: a put that fails forgets it again
                    self._names[object_id] = name
                    storing = None if pipelined else self._storing.setdefault(object_id, threading.Event())
                    break
                pending = self._storing.get(object_id)
            if pending is None:
                return
            pending.wait()
            if object_id in self._stored:
                return
        try:
            (self._put_later if pipelined and self._put_later is not None else self._put)(object_id, payload, name)
        except BaseException:
            self.forget(object_id)
            raise
        finally:
            if storing is not None:
                with self._lock:
                    self._storing.pop(object_id, None)
                storing.set()

    def forget(self, object_id: ObjectID) -> None:
        """The object could not be stored: its next use stores it again."""
        with self._lock:
            self._stored.discard(object_id)
            self._names.pop(object_id, None)

    def forget_all(self) -> None:
        with self._lock:
            self._stored.clear()
            self._names.clear()

    def names(self) -> dict[ObjectID, str]:
        """Each object stored, with what it is."""
        with self._lock:
            return dict(self._names)
