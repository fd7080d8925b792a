"""Identifiers used on the wire. They are opaque bytes; the NewTypes keep them apart in type checks."""

from __future__ import annotations

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


def new_task_id() -> TaskID:
    return TaskID(os.urandom(16))


def new_graph_id() -> GraphID:
    return GraphID(os.urandom(16))


def new_client_id(name: str = "") -> ClientID:
    suffix = uuid.uuid4().hex.encode()
    return ClientID(CLIENT_PREFIX + (name.encode() + b"|" if name else b"") + suffix)


def new_worker_id(worker_type: str) -> WorkerID:
    return WorkerID(WORKER_PREFIX + worker_type.encode() + b"|" + uuid.uuid4().hex.encode())


def new_random_object_id() -> ObjectID:
    return ObjectID(os.urandom(16))


def short(identifier: bytes) -> str:
    """A readable, short form of an id for log lines."""
    if identifier.startswith((CLIENT_PREFIX, WORKER_PREFIX)):
        text = identifier.decode(errors="replace")
        head, _, tail = text.rpartition("|")
        return f"{head}|{tail[:8]}"
    return identifier.hex()[:12]
