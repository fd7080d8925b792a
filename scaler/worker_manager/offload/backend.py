"""The seam a remote system implements to run an offloading manager's tasks: `OffloadBackend`, three blocking
verbs (submit, poll, cancel) plus close and orphan cleanup, and the values that cross it (a `RemoteJob` in, a
`JobOutcome` out, an `OffloadError` when the system refuses). `executor.OffloadExecutor` calls it from its
threads; `aws_hpc/batch_backend.py` and `symphony/soam_backend.py` implement it. Nothing here does I/O."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


class OffloadError(Exception):
    """The remote system refused a call; the message says what it answered (shown to the task's client)."""


@dataclass(frozen=True, slots=True)
class RemoteJob:
    key: str  #: unique within the proxy for its lifetime; the backend names its job after it
    bundle: bytes  #: `remote_bundle.pack_task`'s bundle: what the remote side hands to `run_bundle`


@dataclass(frozen=True, slots=True)
class JobOutcome:
    """How a submitted job ended, reported once by `poll`."""

    key: str
    outcome: bytes | None  #: `run_bundle`'s answer; None when the job ended without one
    failure: str = ""  #: why there is no outcome: "AWS Batch job 1f2e FAILED: Essential container exited"
    host_lost: bool = False  #: the machine was taken away (spot reclaim): run the task again


class OffloadBackend(Protocol):
    """A remote system that runs bundles. Calls are blocking and may come from different threads at once."""

    #: the system's name in messages ("AWS Batch", "IBM Symphony")
    name: str

    @property
    def batch_window_seconds(self) -> float:
        """How long tasks arriving together are collected before one `submit` (0: at once)."""

    @property
    def poll_interval_seconds(self) -> float:
        """How often `poll` is called while jobs are in flight."""

    def submit(self, jobs: list[RemoteJob]) -> None:
        """Start these jobs (one call may become one array job); raise OffloadError when refused."""

    def poll(self) -> list[JobOutcome]:
        """The jobs that ended since the last call, each reported once; jobs cancelled are not reported."""

    def cancel(self, key: str, reason: str) -> None:
        """Stop a job (queued or running); unknown or finished keys are a no-op."""

    def close(self) -> None:
        """Cancel every job still in flight and release clients and sessions."""

    def cancel_orphans(self, key_prefix: str) -> int:
        """Cancel the jobs, still queued or running, of a proxy that died (their keys start with `key_prefix`,
        made by another instance); how many. A system whose jobs end with their proxy's session returns 0."""
