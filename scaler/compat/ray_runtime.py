"""Ray's questions about the cluster and the running code, answered on scaler: `ray.cluster_resources()`,
`ray.available_resources()`, `ray.nodes()`, `ray.get_gpu_ids()`, and what `ray.get_runtime_context()`
(`ray_context`) reads of the running code.

The cluster's answers come from the scheduler's view of its workers (`client/cluster_view.py`, one status snapshot of
its monitor feed). A scaler worker runs one task at a time: it is one CPU. A host is a node (its workers' resources
summed; its id is a digest of its host name, the same in a task running there). A worker's capabilities are its
resources: "gpu" is Ray's "GPU", any other name a custom resource; a capability given without an amount counts 1 per
worker. "Available" is what the workers that run no task now offer.

The running code's answers (ids, assigned resources, the actor) come from what the remote call carried
(`TaskInfo`, set by `ray_remote` and `ray_actors` around the call on the worker): the job is the driver's client,
the task the running task, the actor the actor's id.
"""

from __future__ import annotations

import hashlib
import os
import socket
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from scaler.client.cluster_view import ClusterView, ClusterWorker
from scaler.compat.ray_session import GPU_CAPABILITY, current
from scaler.payload import processor_context


@dataclass(frozen=True)
class TaskInfo:
    """What a remote call tells the code it runs (`ray.get_runtime_context()`)."""

    job_id: str  #: the driver's: 8 hexadecimal digits of its client's id (Ray's job ids are 4 bytes)
    resources: dict[str, float] = field(default_factory=dict)  #: what it asked for (Ray's assigned resources)
    actor_name: str | None = None  #: an actor's name ("" for an anonymous actor); None: not an actor
    task_name: str = ""


_local = threading.local()
#: the actor this processor holds (an actor's processor holds it alone), set when its class is built
_actor: list[TaskInfo] = []


def running(info: TaskInfo) -> Any:
    """Around a remote call on the worker: `with running(info): ...`."""
    return _Running(info)


class _Running:
    def __init__(self, info: TaskInfo) -> None:
        self._info = info

    def __enter__(self) -> None:
        self._previous = getattr(_local, "info", None)
        _local.info = self._info

    def __exit__(self, *exc: object) -> None:
        _local.info = self._previous


def hold_actor(info: TaskInfo) -> None:
    """This processor holds the actor being built now (`ray_actors`)."""
    _actor[:] = [info]


def task_info() -> TaskInfo | None:
    """The remote call running on this thread, or the actor this processor holds; None in the driver."""
    info: TaskInfo | None = getattr(_local, "info", None)
    if info is None and _actor and processor_context.current() is not None:
        return _actor[0]
    return info


def job_id_of_caller() -> str:
    """The job a remote call made now belongs to: the running task's, else this driver's client's."""
    info = task_info()
    if info is not None:
        return info.job_id
    return hashlib.sha1(current().client.identity).hexdigest()[:8]


# ---------------------------------------------------------------- the cluster


def _view() -> ClusterView:
    return current().client.cluster_view()


def node_id_of(hostname: str) -> str:
    """A node's id (56 hexadecimal digits, as Ray's): a digest of its host name."""
    return hashlib.sha224(hostname.encode()).hexdigest()


def _resources_of(workers: Iterable[ClusterWorker]) -> dict[str, float]:
    totals: dict[str, float] = {}
    for worker in workers:
        totals["CPU"] = totals.get("CPU", 0.0) + 1.0
        for name, amount in worker.capabilities.items():
            resource = "GPU" if name == GPU_CAPABILITY else name
            totals[resource] = totals.get(resource, 0.0) + float(amount if amount > 0 else 1)
        node = f"node:{worker.hostname}"
        totals[node] = 1.0
    return totals


def cluster_resources() -> dict[str, float]:
    """What the cluster's workers offer now: "CPU" (one per worker), "GPU", custom resources, "node:<host>"."""
    return _resources_of(_view().workers)


def available_resources() -> dict[str, float]:
    """What the workers that run no task now offer (the keys of `cluster_resources` with something free)."""
    view = _view()
    free = _resources_of(worker for worker in view.workers if worker.is_idle)
    for worker in view.workers:
        free.setdefault(f"node:{worker.hostname}", 1.0)
    return free


def nodes() -> list[dict[str, Any]]:
    """One entry per host of the cluster's workers, in Ray's shape (NodeID, Alive, NodeManagerHostname,
    NodeManagerAddress, Resources, ...)."""
    by_host: dict[str, list[ClusterWorker]] = {}
    for worker in _view().workers:
        by_host.setdefault(worker.hostname, []).append(worker)
    entries = []
    for hostname, workers in by_host.items():
        address = _address_of(hostname)
        entries.append({
            "NodeID": node_id_of(hostname), "Alive": True, "alive": True, "NodeManagerAddress": address,
            "NodeManagerHostname": hostname, "NodeName": address, "Resources": _resources_of(workers),
            "Labels": {}, "Workers": [worker.worker_id for worker in workers],
        })  # fmt: skip
    return entries


def _address_of(hostname: str) -> str:
    try:
        return socket.gethostbyname(hostname)
    except OSError:
        return hostname


def get_gpu_ids() -> list[int]:
    """The GPUs of the running task: those CUDA_VISIBLE_DEVICES names, else as many as it asked for (0, 1, ...);
    none in the driver or a task that asked for none."""
    info = task_info()
    wanted = int((info.resources if info is not None else {}).get("GPU", 0))
    if not wanted:
        return []
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible:
        return [int(device) for device in visible.split(",") if device.strip().isdigit()][:wanted]
    return list(range(wanted))


# ---------------------------------------------------------------- the running code
