"""Identifiers used on the wire. They are opaque bytes; the NewTypes keep them apart in type checks."""

from __future__ import annotations

import itertools
import os
import uuid
from typing import NewType

TaskID = NewType("TaskID", bytes)
ClientID = NewType("ClientID", bytes)
WorkerID = NewType("WorkerID", bytes)
ObjectID = NewType("ObjectID", bytes)
GraphID = NewType("GraphID", bytes)
ManagerID = NewType("ManagerID", str)
PeerID = NewType("PeerID", bytes)  #: ZeroMQ routing identity of any peer of the scheduler

CLIENT_PREFIX = b"Client|"
WORKER_PREFIX = b"Worker|"


class _UniqueIds:
    """16-byte ids: 8 random bytes drawn once per process (again after a fork), then a counter.

    Unique across processes with overwhelming probability, and cheap: reading the system's random
    source costs tens of microseconds per call on some machines, a counter nanoseconds."""

    def __init__(self) -> None:
        self._reseed()
        if hasattr(os, "register_at_fork"):  # absent where there is no fork (Windows), and so no forked child
            os.register_at_fork(after_in_child=self._reseed)

    def _reseed(self) -> None:
        self._prefix = os.urandom(8)
        self._counter = itertools.count()

    def next(self) -> bytes:
        return self._prefix + next(self._counter).to_bytes(8, "big")


_ids = _UniqueIds()


def new_task_id() -> TaskID:
    return TaskID(_ids.next())


def new_graph_id() -> GraphID:
    return GraphID(_ids.next())


def new_client_id(name: str = "") -> ClientID:
    suffix = uuid.uuid4().hex.encode()
    return ClientID(CLIENT_PREFIX + (name.encode() + b"|" if name else b"") + suffix)


def new_worker_id(worker_type: str) -> WorkerID:
    return WorkerID(WORKER_PREFIX + worker_type.encode() + b"|" + uuid.uuid4().hex.encode())


def new_random_object_id() -> ObjectID:
    return ObjectID(os.urandom(16))


def unit_of_worker(worker_id: bytes) -> str | None:
    """`Worker|NAT-3f2a9c1b0d4e|<uuid hex>` -> `3f2a9c1b0d4e`: the unit (container, instance, job) a worker
    started by a manager runs in; None for a worker id without one."""
    parts = worker_id.split(b"|")
    if len(parts) != 3 or parts[0] != b"Worker":
        return None
    _prefix, separator, unit_id = parts[1].rpartition(b"-")
    return unit_id.decode(errors="replace") if separator and unit_id else None


def short_task_id(task_id: bytes) -> str:
    """How a task is named in reprs and streamed output: `9f3a:42`, the first 4 hex digits of its process's random
    part (tells processes apart) and its counter (tells the tasks of a process apart). Every task id of a process
    starts with the same 8 random bytes, so a prefix of the hex named every task of a client alike."""
    if len(task_id) != 16:
        return task_id.hex()[:12]
    return f"{task_id[:2].hex()}:{int.from_bytes(task_id[8:], 'big')}"


def short(identifier: bytes) -> str:
    """A readable, short form of an id for log lines."""
    if identifier.startswith((CLIENT_PREFIX, WORKER_PREFIX)):
        text = identifier.decode(errors="replace")
        head, _, tail = text.rpartition("|")
        return f"{head}|{tail[:8]}"
    return identifier.hex()[:12]
