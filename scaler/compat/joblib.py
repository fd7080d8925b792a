"""joblib's "scaler" backend: `Parallel` (and scikit-learn's `n_jobs`) on a scaler cluster.

    import scaler.joblib  # registers the backend (joblib finds third-party backends only by registration)
    with joblib.parallel_config(backend="scaler", address="tcp://127.0.0.1:8516"):   # or client=an_open_client
        Parallel(n_jobs=-1)(delayed(f)(x) for x in data)

A joblib batch (several calls, as joblib's auto-batching sizes it) is one task, known as "f (joblib batch)" after
its function. An argument of 64 KiB or more is
stored in object storage once per `Parallel` call and passed to every call that uses it as a reference (the
processor fetches it once and keeps it), so a training set reused by hundreds of fits travels once, not once per
batch. `n_jobs=-1` is the number of workers the scheduler has (at least 2, so that the calls always go to the
cluster). Results come back through a thread of this module's,
never the client's I/O thread (reading a result is blocking I/O). A failed call raises its exception from
`Parallel`, as joblib reports errors (a KeyboardInterrupt raised by a call too), and the batches still in flight are
cancelled.

Nesting is bounded as joblib's own backends bound it (`ParallelBackendBase.get_nested_backend`), with the cluster in
the place of their thread pool: a `Parallel` inside a task (nesting level 1) runs its calls as nested tasks on the same
cluster, and one nested deeper runs them one after another in its task (joblib's SequentialBackend), so a runaway
recursion ends in a RecursionError instead of flooding the cluster; a task that names the backend
(`Parallel(backend="scaler")`, `parallel_config(backend="scaler")`) keeps its level, so the same holds. Inside a task,
"scaler" names this backend whatever the task imported (scaler/worker/processor/joblib_name.py). Auto-batching
learns batch sizes during one `Parallel` call and starts afresh at the next, as joblib's backends do. The arguments
that concern a pool of processes of the caller's (`initializer`, `initargs`, ...) raise ValueError: the cluster's
workers are shared and started once (use a worker's `--preload`).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import functools
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

from joblib import parallel_config, register_parallel_backend
from joblib._parallel_backends import AutoBatchingMixin, FallbackToBackend, ParallelBackendBase, SequentialBackend

from scaler.client.client import Client
from scaler.client.future import ScalerFuture
from scaler.compat.callback_thread import CallbackThread
from scaler.payload import processor_context
from scaler.payload.processor_context import BlockingWait
from scaler.payload.references import ObjectReference
from scaler.payload.storage import INLINE_LIMIT_BYTES

#: From this (estimated) size, an argument is stored once per Parallel call and referenced by every call.
REFERENCE_FROM_BYTES = INLINE_LIMIT_BYTES

#: The fewest jobs `n_jobs=-1` means (see ScalerBackend.effective_n_jobs).
MIN_JOBS = 2

#: What joblib's Parallel hands every backend's `configure` (its own settings; the memory-mapping ones concern pools
#: of processes on the caller's machine and mean nothing here: large arguments are stored once, see above).
PARALLEL_SETTINGS = frozenset({"max_nbytes", "temp_folder", "mmap_mode", "prefer", "require", "verbose", "context"})

Call = tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any]]

#: runs joblib's completion callbacks (they read results and may dispatch the next batches)
_callbacks = CallbackThread("scaler-joblib-callbacks")


class ScalerBackend(AutoBatchingMixin, ParallelBackendBase):  # type: ignore[misc]
    """joblib's ParallelBackendBase over a scaler Client (see the module docstring)."""

    supports_retrieve_callback = True
    supports_inner_max_num_threads = False
    supports_sharedmem = False
    uses_threads = False
    default_n_jobs = -1

    def __init__(self, address: str | None = None, client: Client | None = None, **backend_kwargs: Any) -> None:
        super().__init__(**backend_kwargs)
        if address is not None and client is not None:
            raise ValueError("the scaler joblib backend takes address= or client=, not both")
        self._address = address
        self._given_client = client
        self._owned_client: Client | None = None
        self._in_flight: set[ScalerFuture] = set()
        self._lock = threading.Lock()
        #: this Parallel call's stored arguments, by id (the objects kept alive so that ids stay unique)
        self._references: dict[int, tuple[Any, ObjectReference]] = {}

    def __reduce__(self) -> tuple[Any, ...]:
        return (_nested_backend, (self.nesting_level,))  # inside a task: the task's own scheduler

    # ------------------------------------------------------------ joblib's contract

    def configure(self, n_jobs: int = 1, parallel: Any = None, **backend_kwargs: Any) -> int:
        unsupported = sorted(set({**self.backend_kwargs, **backend_kwargs}) - PARALLEL_SETTINGS)
        if unsupported:
            raise ValueError(
                f"the scaler joblib backend does not take {', '.join(unsupported)}: they set up the processes of a "
                "pool that Parallel starts, and a scaler cluster's workers are shared and started once; run set-up "
                "code with the workers' --preload (docs/guide/migrating.md), or at the start of the function"
            )
        self.parallel = parallel
        n_jobs = self.effective_n_jobs(n_jobs)
        if self._runs_in_its_task():  # as joblib's own backends fall back when they have one job
            raise FallbackToBackend(SequentialBackend(nesting_level=self.nesting_level))
        return n_jobs

    def effective_n_jobs(self, n_jobs: int | None) -> int:
        """A positive n_jobs as it is; -1 the cluster's workers (-2 one fewer, ...), but at least 2: joblib runs a
        Parallel of one job in the calling process, and a cluster still starting, or growing from one worker,
        has more to give than it shows."""
        if n_jobs == 0:
            raise ValueError("n_jobs == 0 in Parallel has no meaning")
        if self._runs_in_its_task():
            return 1
        if n_jobs is not None and n_jobs > 0:
            return n_jobs
        workers = self._client().session.worker_count
        return max(MIN_JOBS, workers + 1 + (n_jobs if n_jobs is not None else -1))

    def start_call(self) -> None:
        self._references.clear()

    def stop_call(self) -> None:
        self._references.clear()

    def submit(self, func: Any, callback: Callable[[Any], None] | None = None) -> ScalerFuture:
        calls = [self._with_references(call) for call in func.items]
        nested = self.get_nested_backend()
        client = self._client()
        try:
            future = client.submit_verbose(batch_runner(calls), (calls, nested), {})
        except TypeError as error:
            raise _name_unpicklable(calls, client.session.serializer.serialize) or error from error
        with self._lock:
            self._in_flight.add(future)
        future.add_done_callback(self._forget)
        if callback is not None:
            future.add_done_callback(lambda done: _callbacks.submit(callback, done))
        return future

    def retrieve_result_callback(self, out: ScalerFuture) -> Any:
        return out.result()

    def abort_everything(self, ensure_ready: bool = True) -> None:
        with self._lock:
            in_flight = list(self._in_flight)
        if in_flight:
            self._client().session.cancel_futures(in_flight)

    def terminate(self) -> None:
        """After each Parallel call: a client this backend opened disconnects (its stored arguments go with it), and
        auto-batching forgets what it learned (the next call's functions may take any time)."""
        self._references.clear()
        self.reset_batch_stats()
        owned, self._owned_client = self._owned_client, None
        if owned is not None:
            owned.disconnect()

    @contextlib.contextmanager
    def retrieval_context(self) -> Iterator[None]:
        """joblib waits for results in a loop of its own: inside a task, that wait yields the task's slot (as a
        wait on a future does), so the nested batches it waits for can run even on a cluster of busy workers."""
        with BlockingWait():
            yield

    def get_nested_backend(self) -> tuple[ParallelBackendBase, int | None]:
        """The backend of a Parallel inside a task: the cluster at the first level, then one call after another in
        the task (as joblib's own backends: their thread pool at the first level, then sequential)."""
        level = (self.nesting_level or 0) + 1
        if level > 1:
            return SequentialBackend(nesting_level=level), None
        return ScalerBackend(nesting_level=level), -1

    # ------------------------------------------------------------ internals

    def _runs_in_its_task(self) -> bool:
        """Named inside a task nested deeper than the first level (`Parallel(backend="scaler")` there takes the
        level of the backend the task's batch runs under, `get_nested_backend`'s): its calls run one after another
        in that task, as they would had the task not named the backend, so that a runaway recursion ends in a
        RecursionError instead of flooding the cluster."""
        return (self.nesting_level or 0) > 1

    def _client(self) -> Client:
        if self._given_client is not None:
            return self._given_client
        if self._owned_client is None:
            if self._address is None and processor_context.current() is None:
                raise ValueError(
                    "the scaler joblib backend needs a cluster: parallel_config(backend='scaler', "
                    "address='tcp://host:port') or parallel_config(backend='scaler', client=an_open_client)"
                )
            self._owned_client = Client(address=self._address)
        return self._owned_client

    def _forget(self, future: concurrent.futures.Future[Any]) -> None:
        with self._lock:
            self._in_flight.discard(future)

    def _with_references(self, call: Call) -> Call:
        function, args, kwargs = call
        return (
            function,
            tuple(self._reference(value) for value in args),
            {key: self._reference(value) for key, value in kwargs.items()},
        )

    def _reference(self, value: Any) -> Any:
        if _estimated_size(value) < REFERENCE_FROM_BYTES:
            return value
        known = self._references.get(id(value))
        if known is not None and known[0] is value:
            return known[1]
        reference = self._client().send_object(value)
        self._references[id(value)] = (value, reference)
        return reference


def _estimated_size(value: Any) -> int:
    """Cheap: an array's or frame's byte count, else the object's own size (a container's, not its items')."""
    if type(value) in (int, float, bool, type(None)):
        return 0
    nbytes = getattr(value, "nbytes", None)
    if isinstance(nbytes, int):
        return nbytes
    try:
        return sys.getsizeof(value)
    except TypeError:
        return 0


def _name_unpicklable(calls: list[Call], serialize: Callable[[Any], bytes]) -> TypeError | None:
    """A batch that could not be pickled: the error names the call and the argument that cannot be."""
    for function, args, kwargs in calls:
        named = [(f"argument {position}", value) for position, value in enumerate(args)]
        named += [(f"keyword argument {key!r}", value) for key, value in kwargs.items()]
        for name, value in [("the function", function), *named]:
            try:
                serialize(value)
            except Exception as error:
                what = getattr(function, "__qualname__", repr(function))
                return TypeError(f"cannot serialize {name} of {what}(...), of type {type(value).__name__}: {error}")
    return None


def _nested_backend(nesting_level: int | None) -> ScalerBackend:
    return ScalerBackend(nesting_level=nesting_level)


class BatchRunner:
    """Runs one joblib batch on a worker, nested Parallel calls going to `nested` (get_nested_backend). It carries
    the name of the batch's function ("fit (joblib batch)"), which is what a task is known by: in the monitor's
    statistics, the dashboard, and the run times the scheduler learns per function, each joblib function is then
    apart from the others (one runner for all would mix a 1 ms call with a 10 s fit)."""

    def __init__(self, name: str) -> None:
        self.__name__ = self.__qualname__ = name

    def __call__(self, calls: list[Call], nested: tuple[ParallelBackendBase, int | None]) -> list[Any]:
        backend, n_jobs = nested
        with parallel_config(backend=backend, n_jobs=n_jobs):
            return [function(*args, **kwargs) for function, args, kwargs in calls]


#: One runner per name, so that a client serializes each once (its function cache goes by identity).
_runners: dict[str, BatchRunner] = {}


def batch_runner(calls: list[Call]) -> BatchRunner:
    """The runner of a batch, named after its calls' function ("joblib batch" when they call several)."""
    names = {_name_of(function) for function, _args, _kwargs in calls}
    name = f"{names.pop()} (joblib batch)" if len(names) == 1 else "joblib batch"
    runner = _runners.get(name)
    if runner is None:
        if len(_runners) >= 1_000:
            _runners.clear()
        runner = _runners[name] = BatchRunner(name)
    return runner


def _name_of(function: Any) -> str:
    while isinstance(function, functools.partial):
        function = function.func
    name = getattr(function, "__qualname__", None) or getattr(function, "__name__", None)
    return str(name) if name else type(function).__qualname__


def register() -> None:
    """Register the backend as "scaler" (what `import scaler.joblib` does)."""
    register_parallel_backend("scaler", ScalerBackend)
