"""scaler: submit Python functions as tasks; a scheduler runs them on local or cloud workers.

The public API is re-exported here lazily, so that `import scaler` stays cheap for processes that
only need a part of the package (workers, the scheduler).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from scaler.errors import (
    ActorDiedError,
    ActorRestartedError,
    ClientCancelledException,
    ClientQuitException,
    ClientShutdownException,
    DeserializeObjectError,
    DisconnectedError,
    IncompatiblePeerError,
    MissingObjects,
    NoWorkerError,
    ObjectStorageException,
    ProcessorDiedError,
    ProcessorOutOfMemoryError,
    TaskExceptionNotSerializableError,
    TaskNotFoundError,
    TaskTimeoutError,
    WorkerDiedError,
)
from scaler.lazy_exports import lazy_exports
from scaler.version import __version__

if TYPE_CHECKING:
    from scaler.client.actors import ActorHandle
    from scaler.client.async_client import AsyncClient
    from scaler.client.client import Client
    from scaler.client.future import ScalerFuture
    from scaler.client.progress import progress
    from scaler.client.streams import TaskStream
    from scaler.cluster.combo import SchedulerClusterCombo
    from scaler.monitor.performance_report import performance_report
    from scaler.payload.references import ObjectReference, copy_on_write
    from scaler.payload.serializer import Serializer

logging.getLogger("scaler").addHandler(logging.NullHandler())

_LAZY = {
    "ActorHandle": "scaler.client.actors",
    "AsyncClient": "scaler.client.async_client",
    "Client": "scaler.client.client",
    "ScalerFuture": "scaler.client.future",
    "ObjectReference": "scaler.payload.references",
    "copy_on_write": "scaler.payload.references",
    "Serializer": "scaler.payload.serializer",
    "SchedulerClusterCombo": "scaler.cluster.combo",
    "TaskStream": "scaler.client.streams",
    "progress": "scaler.client.progress",
    "performance_report": "scaler.monitor.performance_report",
}


__getattr__ = lazy_exports(__name__, _LAZY, globals())


__all__ = [
    "ActorDiedError",
    "ActorHandle",
    "ActorRestartedError",
    "AsyncClient",
    "Client",
    "ClientCancelledException",
    "ClientQuitException",
    "ClientShutdownException",
    "DeserializeObjectError",
    "DisconnectedError",
    "IncompatiblePeerError",
    "MissingObjects",
    "NoWorkerError",
    "ObjectReference",
    "ObjectStorageException",
    "ProcessorDiedError",
    "ProcessorOutOfMemoryError",
    "ScalerFuture",
    "SchedulerClusterCombo",
    "Serializer",
    "TaskExceptionNotSerializableError",
    "TaskNotFoundError",
    "TaskStream",
    "TaskTimeoutError",
    "WorkerDiedError",
    "__version__",
    "copy_on_write",
    "performance_report",
    "progress",
]
