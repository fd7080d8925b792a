"""Exceptions a user of scaler can see. Importable from `scaler` and from `scaler.utility.exceptions`."""

from __future__ import annotations


class ScalerError(Exception):
    """Base of the exceptions raised by scaler itself (not by user functions)."""


class WorkerDiedError(ScalerError):
    """The task's worker died (process gone, connection closed or silent) more often than the retry budget."""


class ProcessorDiedError(ScalerError):
    """The process running the task exited while running it (segfault, OOM kill, os._exit, ...)."""


class ProcessorOutOfMemoryError(ProcessorDiedError):
    """The process running the task was killed by the kernel's OOM killer, or died at the worker's memory limit.
    The message gives the task's peak memory as sampled and the limit. The task is not run again on a worker of
    the same size: it would die there too."""


class TaskTimeoutError(ScalerError, TimeoutError):
    """The task ran longer than the worker's task timeout and was stopped."""


class TaskNotFoundError(ScalerError):
    """The scheduler does not know the task (already finished or never submitted)."""


class NoWorkerError(ScalerError):
    """No worker can run the task."""


class DisconnectedError(ScalerError, ConnectionError):
    """The connection to the scheduler is gone; pending futures cannot complete."""


class JobLostError(ScalerError):
    """The job of a followed task was lost: the scheduler restarted, and it keeps jobs in memory only."""


class ActorDiedError(ScalerError):
    """The actor a call was made to ended before the call did: it was stopped or killed, its client left, its
    constructor raised, or it was lost more often than its `max_restarts`. The message says which."""


class ActorRestartedError(ActorDiedError):
    """The actor was lost (its worker or processor died) while the call was at it: the actor starts again elsewhere
    by running its constructor again (its state is new), and the call does not run again. The message says why, and
    which restart of how many allowed; calls made after it go to the new instance."""


class ClientCancelledException(ScalerError):
    """The task was cancelled because its client cleared, disconnected or shut down."""


class ClientShutdownException(ScalerError, ValueError):
    """The scheduler refused the client's request to shut the cluster down (protected mode). A ValueError, as
    the reference raises, so code that catches that still works."""


class ClientQuitException(ScalerError):
    """The client was used after it disconnected."""


class MissingObjects(ScalerError, LookupError):
    """An object a task needs is not in object storage (deleted by clear(), or its owner left)."""


class TaskExceptionNotSerializableError(ScalerError):
    """The task raised an exception that could not be pickled; its text and traceback are kept."""


class ResultNotSerializableError(ScalerError):
    """The task's return value could not be serialized."""


class DeserializeObjectError(ScalerError):
    """A payload could not be deserialized (missing module on this side, corrupt bytes, ...)."""


class ObjectStorageException(ScalerError):
    """The object storage server could not carry out a request."""


class ObjectStorageFullError(ObjectStorageException):
    """The object storage server refused a put: it can hold nothing more (its memory budget is reached and its
    spill directory is full or absent). The message names the limit; what it stores is still served."""


class IncompatiblePeerError(ScalerError, ConnectionError):
    """A peer refused the connection: different protocol version or Python version."""


class PreloadError(ScalerError):
    """A worker's --preload or --preimport specification is malformed, or its function or import failed."""


class RemoteTraceback(Exception):
    """Carries the formatted traceback of an exception raised on a worker (set as `__cause__`)."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text

    def __str__(self) -> str:
        return self.text


__all__ = [
    "ActorDiedError",
    "ActorRestartedError",
    "ClientCancelledException",
    "ClientQuitException",
    "ClientShutdownException",
    "DeserializeObjectError",
    "DisconnectedError",
    "IncompatiblePeerError",
    "JobLostError",
    "MissingObjects",
    "NoWorkerError",
    "ObjectStorageException",
    "ObjectStorageFullError",
    "PreloadError",
    "ProcessorDiedError",
    "ProcessorOutOfMemoryError",
    "RemoteTraceback",
    "ResultNotSerializableError",
    "ScalerError",
    "TaskExceptionNotSerializableError",
    "TaskNotFoundError",
    "TaskTimeoutError",
    "WorkerDiedError",
]
