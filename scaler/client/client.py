"""Client: the user's handle on a scheduler. submit, map, starmap, get (graphs), stream (streaming tasks), actor
(actors), send_object, scatter, gather, clear, disconnect (close), shutdown, jobs, executor(), and the calls that
concern the cluster: wait_for_workers, cluster_view, run, upload_file (client/worker_calls.py).

A page of the user's API over one `Session` (`client/session.py`: the connection, the task encoder, object storage,
the result reader, cancels and the resolution of security), which every front end shares. Every wait on the
scheduler is bounded by a timeout. A Client created inside a task without an address connects to that task's
scheduler; a Client passed into a task reconnects there (one connection per processor is reused for every task that
receives the same client).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar, overload

from scaler.client import dask_graph, forwarded_logs, gathering, jobs, worker_calls
from scaler.client.actors import DEFAULT_MAX_RESTARTS, ActorHandle, spec_of
from scaler.client.cluster_view import ClusterView
from scaler.client.display import client_rows, html_table
from scaler.client.future import ScalerFuture
from scaler.client.graph import with_nested_calls_lifted
from scaler.client.jobs import Job
from scaler.client.mapping import Mapper
from scaler.client.session import CLOSE_TIMEOUT_SECONDS as CLOSE_TIMEOUT_SECONDS
from scaler.client.session import Session, SessionSettings, TaskOptions
from scaler.client.sharing import checked_priority, takes_parameter
from scaler.client.streams import DEFAULT_WINDOW, TaskStream
from scaler.io.sockets import HEARTBEAT_TIMEOUT_SECONDS, TransportSecurity
from scaler.io.tunnel.tls import trust_ca_file
from scaler.payload import processor_context
from scaler.payload.references import ObjectReference
from scaler.payload.serializer import DefaultSerializer, Serializer
from scaler.protocol.ids import ClientID, TaskID

if TYPE_CHECKING:
    from scaler.client.executor import ScalerExecutor

#: The parameters and the return type of the function a task runs, carried to its future.
P = ParamSpec("P")
R = TypeVar("R")
A = TypeVar("A")
B = TypeVar("B")
V = TypeVar("V")


class Client:
    #: Dask reads it when a Client is given as its scheduler (`scheduler=client`): this client is not asynchronous.
    asynchronous = False

    def __init__(
        self,
        address: str | None = None,
        profiling: bool = False,
        timeout_seconds: float | None = None,
        heartbeat_interval_seconds: float = 2,
        serializer: Serializer | None = None,
        stream_output: bool = False,
        object_storage_address: str | None = None,
        security_config: Any = None,
        *,
        security: TransportSecurity | None = None,
        connect_timeout_seconds: float = 15.0,
        scheduler_lost_grace_seconds: float | None = None,
        curve_secret_key: str | None = None,
        curve_server_key: str | None = None,
        share: float = 1.0,
        max_running_tasks: int | None = None,
        max_workers: int | None = None,
        resume_seconds: float | None = None,
        link_heartbeat_timeout_seconds: float = HEARTBEAT_TIMEOUT_SECONDS,
        tls_ca: str | None = None,
    ) -> None:
        """`timeout_seconds`: how long a request (object storage, a job) waits in silence, 60 s by default (a transfer
        that keeps moving is never cut), and how long a silent scheduler is waited for before the futures fail with
        DisconnectedError: by default (None) as long as the scheduler keeps this client's work when it is away (its
        resume window, below; at least 60 s).
        `resume_seconds`: how long this client's unfinished work waits for it when it is away (its machine asleep,
        its network lost or changed): its tasks run on and their results wait; back, it gets them
        (docs/guide/bursting.md, "Working from a laptop"). None: the scheduler's window (`client_resume_seconds`, 30
        minutes by default); a shorter wish is granted; 0: none (its work is cancelled once it is silent past the
        scheduler's client timeout).
        `security` secures the client's connections (None: plain TCP; inside a task: the worker's).
        `connect_timeout_seconds`: how long the first connection waits for the scheduler to answer (saying
        so on stderr every 5 s) before a ConnectionError. `curve_secret_key`, `curve_server_key`: this client's
        secret key file and the scheduler's public key file, for a cluster secured with CURVE (docs/security.md);
        a wrong key is a ConnectionRefusedError at once. `scheduler_lost_grace_seconds`: when the connection to
        the scheduler closes, how long to wait for a scheduler to answer at the same address again (a restarted
        one gets this client's unfinished tasks again); by default (None) 60 s when the scheduler closed it (it
        stopped or crashed), and the resume window, when longer, when it died of silence (this machine asleep or
        cut off); 0: fail the futures at once with DisconnectedError.
        `share`: this client's weight in the split of busy workers between clients with work queued (1: equal);
        `max_running_tasks`: the most of its tasks at workers at once (None: no quota); `max_workers`: the most
        workers' worth of spend its work holds, and the pool grows for (None: no quota); docs/guide/sharing.md.
        `link_heartbeat_timeout_seconds`: ZeroMQ pings the scheduler every third of this and ends a connection that
        does not answer within it, then connects again (a laptop that changed networks has a dead connection that
        nothing else closes in minutes); the scheduler's `link_heartbeat_timeout_seconds` is the other side.
        `tls_ca`: a PEM bundle of certificate authorities this process trusts at tls:// and wss:// addresses, besides
        the system's (or `SSL_CERT_FILE`'s); the server's certificate and name are checked (docs/security.md)."""
        trust_security_config(security_config)
        if tls_ca is not None:
            trust_ca_file(tls_ca)
        settings = SessionSettings(
            profiling=profiling, timeout_seconds=timeout_seconds, stream_output=stream_output,
            heartbeat_interval_seconds=heartbeat_interval_seconds,
            serializer=serializer if serializer is not None else DefaultSerializer(),
            object_storage_address=object_storage_address, connect_timeout_seconds=connect_timeout_seconds,
            scheduler_lost_grace_seconds=scheduler_lost_grace_seconds,
            share=share, max_running_tasks=max_running_tasks, max_workers=max_workers, resume_seconds=resume_seconds,
            link_heartbeat_timeout_seconds=link_heartbeat_timeout_seconds,
        )  # fmt: skip
        self._session = Session(
            address, settings, security=security, curve_secret_key=curve_secret_key, curve_server_key=curve_server_key
        )
        self._maps = Mapper(self._session)

    # ------------------------------------------------------------ what it is

    @property
    def session(self) -> Session:
        """The connection underneath, which the front ends (`executor()`, `AsyncClient`, jobs, Ray, joblib, Dask)
        share: tasks, objects, cancels, the worker count."""
        return self._session

    @property
    def identity(self) -> ClientID:
        return self._session.identity

    @property
    def address(self) -> str:
        return self._session.address

    def __repr__(self) -> str:
        session = self._session
        return (
            f"Client(address={session.address!r}, identity={session.identity.decode()!r}, "
            f"workers={session.worker_count}, unfinished_tasks={session.unfinished_count}, {session.state})"
        )

    def _repr_html_(self) -> str:
        session = self._session
        rows = client_rows(
            session.address, session.storage_address, session.worker_count, session.unfinished_count, session.state
        )
        return html_table("scaler Client", rows)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.disconnect()

    def __reduce__(self) -> tuple[Any, ...]:
        settings = self._session.settings
        serializer = None if isinstance(settings.serializer, DefaultSerializer) else settings.serializer
        return (
            _rebuild_client,
            (self.address, self.identity, settings.profiling, settings.timeout_seconds,
             settings.heartbeat_interval_seconds, serializer, settings.stream_output),
        )  # fmt: skip

    # ------------------------------------------------------------ tasks

    def submit(self, fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> ScalerFuture[R]:
        """Run fn(*args, **kwargs) on a worker; the future's result has fn's return type. `profiling=True`
        profiles this task; it also reaches fn when fn has a parameter of that name (for a function without
        one, type checkers prefer `submit_verbose(fn, args, kwargs, profiling=True)`). `priority=N` is the task's
        priority (docs/guide/sharing.md) unless fn has a parameter of that name (then it reaches fn; type checkers
        prefer `submit_verbose(..., priority=N)` too)."""
        profiling, priority = self._session.settings.profiling, None
        call_kwargs: dict[str, Any] = kwargs
        if "priority" in kwargs and not takes_parameter(fn, "priority"):
            priority = checked_priority(kwargs["priority"])
            call_kwargs = {key: value for key, value in kwargs.items() if key != "priority"}
        if "profiling" in kwargs:
            entry = self._session.function(fn)
            profiling = bool(kwargs["profiling"]) or profiling
            if not entry.takes_profiling:
                call_kwargs = {key: value for key, value in call_kwargs.items() if key != "profiling"}
        return self.submit_verbose(fn, args, call_kwargs, profiling=profiling, priority=priority)

    def submit_verbose(
        self,
        fn: Callable[..., R],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        capabilities: dict[str, int] | None = None,
        reserialize: bool = False,
        profiling: bool | None = None,
        priority: int | None = None,
    ) -> ScalerFuture[R]:
        """`priority`: higher runs first (an int; nested tasks keep their parent's unless they name one)."""
        return self._session.submit(
            fn, args, kwargs, priority=priority, capabilities=capabilities, profiling=profiling, refresh=reserialize
        )

    # ------------------------------------------------------------ streaming tasks (client/streams.py)

    def stream(self, fn: Callable[P, Iterable[V]], /, *args: P.args, **kwargs: P.kwargs) -> TaskStream[V]:
        """Run fn(*args, **kwargs), a generator function (or one returning an iterable), on a worker as a streaming
        task: iterate the returned `TaskStream` to get its values in order, as they are yielded. The generator runs at
        most 16 values ahead of the reader (`stream_verbose(..., window=N)` for another window); an exception it
        raises is raised where its values stop; `stream.cancel()` stops it on the worker. `submit` of a generator
        function runs it too, and its future's result is the list of its values."""
        return self.stream_verbose(fn, args, kwargs)

    def stream_verbose(
        self, fn: Callable[..., Iterable[V]], args: tuple[Any, ...], kwargs: dict[str, Any], *,
        window: int = DEFAULT_WINDOW, capabilities: dict[str, int] | None = None, priority: int | None = None,
        profiling: bool | None = None, reserialize: bool = False,
    ) -> TaskStream[V]:  # fmt: skip
        """`stream` with options: `window` (values the generator may run ahead of its reader), and those of
        `submit_verbose`."""
        options = TaskOptions.of(priority, capabilities, profiling)
        return self._session.stream(fn, [(args, kwargs)], options, window, refresh=reserialize)[0]

    def stream_map(
        self, fn: Callable[..., Iterable[V]], *iterables: Iterable[Any], window: int = DEFAULT_WINDOW,
        capabilities: dict[str, int] | None = None, priority: int | None = None,
    ) -> list[TaskStream[V]]:  # fmt: skip
        """fn(*items) for each items of the iterables (as built-in map) as streaming tasks, all submitted now: one
        `TaskStream` per item, in order, each yielding that item's values as they are made."""
        if not iterables:
            raise TypeError("stream_map() needs at least one iterable")
        options = TaskOptions.of(priority, capabilities)
        calls: Iterable[tuple[tuple[Any, ...], dict[str, Any]]] = (
            (tuple(items), {}) for items in zip(*iterables, strict=False)
        )
        return self._session.stream(fn, calls, options, window)

    # ------------------------------------------------------------ actors (client/actors.py)

    def actor(self, cls: type[V], /, *args: Any, **kwargs: Any) -> ActorHandle[V]:
        """Start an actor: `cls(*args, **kwargs)` built on one worker, where it lives; `handle.method(...)` is a future
        of that method's call on it. Calls run one at a time in the order they were made, on the same instance. A
        worker's death builds it again elsewhere (up to 3 times; `actor_verbose` for other options). It ends with
        `handle.stop()`, when the handle is garbage collected, or when this client leaves."""
        return self.actor_verbose(cls, args, kwargs)

    def actor_verbose(
        self, cls: type[V], args: tuple[Any, ...], kwargs: dict[str, Any], *, max_restarts: int = DEFAULT_MAX_RESTARTS,
        max_concurrency: int = 1, name: str | None = None, capabilities: dict[str, int] | None = None,
    ) -> ActorHandle[V]:  # fmt: skip
        """`actor` with options: `max_restarts` (builds after a loss; -1: no limit; 0: none), `max_concurrency`
        (calls that run at once, on threads of its processor; 1: one at a time, in order), `name` (other clients
        of this key find it with `get_actor(name)`; a named actor is not stopped when a handle is collected), and
        `capabilities` (which workers may hold it)."""
        spec = spec_of(cls, max_restarts, max_concurrency, name)
        options = TaskOptions.of(None, capabilities)
        return ActorHandle.start(self._session, cls, args, kwargs, spec, options, actor_handle_in_task)

    def get_actor(self, name: str) -> ActorHandle[Any]:
        """A handle on the live actor named `name` (started by a client of this client's key); ValueError when none
        is alive."""
        return ActorHandle.look_up(self._session, name, actor_handle_in_task)

    @overload
    def map(
        self, fn: Callable[[A], R], iterable: Iterable[A], /, *, capabilities: dict[str, int] | None = None,
        reserialize: bool = False, progress: bool = False, priority: int | None = None,
    ) -> list[R]: ...  # fmt: skip

    @overload
    def map(
        self, fn: Callable[[A, B], R], first: Iterable[A], second: Iterable[B], /, *,
        capabilities: dict[str, int] | None = None, reserialize: bool = False, progress: bool = False,
        priority: int | None = None,
    ) -> list[R]: ...  # fmt: skip

    @overload
    def map(
        self, fn: Callable[..., R], first: Iterable[Any], second: Iterable[Any], third: Iterable[Any], /,
        *iterables: Iterable[Any], capabilities: dict[str, int] | None = None, reserialize: bool = False,
        progress: bool = False, priority: int | None = None,
    ) -> list[R]: ...  # fmt: skip

    def map(
        self, fn: Callable[..., R], *iterables: Iterable[Any], capabilities: dict[str, int] | None = None,
        reserialize: bool = False, progress: bool = False, priority: int | None = None,
    ) -> list[R]:  # fmt: skip
        """Like built-in map (stops at the shortest iterable), run on the workers; returns the results.
        `progress=True` shows a progress bar on stderr (a widget in Jupyter); `priority` as for submit_verbose."""
        options = TaskOptions.of(priority, capabilities)  # checked before any item is read
        return self._maps.map(fn, iterables, options, reserialize, progress)

    def starmap(
        self, fn: Callable[..., R], iterable: Iterable[Iterable[Any]], capabilities: dict[str, int] | None = None,
        reserialize: bool = False, progress: bool = False, priority: int | None = None,
    ) -> list[R]:  # fmt: skip
        """fn(*args) for each args in iterable, run on the workers; returns the results in order.
        A large map travels in chunks of several calls per task (see map_chunks), streamed when its length is
        known (see map_stream). An item that raises ends the map with its exception, which names the item's
        index and arguments in a note."""
        options = TaskOptions.of(priority, capabilities)  # checked before any item is read
        return self._maps.starmap(fn, iterable, options, reserialize, progress)

    def get(
        self,
        graph: Any,
        keys: Any,
        block: bool = True,
        capabilities: dict[str, int] | None = None,
        reserialize: bool = False,
        priority: int | None = None,
        **scheduler_options: Any,
    ) -> Any:
        """Run a dict graph (values are data, callables, or tuples (fn, arg, ...) whose arguments may name
        other keys) and return {key: result} for the requested keys, or {key: future} with block=False.
        `priority` as for submit_verbose (every node of the graph has it).

        `keys` one key (a string, or a key of the graph that is not a list): its result alone, as Dask's get answers.
        Also Dask's scheduler: `dask.compute(*collections, scheduler=client.get)` (or `scheduler=client`) runs the
        Dask graph as one graph here and returns what Dask expects (see `dask_graph`)."""
        if dask_graph.is_dask_call(graph):
            retries = scheduler_options.get("retries")
            return dask_graph.compute(
                self.get, graph, keys, capabilities=capabilities, priority=priority, retries=retries
            )
        if scheduler_options:
            raise TypeError(f"get() got unexpected keyword argument(s): {', '.join(sorted(scheduler_options))}")
        if _is_one_key(graph, keys):  # Dask's get(dsk, "z"): the key's value (its future with block=False)
            return self.get(graph, [keys], block, capabilities, reserialize, priority)[keys]
        self._session.check_open()
        options = TaskOptions.of(priority, capabilities)
        if isinstance(graph, dict):  # a call nested in another's arguments runs, as in Dask's graphs
            graph = with_nested_calls_lifted(graph)
        futures = self._session.submit_graph(graph, keys, options, refresh=reserialize)
        if not block:
            return futures
        values = self._maps.gather(list(futures.values()))
        return dict(zip(futures.keys(), values, strict=True))

    def dask_get(self, dsk: Any, keys: Any, **options: Any) -> Any:
        """Dask's get protocol, `get(dsk, keys, **kwargs)`, as Dask's own schedulers answer it: `keys` is one key (its
        value comes back) or a nested list of keys (values in the same nesting, lists as tuples); tuples
        `(function, *args)` nested anywhere in a task's arguments run too; a missing key raises KeyError. The whole
        graph runs as one graph on the cluster (see `dask_graph`). For `dask.config.set(scheduler=client.dask_get)`
        and libraries that call a Dask-style `get`; `get` keeps its own answer, `{key: value}` for a list of keys.
        Dask's local-scheduler options (`num_workers`, `pool`, ...) are accepted and mean nothing here. Needs dask
        (the `dask` extra)."""
        self._session.check_open()
        return dask_graph.dask_get(self.get, dsk, keys)

    def map_job(
        self, fn: Callable[[A], R], iterable: Iterable[A], /, *, name: str, priority: int | None = None
    ) -> Job[R]:
        """fn(item) for each item as a job named `name` that outlives this client (docs/guide/sharing.md, "Jobs"):
        returns once the scheduler holds every task; this process may then exit, and any client may follow the job
        with `Client(address).job(name)`. A name taken by a job the scheduler still keeps is a ValueError."""
        return jobs.submit_map_job(self._session, fn, iterable, name, priority)

    def submit_job(
        self, fn: Callable[..., R], /, *args: Any, name: str, priority: int | None = None, **kwargs: Any
    ) -> Job[R]:
        """fn(*args, **kwargs) as a job of one task named `name`, like `map_job`; `job.result()` reads it. The
        keywords `name` and `priority` are the job's, not fn's."""
        return jobs.submit_calls(self._session, fn, [(args, kwargs)], name, priority)

    def job(self, name: str) -> Job[Any]:
        """Attach to the job named `name` (submitted by any client, of this client's key when CURVE is on): its
        progress, its results in order or as they complete, its cancel. An unknown or expired name is a ValueError."""
        return jobs.attach_job(self._session, name)

    def executor(self) -> ScalerExecutor:
        """This client as a `concurrent.futures.Executor` (submit, a lazy ordered map, shutdown): for libraries
        written against one. Its `shutdown()` cancels (when asked) its own futures only; the cluster goes on."""
        from scaler.client.executor import ScalerExecutor

        self._session.check_open()
        return ScalerExecutor(self._session)

    # ------------------------------------------------------------ objects

    def send_object(self, obj: Any, name: str | None = None) -> ObjectReference:
        """Store obj once; tasks receive the object wherever they get the returned reference."""
        return self._session.store(obj, name)

    def scatter(self, data: Any, broadcast: bool = False, hash: bool = True) -> Any:
        """Store data for tasks, as `send_object` does: one object gives its reference, a list, tuple or set a
        reference per item (in the same type), a dict a reference per value (same keys). Object storage serves every
        worker, so `broadcast` (Dask's copy to each worker) changes nothing; identical content is stored once whatever
        `hash` says."""
        return gathering.scatter(data, self._session.store)

    def gather(self, futures: Any, errors: str = "raise", timeout: float | None = None) -> Any:
        """The results of futures: one future gives its result, lists, tuples, sets and dicts of them (nested too) the
        same with results in their place. `errors="skip"` leaves out the futures that failed or were cancelled;
        `timeout`: TimeoutError when they are not all done in that many seconds."""
        gathering.checked_errors(errors)
        with self._session.reading_each(gathering.futures_in(futures, _is_scaler_future)):  # read as each is done
            return gathering.gather(futures, _is_scaler_future, ScalerFuture.result, errors, timeout)

    # ------------------------------------------------------------ the cluster

    def wait_for_workers(self, n_workers: int = 1, timeout: float | None = None) -> None:
        """Wait until the scheduler has `n_workers` workers' processors connected (TimeoutError after `timeout`
        seconds; None: no limit)."""
        worker_calls.wait_for_workers(self._session, n_workers, timeout)

    def cluster_view(self, monitor_address: str | None = None) -> ClusterView:
        """The scheduler's view of its workers now: each worker's processors, capabilities and the tasks it holds
        (read from its monitor feed; `monitor_address` when it publishes elsewhere than its port + 2)."""
        return self._session.cluster_view(monitor_address)

    def run(
        self, fn: Callable[..., Any], /, *args: Any, workers: list[str] | None = None, on_error: str = "raise",
        timeout: float = worker_calls.RUN_TIMEOUT_SECONDS, **kwargs: Any,
    ) -> dict[str, Any]:  # fmt: skip
        """fn(*args, **kwargs) once on each worker (or those of `workers`, worker ids), as a task on one of its
        processors: {worker id: result}. `on_error`: "raise", "return" (the error as that worker's result) or
        "ignore". Its tasks wait in the queue as any task does (see `client/worker_calls.py`)."""
        self._session.check_open()
        return worker_calls.run_on_workers(self._session, fn, args, kwargs, workers, on_error, timeout)

    def upload_file(self, filename: str | os.PathLike[str]) -> list[str]:
        """Make a module of yours (a `.py` file) or a package archive (`.zip`, `.egg`, `.whl`, pure Python) importable
        by name in the tasks this client submits from now on, on every worker, as if installed there (its bytes
        travel with each function stored, once per function). Returns the top-level names it provides; a module that
        does not compile raises SyntaxError here."""
        self._session.check_open()
        return worker_calls.upload_file(self._session, filename)

    # ------------------------------------------------------------ ending

    def forward_logging(self, logger_name: str | None = None, level: int = logging.NOTSET) -> None:
        """From now on, the `logging` records this client's tasks emit (on the task's thread) at `level` or above,
        of logger `logger_name` and its children (every logger when None), reach this process's `logging` under
        the same logger names, with `task_id` (hex) and `worker` as record attributes. Records travel in batches;
        a task forwards at most 10,000 records (4 MiB), then one warning says how many were dropped. Tasks
        submitted before the call do not forward. Dask's spelling."""
        self._session.forward_logging(forwarded_logs.forwarding(logger_name, level))

    def clear(self) -> None:
        """Cancel this client's unfinished tasks and delete every object it stored."""
        self._session.clear()

    def disconnect(self) -> None:
        """Cancel this client's unfinished tasks and leave; the cluster keeps running."""
        self._session.close()

    close = disconnect  #: by the name executors and Dask's client use

    def shutdown(self) -> None:
        """Ask the scheduler to stop the whole cluster; refused when the scheduler is protected."""
        self._session.shutdown_cluster()


#: Clients unpickled in this process: by the identity of the client that was pickled, or inside a task by its
#: settings alone (one connection per processor).
_unpickled: dict[tuple[bytes, str], Client] = {}
_unpickled_lock = threading.Lock()


def _rebuild_client(
    address: str, identity: bytes, profiling: bool, timeout_seconds: float, heartbeat_interval_seconds: float,
    serializer: Serializer | None, stream_output: bool,
) -> Client:  # fmt: skip
    context = processor_context.current()
    if context is not None:
        # inside a task: one client per processor, whichever client was pickled (each level of a nested
        # computation pickles the client its parent got): the tasks a processor runs share its connection
        address = context.scheduler_address
        identity = repr((profiling, timeout_seconds, heartbeat_interval_seconds, stream_output,
                         type(serializer).__qualname__)).encode()  # fmt: skip
    key = (identity, address)
    with _unpickled_lock:
        client = _unpickled.get(key)
        if client is None or not client.session.is_open:
            client = Client(address, profiling, timeout_seconds, heartbeat_interval_seconds, serializer, stream_output)
            _unpickled[key] = client
        return client


def in_task_client() -> Client:
    """The client of the task running in this processor (one per processor, as for a Client passed into a task);
    RuntimeError outside a task."""
    if processor_context.current() is None:
        raise RuntimeError("this object calls through the client of a task: it can only be unpickled inside a task")
    return _rebuild_client("", b"", False, 60.0, 2.0, None, False)


def actor_handle_in_task(actor_id: TaskID, class_name: str, methods: tuple[str, ...]) -> ActorHandle[Any]:
    """An actor handle unpickled in a task: its calls go through the processor's client (one connection per
    processor); it does not stop the actor when collected."""
    handle: ActorHandle[Any] = ActorHandle(
        in_task_client().session, actor_id, class_name, frozenset(methods), None, actor_handle_in_task, owned=False
    )
    return handle


def trust_security_config(security_config: Any) -> None:
    """The reference's `security_config` (`SecurityConfig(tls_cert, tls_key)`, given to every part of a cluster): on
    a connecting side, its certificate is trusted as an authority (a self-signed server certificate, or a chain
    ending with its authority), since scaler checks the server's certificate (docs/security.md); None changes
    nothing. TlsFileError naming the file when it cannot be used."""
    if security_config is None:
        return
    cert = getattr(security_config, "tls_cert", None)
    if cert is None and not hasattr(security_config, "tls_key"):
        raise ValueError(
            f"security_config must be a SecurityConfig(tls_cert, tls_key) or None, not {security_config!r}; scaler "
            "takes tls_ca=, and CURVE keys (docs/security.md)"
        )
    if cert:
        trust_ca_file(str(cert), "security_config.tls_cert")


def _is_scaler_future(value: Any) -> bool:
    return isinstance(value, ScalerFuture)


def _is_one_key(graph: Any, keys: Any) -> bool:
    """`keys` names one key of a graph (Dask's `get(dsk, "z")`), not a list of them: a string or bytes (never
    iterated as its characters), or a key of the graph that is not a list (a Dask key such as `("x", 0)`)."""
    if isinstance(keys, (str, bytes)):
        return True
    if isinstance(keys, list) or not isinstance(graph, dict):
        return False
    try:
        return keys in graph
    except TypeError:  # not hashable: a collection of keys
        return False
