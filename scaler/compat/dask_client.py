"""Dask's `distributed.Client` on scaler: `from scaler.compat.dask import Client`, and code written against Dask's
client runs on a scaler cluster (the import and the address change; docs/guide/migrating.md).

Every call goes through a scaler `Client` (`native`, `client/client.py`), so this front end shares its session with
the others. Futures are `dask_futures.Future`. A Dask collection's compute runs its graph as one graph here
(`client/dask_graph.py`); with `set_as_default` (Dask's default) `dask.compute()` and `.compute()` use this client
until it closes. What scaler cannot do as Dask does is refused by name (NotImplementedError saying what to use), never
accepted silently; what only tunes Dask's own machinery is accepted with a warning, once.
"""

from __future__ import annotations

import concurrent.futures
import functools
import threading
import time
import uuid
import weakref
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from scaler.client import dask_graph, gathering
from scaler.client.client import Client as NativeClient
from scaler.cluster.combo import SchedulerClusterCombo
from scaler.compat import dask_keys
from scaler.compat.dask_cluster import (
    CLIENT_TUNING,
    SchedulerAddress,
    address_of,
    is_collection,
    local_cluster,
    warn_once,
)
from scaler.compat.dask_futures import Future, Resolver, WaitingTask, is_future, resolved
from scaler.compat.dask_waits import futures_of, keep
from scaler.payload import processor_context

_defaults: list[Client] = []
_defaults_lock = threading.Lock()


class Client:
    """Dask's `distributed.Client` over a scaler cluster (see the module docstring). `Client(address)` connects to a
    scaler scheduler; `Client()` starts a local cluster (n_workers: one per CPU; threads_per_worker: workers per
    Dask worker, since a scaler worker runs one task at a time), stopped by `close()`."""

    #: Dask reads it when a Client is given as its scheduler
    asynchronous = False

    def __init__(
        self, address: Any = None, loop: Any = None, timeout: float | None = None, set_as_default: bool = True,
        scheduler_file: str | None = None, security: Any = None, asynchronous: bool = False, **kwargs: Any,
    ) -> None:  # fmt: skip
        if asynchronous:
            raise NotImplementedError("Client(asynchronous=True) is not supported by scaler.compat.dask: use "
                                      "scaler.AsyncClient, whose calls are awaitable")  # fmt: skip
        if security is not None and security is not False:
            raise NotImplementedError("Dask's security= (TLS) is not supported: scaler secures connections with "
                                      "CURVE keys, found by the client itself (`scaler --docs security`)")  # fmt: skip
        for option in sorted(set(kwargs) & CLIENT_TUNING):
            kwargs.pop(option)
            warn_once(f"Client({option}=...)", "it tunes Dask's own connection and means nothing on scaler")
        self._cluster: SchedulerClusterCombo | None = None
        address = address_of(address, scheduler_file)
        if address is None and processor_context.current() is None:
            self._cluster = local_cluster(kwargs)
            address = self._cluster.get_address()
        elif kwargs:
            raise TypeError(f"Client() got unexpected keyword argument(s): {', '.join(sorted(kwargs))}")
        try:
            connect_seconds = 15.0 if timeout is None else float(timeout)
            self.native = NativeClient(address, connect_timeout_seconds=connect_seconds)
            if self._cluster is not None:
                self.native.wait_for_workers(1, timeout=60)
        except BaseException:
            if self._cluster is not None:
                self._cluster.shutdown()
            raise
        self._futures: weakref.WeakValueDictionary[str, Future] = weakref.WeakValueDictionary()
        self._kept: set[Future] = set()
        self._kept_lock = threading.Lock()
        self._resolver = Resolver()
        self._computing = concurrent.futures.ThreadPoolExecutor(4, thread_name_prefix="scaler-dask-compute")
        self._closed = False
        self._started = time.time()
        self._previous_scheduler: list[Any] = []
        if set_as_default:
            self._set_as_default()

    # ------------------------------------------------------------ what it is

    @property
    def id(self) -> str:
        return self.native.identity.decode()

    @property
    def status(self) -> str:
        return "closed" if self._closed else "running"

    @property
    def futures(self) -> dict[str, Future]:
        """The futures this client holds now, by key (those nothing holds any more are forgotten)."""
        return dict(self._futures.items())

    @property
    def scheduler(self) -> SchedulerAddress:
        """The scheduler this client is connected to (`.address`)."""
        return SchedulerAddress(self.native.address)

    @property
    def cluster(self) -> SchedulerClusterCombo | None:
        """The local cluster `Client()` started (None when it connected to an address)."""
        return self._cluster

    @property
    def dashboard_link(self) -> str | None:
        return self._cluster.dashboard_link if self._cluster is not None else None

    def __repr__(self) -> str:
        workers = self.native.session.worker_count
        return (f"<Client: scheduler={self.native.address!r} processes={workers} threads={workers}, "
                f"{self.status}>")  # fmt: skip

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------ tasks

    def submit(
        self, func: Callable[..., Any], *args: Any, key: str | None = None, workers: Any = None,
        resources: dict[str, Any] | None = None, retries: int | None = None, priority: int = 0,
        fifo_timeout: Any = None, allow_other_workers: bool = False, actor: bool = False, actors: bool = False,
        pure: bool = True, **kwargs: Any,
    ) -> Future:  # fmt: skip
        """func(*args, **kwargs) as a task: its Future. Futures among the arguments (also inside lists, tuples, sets
        and dicts) are its dependencies: it runs with their values once they are done. The same function and
        arguments give the same key, and the future already there (`pure=False`: a new task each time)."""
        if not callable(func):
            raise TypeError("First input to submit must be a callable function")
        self._check_options(workers, allow_other_workers, actor or actors, fifo_timeout)
        if key is None:
            key = dask_keys.key_of(func, args, kwargs, pure)
        return self._submit(func, args, kwargs, key, resources, retries, priority)

    def map(
        self, func: Callable[..., Any], *iterables: Iterable[Any], key: str | list[str] | None = None,
        workers: Any = None, retries: int | None = None, resources: dict[str, Any] | None = None, priority: int = 0,
        allow_other_workers: bool = False, fifo_timeout: Any = None, actor: bool = False, actors: bool = False,
        pure: bool = True, batch_size: int | None = None, **kwargs: Any,
    ) -> list[Future]:  # fmt: skip
        """func over the items of the iterables (zipped, as built-in map): a Future per item, in order. `key`: a
        list of keys, or the prefix of each key; `kwargs` reach every call. `batch_size` is accepted (every item is
        submitted now)."""
        if not callable(func):
            raise TypeError("First input to map must be a callable function")
        if not iterables:
            raise TypeError("map() needs at least one iterable")
        self._check_options(workers, allow_other_workers, actor or actors, fifo_timeout)
        calls = [tuple(items) for items in zip(*iterables, strict=False)]
        if isinstance(key, list):
            if len(key) != len(calls):
                raise ValueError(f"map: {len(key)} keys for {len(calls)} calls")
            keys = key
        else:
            prefix = key or dask_keys.funcname(func)
            keys = [f"{prefix}-{dask_keys.token_of(func, call, kwargs, pure)}" for call in calls]
        return [
            self._submit(func, call, kwargs, name, resources, retries, priority)
            for call, name in zip(calls, keys, strict=True)
        ]

    def _submit(
        self, func: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], key: str,
        resources: dict[str, Any] | None, retries: int | None, priority: int,
    ) -> Future:  # fmt: skip
        self._check_open()
        existing = self._futures.get(key)
        if existing is not None and not existing.cancelled():
            return existing
        call = dask_keys.with_retries(func, dask_keys.checked_retries(retries))
        capabilities = dask_keys.capabilities_of(resources)
        future = Future(key, self)
        self._futures[key] = future

        def submit_now() -> concurrent.futures.Future[Any]:
            return self.native.submit_verbose(
                call, resolved(args), resolved(kwargs), capabilities=capabilities, priority=priority or None
            )

        dependencies = futures_of((args, kwargs))
        if dependencies:
            future.wait_for(dependencies)
            self._resolver.add(WaitingTask(future, submit_now, dependencies))
        else:
            future.attach(submit_now())
        return future

    def _check_options(self, workers: Any, allow_other_workers: bool, actor: bool, fifo_timeout: Any) -> None:
        dask_keys.refuse_placement(workers, allow_other_workers)
        if actor:
            raise NotImplementedError(dask_keys.ACTORS_REFUSED)
        if fifo_timeout is not None:
            warn_once("fifo_timeout", "it tunes the order of Dask's scheduler and means nothing on scaler")

    # ------------------------------------------------------------ data

    def gather(self, futures: Any, errors: str = "raise", direct: Any = None, asynchronous: Any = None) -> Any:
        """The results of futures, in the nesting they are given in (lists, tuples, sets, dicts); an iterator of
        futures gives an iterator of results. `errors="skip"` leaves failed futures out."""
        if isinstance(futures, Iterator):
            return (self.gather(future, errors) for future in futures)
        return gathering.gather(futures, is_future, Future.result, errors)

    def scatter(
        self, data: Any, workers: Any = None, broadcast: bool = False, direct: Any = None, hash: bool = True,
        timeout: Any = None, asynchronous: Any = None,
    ) -> Any:  # fmt: skip
        """Store data in the cluster's object storage: a Future for one object, a list (tuple, set) of Futures for a
        list (...), a dict of Futures for a dict (its keys are the futures' keys). Every worker reads object storage,
        so `broadcast` changes nothing; `hash=True` names equal data alike (and it is stored once)."""
        self._check_open()
        dask_keys.refuse_placement(workers, False)
        if isinstance(data, dict):
            return {name: self._scattered(value, str(name)) for name, value in data.items()}
        return gathering.scatter(data, lambda value: self._scattered(value, None, hash))

    def _scattered(self, value: Any, key: str | None, hashed: bool = True) -> Future:
        if key is None:
            token = dask_keys.tokenize(value) if hashed else uuid.uuid4().hex
            key = f"{type(value).__name__}-{token}"
        existing = self._futures.get(key)
        if existing is not None and existing.done() and not existing.cancelled():
            return existing
        future = Future(key, self)
        future.store(self.native.session.store(value, key))
        self._futures[key] = future
        return future

    def cancel(self, futures: Any, asynchronous: Any = None, force: bool = False, reason: Any = None) -> None:
        """Cancel the tasks of futures: each is cancelled at once (its result() raises CancelledError), and the
        scheduler is asked to stop its task."""
        tasks = []
        for future in futures_of(futures):
            inner = future.task_future()
            if inner is not None and not inner.done():
                tasks.append(inner)
            future.fail(concurrent.futures.CancelledError(future.key))
        if tasks:
            self.native.session.cancel_futures(tasks)

    def forget(self, future: Future) -> None:
        if self._futures.get(future.key) is future:
            del self._futures[future.key]

    def keep_until_done(self, future: Future) -> None:
        """fire_and_forget: held here until done; close() waits for it."""
        keep(self._kept, future, self._kept_lock)

    # ------------------------------------------------------------ collections (client/dask_graph.py)

    def compute(
        self, collections: Any, sync: bool = False, optimize_graph: bool = True, workers: Any = None,
        allow_other_workers: bool = False, resources: dict[str, Any] | None = None, retries: int = 0,
        priority: int = 0, fifo_timeout: Any = None, actors: Any = None, traverse: bool = True, **kwargs: Any,
    ) -> Any:  # fmt: skip
        """Compute Dask collections on the cluster, each as one graph: a Future for one collection, a list for a list
        (`sync=True`: the values). Anything that is not a Dask collection is given back as it is."""
        self._check_options(workers, allow_other_workers, bool(actors), fifo_timeout)
        self._refuse_collection_retries(retries, "compute")
        single = not isinstance(collections, (list, tuple))
        items = [collections] if single else list(collections)
        get = self._get_for(resources, priority)
        futures = [self._computed(item, get, optimize_graph) if is_collection(item) else item for item in items]
        if sync:
            futures = [self.gather(item) if is_future(item) else item for item in futures]
        return futures[0] if single else futures

    def _computed(self, collection: Any, get: Callable[..., Any], optimize_graph: bool) -> Future:
        from dask.base import compute

        self._check_open()
        future = Future(f"finalize-{dask_keys.tokenize(collection)}", self)
        run = functools.partial(compute, collection, scheduler=get, optimize_graph=optimize_graph)
        future.attach(self._computing.submit(lambda: run()[0]))
        self._futures[future.key] = future
        return future

    def persist(
        self, collections: Any, optimize_graph: bool = True, workers: Any = None, allow_other_workers: bool = False,
        resources: dict[str, Any] | None = None, retries: int | None = None, priority: int = 0,
        fifo_timeout: Any = None, actors: Any = None, **kwargs: Any,
    ) -> Any:  # fmt: skip
        """Start computing Dask collections on the cluster and give back the same collections, each now holding a
        Future per key (`wait(x)`, `futures_of(x)`; computing them again reads those results)."""
        from dask.base import optimize

        self._check_options(workers, allow_other_workers, bool(actors), fifo_timeout)
        self._refuse_collection_retries(retries or 0, "persist")
        self._check_open()
        single = not isinstance(collections, (list, tuple))
        items = [collections] if single else list(collections)
        if optimize_graph:
            items = list(optimize(*items))  # type: ignore[no-untyped-call]
        get = self._get_for(resources, priority)
        persisted = [self._persisted(item, get) if is_collection(item) else item for item in items]
        return persisted[0] if single else persisted

    def _persisted(self, collection: Any, get: Callable[..., Any]) -> Any:
        keys = dask_graph.flatten_keys(collection.__dask_keys__())
        submitted = dask_graph.submit(get, collection.__dask_graph__(), keys)
        futures: dict[Any, Future] = {}
        for key in keys:
            future = Future(str(key), self)
            future.attach(submitted[key])
            futures[key] = future
        rebuild, arguments = collection.__dask_postpersist__()
        return rebuild(futures, *arguments)

    def _get_for(self, resources: dict[str, Any] | None, priority: int) -> Callable[..., Any]:
        return functools.partial(
            self.native.get, capabilities=dask_keys.capabilities_of(resources), priority=priority or None
        )

    @staticmethod
    def _refuse_collection_retries(retries: int, what: str) -> None:
        if retries:
            raise NotImplementedError(
                f"{what}(retries=...) is not supported by scaler.compat.dask: a graph's task whose worker is lost is "
                "run again by the scheduler (--max-task-retries); give retries= to submit or map to run a function "
                "again when it raises"
            )

    def get(self, dsk: Any, keys: Any, sync: bool = True, **kwargs: Any) -> Any:
        """Dask's get protocol, as Dask's own schedulers answer it (`Client.dask_get`); `sync=False`: a Future."""
        if sync:
            return self.native.dask_get(dsk, keys)
        future = Future(f"get-{uuid.uuid4().hex}", self)
        future.attach(self._computing.submit(self.native.dask_get, dsk, keys))
        return future

    # ------------------------------------------------------------ the cluster

    def wait_for_workers(self, n_workers: int = 0, timeout: float | None = None) -> None:
        self.native.wait_for_workers(n_workers, timeout)

    def upload_file(self, filename: str, load: bool = True) -> None:
        """Use a module (.py) or package archive (.zip, .egg, .whl) of yours in tasks (`Client.upload_file`: it
        travels by value in the tasks that use it)."""
        self.native.upload_file(filename)

    def run(
        self, function: Callable[..., Any], *args: Any, workers: list[str] | None = None, wait: bool = True,
        nanny: bool = False, on_error: str = "raise", **kwargs: Any,
    ) -> dict[str, Any] | None:  # fmt: skip
        """function(*args, **kwargs) once on each worker: {worker id: result} (`Client.run` of scaler's client: a
        task on one of each worker's processors). `wait=False` returns at once."""
        if nanny:
            raise NotImplementedError("run(nanny=True) is not supported: a scaler worker has no nanny process")
        if not wait:
            self._computing.submit(self.native.run, function, *args, workers=workers, on_error=on_error, **kwargs)
            return None
        return self.native.run(function, *args, workers=workers, on_error=on_error, **kwargs)

    def scheduler_info(self, n_workers: int = -1, **kwargs: Any) -> dict[str, Any]:
        """The scheduler and its workers, in the shape of Dask's answer (a worker's `nthreads` is 1: a scaler worker
        runs one task at a time; `resources` are its capabilities)."""
        view = self.native.cluster_view()
        workers = {
            worker.worker_id: {
                "type": "Worker", "id": worker.worker_id, "host": worker.hostname, "pid": worker.pid,
                "nthreads": 1, "resources": dict(worker.capabilities), "name": worker.worker_id,
                "metrics": {"executing": worker.running, "in_memory": 0, "ready": worker.held - worker.running},
            }
            for worker in view.workers
        }  # fmt: skip
        if n_workers >= 0:
            workers = dict(list(workers.items())[:n_workers])
        address = self.native.address
        return {"type": "Scheduler", "id": address, "address": address, "services": {"monitor": view.monitor_address},
                "started": self._started, "workers": workers}  # fmt: skip

    def nthreads(self, workers: Any = None, **kwargs: Any) -> dict[str, int]:
        """Tasks each worker runs at once: 1 (a scaler worker runs one task at a time)."""
        return {worker: 1 for worker in self.scheduler_info()["workers"]}

    ncores = nthreads

    def get_task_stream(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(
            "get_task_stream is not supported by scaler.compat.dask: scaler records each task's history instead, "
            "Client.native's futures' .story() (when, where and why it waited, ran, moved), and scaler_top or the "
            "dashboard show the tasks as they run"
        )

    # ------------------------------------------------------------ ending

    def close(self, timeout: float | None = None) -> None:
        """Wait for the fire-and-forget tasks (up to `timeout`), leave (this client's other unfinished tasks are
        cancelled), and stop the local cluster `Client()` started. Idempotent."""
        if self._closed:
            return
        with self._kept_lock:
            kept = [future.settled for future in self._kept]
        if kept:
            concurrent.futures.wait(kept, timeout)
        self._closed = True
        self._unset_as_default()
        self._resolver.close()
        self._computing.shutdown(wait=False, cancel_futures=True)
        try:
            self.native.close()
        finally:
            if self._cluster is not None:
                self._cluster.shutdown()

    def shutdown(self) -> None:
        """Stop the cluster: the local one `Client()` started, else the scheduler and its workers (refused when the
        scheduler is protected, its default)."""
        if self._cluster is None:
            self.native.shutdown()
        self.close()

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("this Client is closed; create a new one")

    # ------------------------------------------------------------ the default client

    def _set_as_default(self) -> None:
        with _defaults_lock:
            _defaults.append(self)
        try:
            import dask
        except ImportError:
            return
        self._previous_scheduler.append(dask.config.get("scheduler", None))
        dask.config.set(scheduler=self.native.get)

    def _unset_as_default(self) -> None:
        with _defaults_lock:
            if self in _defaults:
                _defaults.remove(self)
        if self._previous_scheduler:
            import dask

            if dask.config.get("scheduler", None) == self.native.get:
                dask.config.set(scheduler=self._previous_scheduler[0])


def default_client() -> Client:
    """The client made last and not closed (ValueError when none)."""
    with _defaults_lock:
        if _defaults:
            return _defaults[-1]
    raise ValueError("No clients found: start a Client(...) first")
