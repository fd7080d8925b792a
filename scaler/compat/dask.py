"""Dask's `distributed` API on scaler: `from scaler.compat.dask import Client` in place of
`from dask.distributed import Client`, the address of a scaler scheduler in place of Dask's, and the rest of the code
runs unchanged (docs/guide/migrating.md, "Dask's distributed.Client").

Supported: `Client` (`dask_client`: submit, map, gather, scatter, compute, persist, cancel, get, run, upload_file,
wait_for_workers, scheduler_info, nthreads, close, shutdown, the context manager), `Future` (`dask_futures`),
`LocalCluster`, `wait`, `as_completed`, `fire_and_forget`, `futures_of`, `default_client`, `get_client` (inside a
task, a client of the task's own scheduler), `secede` and `rejoin` (nothing to do: a task waiting on its children
gives its place back by itself), `worker_client`. Dask itself is not needed for futures; compute and persist of
collections need it (the `dask` extra). What scaler does not offer raises NotImplementedError naming what to use
instead (`REFUSED`), never a silent stand-in.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from typing import Any

from scaler.cluster.combo import SchedulerClusterCombo
from scaler.compat.dask_client import Client, default_client
from scaler.compat.dask_cluster import LOCAL_CLUSTER_TUNING, warn_once
from scaler.compat.dask_futures import Future
from scaler.compat.dask_waits import DoneAndNotDoneFutures, as_completed, fire_and_forget, futures_of, wait
from scaler.payload import processor_context

__all__ = [
    "Client",
    "DoneAndNotDoneFutures",
    "Future",
    "LocalCluster",
    "as_completed",
    "default_client",
    "fire_and_forget",
    "futures_of",
    "get_client",
    "rejoin",
    "secede",
    "wait",
    "worker_client",
]


class LocalCluster:
    """Dask's `LocalCluster` as a scaler local cluster: `n_workers` (default: one per CPU) times `threads_per_worker`
    (default 1) workers, each running one task at a time. `Client(cluster)` connects to it; `close()` stops it."""

    def __init__(self, n_workers: int | None = None, threads_per_worker: int | None = None, **kwargs: Any) -> None:
        for option in sorted(set(kwargs) & LOCAL_CLUSTER_TUNING):
            kwargs.pop(option)
            warn_once(f"LocalCluster({option}=...)", "it tunes Dask's local cluster and means nothing on scaler")
        if kwargs:
            raise TypeError(f"LocalCluster() got unexpected keyword argument(s): {', '.join(sorted(kwargs))}")
        count = (n_workers if n_workers is not None else (os.cpu_count() or 1)) * (threads_per_worker or 1)
        self._combo = SchedulerClusterCombo(n_workers=count, logging_level="WARNING")
        self.scheduler_address = self._combo.get_address()

    @property
    def dashboard_link(self) -> str | None:
        return self._combo.dashboard_link

    def get_client(self) -> Client:
        return Client(self)

    def close(self) -> None:
        self._combo.shutdown()

    def __enter__(self) -> LocalCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"LocalCluster(scheduler_address={self.scheduler_address!r})"


_task_client: list[Client] = []
_task_client_lock = threading.Lock()


def get_client(address: str | None = None, timeout: float | None = None, resolve_address: bool = True) -> Client:
    """Inside a task: a client of the task's own scheduler (one per processor), to submit tasks from a task. Outside:
    the default client (the one made last and not closed), or one of `address`."""
    if address is not None:
        return Client(address, timeout=timeout)
    if processor_context.current() is None:
        return default_client()
    with _task_client_lock:
        if not _task_client or _task_client[0].status == "closed":
            _task_client[:] = [Client(set_as_default=False)]
        return _task_client[0]


def secede() -> None:
    """Nothing to do on scaler: a task that waits on the tasks it submitted gives its place to another meanwhile."""


def rejoin() -> None:
    """Nothing to do on scaler (see `secede`)."""


@contextlib.contextmanager
def worker_client(timeout: float | None = None, separate_thread: bool = True) -> Iterator[Client]:
    """Inside a task: `get_client()` (there is nothing to secede from, see `secede`)."""
    yield get_client(timeout=timeout)


class _Refused:
    """A part of Dask's API that scaler does not offer: calling it (or making one) raises, saying what to use."""

    def __init__(self, name: str, reason: str) -> None:
        self._name = name
        self._reason = reason

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"{self._name} is not supported by scaler.compat.dask: {self._reason}")

    def __repr__(self) -> str:
        return f"<not supported: {self._name}>"


_COORDINATION = (
    "scaler's scheduler keeps no shared variables, queues or locks between clients and tasks; pass values as task "
    "arguments and results, or use an actor (Client.native.actor, `scaler --docs actors_and_streams`) as the shared "
    "state"
)
#: Dask's names that scaler refuses, with the reason each one gives.
REFUSED = {
    "Variable": _COORDINATION,
    "Queue": _COORDINATION,
    "Lock": _COORDINATION,
    "MultiLock": _COORDINATION,
    "Event": _COORDINATION,
    "Semaphore": _COORDINATION,
    "Pub": _COORDINATION,
    "Sub": _COORDINATION,
    "Actor": "Dask actors are not supported; use scaler's actors, Client.native.actor(Cls, ...)",
    "get_worker": "a task runs in a scaler processor, not a Dask worker; processor_context tells a task about it",
    "performance_report": "scaler_top, the dashboard and a future's .story() show what ran where and when",
    "get_task_stream": "a future's .story() (of Client.native's futures) records each task's history",
}

for _name, _reason in REFUSED.items():
    globals()[_name] = _Refused(_name, _reason)
