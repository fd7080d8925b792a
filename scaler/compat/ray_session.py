"""The session of scaler.compat.ray: the client (and the local cluster it started) that Ray's calls go to.

`ray.init()` / `scaler_init()` start or connect it, `ray.shutdown()` ends it; the first call without either starts a
local cluster (as Ray does), and inside a task the session is a client of the task's own scheduler.
"""

from __future__ import annotations

import functools
import math
import os
import threading
import time
from dataclasses import dataclass
from typing import Any

from scaler.client.client import Client
from scaler.cluster.combo import SchedulerClusterCombo
from scaler.compat import ray_refs
from scaler.compat.ray_refs import DeferredCalls
from scaler.errors import MissingObjects
from scaler.payload import processor_context
from scaler.payload.references import ObjectReference

#: Settings of `scaler_init` that are the Client's, not the local cluster's.
CLIENT_SETTINGS = frozenset({"profiling", "timeout_seconds", "serializer", "stream_output"})
#: Options of `ray.init` that change nothing here and are accepted (they concern Ray's own logging and dashboard).
#: The local cluster's policy when `ray.init` gives it resources: tasks go only to workers offering what they ask for.
CAPABILITY_POLICY = "allocate=capability;scaling=no"

#: scaler's capability name for Ray's "GPU" (ray.init(num_gpus=...), @ray.remote(num_gpus=...))
GPU_CAPABILITY = "gpu"

HARMLESS_INIT_OPTIONS = frozenset({"logging_level", "log_to_driver", "include_dashboard", "configure_logging"})

#: How long `scaler_init` waits for the workers of the local cluster it starts.
WORKERS_READY_SECONDS = 60.0


@dataclass
class _Session:
    client: Client
    cluster: SchedulerClusterCombo | None  #: the local cluster this module started, stopped by shutdown()
    deferred: DeferredCalls


_session: _Session | None = None
_session_lock = threading.RLock()


# ---------------------------------------------------------------- starting and stopping


def scaler_init(address: str | None = None, *, n_workers: int | None = None, **settings: Any) -> None:
    """Connect to the scheduler at `address`, or start a local cluster of `n_workers` (default: one per CPU) with
    the other settings (`SchedulerClusterCombo`'s; `profiling`, `timeout_seconds`, `serializer`, `stream_output`
    go to the Client). RuntimeError when already initialized."""
    global _session
    with _session_lock:
        if _session is not None:
            raise RuntimeError("scaler.compat.ray is already initialized: call ray.shutdown() first")
        client_settings = {key: settings.pop(key) for key in list(settings) if key in CLIENT_SETTINGS}
        cluster = None
        if address is None:
            workers = n_workers if n_workers is not None else (os.cpu_count() or 1)
            cluster = SchedulerClusterCombo(n_workers=workers, **settings)
            address = cluster.get_address()
        elif settings or n_workers is not None:
            names = ", ".join(sorted([*settings, *(["n_workers"] if n_workers is not None else [])]))
            raise ValueError(f"scaler_init: {names} configure a local cluster; with an address none is started")
        try:
            client = Client(address=address, **client_settings)
            if cluster is not None:
                wait_for_workers(client, workers)
        except BaseException:
            if cluster is not None:
                cluster.shutdown()
            raise
        _session = _Session(client, cluster, DeferredCalls(functools.partial(read_stored, client)))


def wait_for_workers(client: Client, workers: int) -> None:
    """As `ray.init()` returns with its local cluster's CPUs ready: the first calls then spread over every worker
    rather than queueing on the first one to connect."""
    deadline = time.monotonic() + WORKERS_READY_SECONDS
    while client.session.worker_count < workers:
        if time.monotonic() > deadline:
            raise TimeoutError(f"the local cluster's {workers} workers did not connect in {WORKERS_READY_SECONDS:g} s")
        time.sleep(0.02)


def init(address: str | None = None, *, num_cpus: int | None = None, num_gpus: int | None = None,
         resources: dict[str, float] | None = None, object_store_memory: int | None = None,
         ignore_reinit_error: bool = False, **options: Any) -> None:  # fmt: skip
    """Ray's `init`: `address` None, "auto" or "local" starts a local cluster; a scaler address (tcp://host:port)
    connects to that scheduler. The local cluster's resources, as Ray's node's: `num_cpus` workers (one task at a
    time each; default one per CPU); `num_gpus` and `resources` are the node's, spread over its workers as the
    capabilities "gpu" and the resources' names (`node_capabilities`), so tasks asking for them run there (scaler
    matches capabilities by name: amounts are not counted down per task as Ray's are); `object_store_memory` is
    accepted and means nothing (object storage is not sized up front). With an address, the resource options raise
    ValueError, as Ray's do: the cluster has its own."""
    unsupported = sorted(set(options) - HARMLESS_INIT_OPTIONS)
    if unsupported:
        raise NotImplementedError(f"ray.init({', '.join(unsupported)}=...) is not supported by scaler.compat.ray")
    if address is not None and address.startswith("ray://"):
        raise NotImplementedError("ray.init('ray://...') (Ray Client) is not supported: give a scaler address")
    with _session_lock:
        if _session is not None:
            if ignore_reinit_error:
                return
            raise RuntimeError("Maybe you called ray.init twice by accident? Call ray.shutdown() first.")
        local = address in (None, "auto", "local")
        if local:
            workers = num_cpus if num_cpus is not None else (os.cpu_count() or 1)
            capabilities = node_capabilities(workers, num_gpus, resources)
            if capabilities is None:
                scaler_init(None, n_workers=workers)
            else:  # and the policy that honours them (the default, spelled out: ray.init's are routed)
                scaler_init(None, n_workers=workers, worker_capabilities=capabilities, policy_content=CAPABILITY_POLICY)
            return
        given = [name for name, value in (("num_cpus", num_cpus), ("num_gpus", num_gpus), ("resources", resources))
                 if value is not None]  # fmt: skip
        if given:
            raise ValueError(
                f"ray.init: {', '.join(given)} describe a local cluster; when connecting to an existing cluster "
                "(address=...) they must not be given: its workers' capabilities are set where they start"
            )
        scaler_init(address)


def node_capabilities(
    workers: int, num_gpus: float | None, resources: dict[str, float] | None
) -> list[dict[str, int]] | None:
    """Each worker's capabilities for a node of `workers` CPUs with Ray's `num_gpus` GPUs and `resources`: every
    amount spread over the workers (`spread`), so that the workers together offer what the node has, as Ray counts
    it (`ray.init(num_cpus=2, num_gpus=1)`: one worker offers the GPU, and `cluster_resources()["GPU"]` is 1);
    None when the node has neither."""
    wanted = {name: amount for name, amount in (resources or {}).items() if amount}
    if num_gpus:
        wanted[GPU_CAPABILITY] = num_gpus
    if not wanted:
        return None
    capabilities: list[dict[str, int]] = [{} for _ in range(workers)]
    for name, amount in wanted.items():
        for each, share in zip(capabilities, spread(amount, workers), strict=True):
            if share:
                each[name] = share
    return capabilities


def spread(amount: float, workers: int) -> list[int]:
    """`amount` of a resource over `workers` workers, in whole units (a fraction rounded up to one), the first
    workers taking one more when it does not divide: 3 over 2 is [2, 1], 1 over 2 is [1, 0]."""
    units = max(1, math.ceil(amount))
    return [units // workers + (1 if index < units % workers else 0) for index in range(workers)]


def shutdown() -> None:
    """Disconnect, and stop the local cluster this module started (if it did)."""
    global _session
    with _session_lock:
        session, _session = _session, None
    if session is None:
        return
    session.deferred.close()
    session.client.disconnect()
    if session.cluster is not None:
        session.cluster.shutdown()


def is_initialized() -> bool:
    return _session is not None


def current() -> _Session:
    """The session, started on first use: inside a task, a client of the task's scheduler; elsewhere a local
    cluster (as Ray starts one on the first remote call)."""
    global _session
    session = _session
    if session is not None:
        return session
    with _session_lock:
        if _session is None:
            if processor_context.current() is not None:
                client = Client()
                _session = _Session(client, None, DeferredCalls(functools.partial(read_stored, client)))
            else:
                scaler_init()
        assert _session is not None
        return _session


def read_stored(client: Client, reference: ObjectReference) -> Any:
    """The object a stored reference names. Object storage lets a client read only its own objects; one stored by
    another client (`ray.put` inside a task, or a task's reference returned from it: Ray's owner is the worker that
    made it, and the driver reads it) is read through a task, whose processor may read any object."""
    try:
        return client.session.read(reference)
    except MissingObjects:
        return client.submit(_identity, reference).result()


def _identity(value: Any) -> Any:
    """Runs on a worker: the stored object, resolved by the processor."""
    return value


ray_refs.session_reader = lambda: functools.partial(read_stored, current().client)
