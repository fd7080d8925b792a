"""The Dask front end's cluster side: the local cluster `Client()` starts from Dask's options, the address a `Client`
is given (a string, a cluster, a scheduler file), what `Client.scheduler` tells, and the warning given once for an
option that only tunes Dask's own machinery.
"""

from __future__ import annotations

import json
import os
import warnings
from typing import Any

from scaler.cluster.combo import SchedulerClusterCombo

#: Options of Dask's LocalCluster that tune Dask's own processes and dashboard: accepted, with a warning, and unused.
LOCAL_CLUSTER_TUNING = frozenset(
    {"processes", "dashboard_address", "silence_logs", "memory_limit", "host", "scheduler_port", "worker_class",
     "protocol", "interface", "asynchronous", "name"}
)  # fmt: skip
#: Dask's Client settings that tune its own connection: accepted, with a warning, and unused.
CLIENT_TUNING = frozenset({"heartbeat_interval", "serializers", "deserializers", "direct_to_workers",
                           "connection_limit", "name", "extensions", "loop"})  # fmt: skip

_warned: set[str] = set()


def warn_once(what: str, reason: str) -> None:
    if what not in _warned:
        _warned.add(what)
        warnings.warn(f"{what}: {reason}", UserWarning, stacklevel=3)


class SchedulerAddress:
    """What `Client.scheduler` tells: the scheduler's address."""

    def __init__(self, address: str) -> None:
        self.address = address

    def __repr__(self) -> str:
        return f"<Scheduler {self.address!r}>"


def address_of(address: Any, scheduler_file: str | None) -> str | None:
    if scheduler_file is not None:
        with open(scheduler_file) as file:
            return str(json.load(file)["address"])
    if address is None or isinstance(address, str):
        return address
    found = getattr(address, "scheduler_address", None) or getattr(address, "get_address", lambda: None)()
    if not isinstance(found, str):
        raise TypeError(f"Client(address): a scheduler's address or a cluster, not {type(address).__name__}")
    return found


def local_cluster(options: dict[str, Any]) -> SchedulerClusterCombo:
    """Dask's LocalCluster options: n_workers (default: one per CPU) times threads_per_worker (default 1) workers."""
    for option in sorted(set(options) & LOCAL_CLUSTER_TUNING):
        options.pop(option)
        warn_once(f"Client({option}=...)", "it tunes Dask's local cluster and means nothing on scaler")
    n_workers = options.pop("n_workers", None)
    threads = options.pop("threads_per_worker", None) or 1
    if options:
        raise TypeError(f"Client() got unexpected keyword argument(s): {', '.join(sorted(options))}")
    count = (n_workers if n_workers is not None else (os.cpu_count() or 1)) * threads
    return SchedulerClusterCombo(n_workers=count, logging_level="WARNING")


def is_collection(value: Any) -> bool:
    return hasattr(value, "__dask_graph__") and hasattr(value, "__dask_keys__")
