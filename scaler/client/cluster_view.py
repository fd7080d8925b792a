"""What a client sees of its cluster: the workers the scheduler knows, their processors, capabilities and the tasks they
hold now, read from one status snapshot of the scheduler's monitor feed (docs/protocol.md, monitor feed).

The scheduler publishes that snapshot every `status_report_interval_seconds` (1 s by default) to every reader; a client
reads the next one, so an answer takes up to that long and is never older. No message is added to the client's
connection for it. The monitor address is the one the scheduler's connection file names, else the one of a local
cluster this process started, else the scheduler's port + 2 (the scheduler's default); a scheduler started with
another `--monitor-address` is read by giving it (`read(..., monitor_address=...)`).

The front ends answer from it: Dask's `scheduler_info()` and `nthreads()`, Ray's `cluster_resources()`,
`available_resources()`, `nodes()` and `get_gpu_ids()`; `Client.run` finds the worker a task ran on by its processor.
"""

from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass

from scaler.io.sockets import TransportSecurity
from scaler.monitor.feed import FeedError, FeedReader
from scaler.protocol import messages as m
from scaler.protocol.feed import STATUS_TOPIC

#: How long a read waits for a snapshot: several of the scheduler's default periods (a reader's subscription takes
#: a moment to be heard, and a busy scheduler publishes late).
READ_TIMEOUT_SECONDS = 10.0


class ClusterViewError(ConnectionError):
    """The scheduler's view could not be read; the message says why and what to give."""


@dataclass(frozen=True)
class ClusterWorker:
    """One worker as the scheduler sees it. A worker runs one task at a time (a task waiting on nested tasks gives its
    place to another meanwhile); it may hold a few more, queued at it, up to its capacity."""

    worker_id: str  #: its id, as the monitor shows it
    hostname: str
    pid: int  #: its agent's process
    capacity: int  #: tasks the scheduler may give it at once (the one it runs and those queued at it)
    capabilities: dict[str, int]  #: what it offers (-1: no amount given)
    running: int  #: tasks it runs now
    held: int  #: tasks it holds now (running, or queued at it)
    processor_pids: tuple[int, ...]  #: its processors' processes, as last reported

    @property
    def is_idle(self) -> bool:
        """It runs no task now."""
        return self.running == 0


@dataclass(frozen=True)
class ClusterView:
    scheduler_address: str
    monitor_address: str
    workers: tuple[ClusterWorker, ...]
    queued: int  #: tasks the scheduler holds that no worker has yet

    def worker_of_processor(self, pid: int, hostname: str) -> ClusterWorker | None:
        """The worker whose processors include the process `pid` of `hostname`."""
        for worker in self.workers:
            if worker.hostname == hostname and pid in worker.processor_pids:
                return worker
        return None


def read(
    scheduler_address: str,
    monitor_address: str,
    security: TransportSecurity | None,
    timeout_seconds: float = READ_TIMEOUT_SECONDS,
) -> ClusterView:
    """The next status snapshot of the scheduler, as a ClusterView (ClusterViewError when none comes in time)."""
    try:
        reader = FeedReader(monitor_address, topics=(STATUS_TOPIC,), security=security)
    except Exception as error:
        raise ClusterViewError(f"cannot read the scheduler's status at {monitor_address}: {error}") from error
    try:
        snapshot = _next_snapshot(reader, timeout_seconds)
    except FeedError as error:
        raise ClusterViewError(str(error)) from error
    finally:
        reader.close()
    if snapshot is None:
        raise ClusterViewError(
            f"no status from the scheduler's monitor address {monitor_address} within {timeout_seconds:g} s: is it "
            "the scheduler's monitor address (its port + 2 unless the scheduler was started with --monitor-address; "
            "give that one)?"
        )
    return ClusterView(
        scheduler_address,
        monitor_address,
        tuple(_worker_view(summary) for summary in snapshot.workers),
        snapshot.scheduler.queued,
    )


def _next_snapshot(reader: FeedReader, timeout_seconds: float) -> m.StatusSnapshot | None:
    deadline = time.monotonic() + timeout_seconds
    while (remaining := deadline - time.monotonic()) > 0:
        message = reader.receive(remaining)
        if isinstance(message, m.StatusSnapshot):
            return message
        if message is None:
            return None
    return None


def _worker_view(summary: m.WorkerSummary) -> ClusterWorker:
    status = summary.status
    return ClusterWorker(
        worker_id=summary.worker_id.decode(errors="replace"),
        hostname=summary.hostname,
        pid=summary.pid,
        capacity=summary.capacity,
        capabilities=dict(summary.capabilities),
        running=status.running,
        held=summary.assigned,
        processor_pids=tuple(processor.pid for processor in status.processors),
    )


def this_process() -> tuple[int, str]:
    """This process's pid and host name, as a worker reports its processors'."""
    return os.getpid(), socket.gethostname()
