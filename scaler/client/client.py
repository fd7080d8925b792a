"""Client: the user's handle on a scheduler. submit, map, starmap, get (graphs), send_object, clear,
disconnect, shutdown.

Every wait on the scheduler is bounded by a timeout. A Client created inside a task without an
address connects to that task's scheduler; a Client passed into a task reconnects there (one
connection per processor is reused for every task that receives the same client).
"""

from __future__ import annotations

import concurrent.futures
import functools
import itertools
import logging
import os
import socket
import threading
from collections.abc import Callable, Iterable, Iterator, Sized
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar, overload

from scaler.client import dask_graph, jobs
from scaler.client.agent import ClientAgent
from scaler.client.display import client_rows, html_table
from scaler.client.future import ScalerFuture
from scaler.client.graph import encode_graph
from scaler.client.jobs import Job
from scaler.client.map_chunks import MAX_CHUNK, chunk_size, chunk_size_lookahead, name_failed_item, run_chunk
from scaler.client.map_stream import chunks_in_flight, stream_map
from scaler.client.object_storage_side import ClientObjectStorage
from scaler.client.progress import progress_counter, wait_with_bar
from scaler.client.sharing import (
    checked_priority,
    checked_quota,
    checked_resume_seconds,
    checked_share,
    takes_parameter,
    wire_priority,
)
from scaler.errors import ClientQuitException, ClientShutdownException
from scaler.io.address import validate_address
from scaler.io.sockets import TransportSecurity
from scaler.monitor import local_schedulers
from scaler.payload import processor_context
from scaler.payload.processor_context import BlockingWait
from scaler.payload.references import ObjectReference
from scaler.payload.result_reader import ResultReader
from scaler.payload.serializer import DefaultSerializer, Serializer, serialize_to_frames
from scaler.payload.task_encoder import TaskEncoder, describe, frames_size
from scaler.protocol import codec
from scaler.protocol import messages as m
from scaler.protocol.handshake import local_python_version
from scaler.protocol.ids import ClientID, ObjectID, TaskID, new_client_id, new_task_id, short
from scaler.security.find import find_keys

if TYPE_CHECKING:
    from scaler.client.executor import ScalerExecutor
    from scaler.object_storage.connection import ObjectStorageConnection

logger = logging.getLogger(__name__)

#: Bound on the waits of clear(), disconnect() and shutdown().
CLOSE_TIMEOUT_SECONDS = 10.0
#: How long a request waits (object storage, jobs) when `timeout_seconds` is not given.
DEFAULT_TIMEOUT_SECONDS = 60.0

#: The parameters and the return type of the function a task runs, carried to its future.
P = ParamSpec("P")
R = TypeVar("R")
A = TypeVar("A")
B = TypeVar("B")


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
    ) -> None:
        """`timeout_seconds`: how long a request (object storage, a job) waits, 60 s by default, and how long a
        silent scheduler is waited for before the futures fail with DisconnectedError: by default (None) as long as
        the scheduler keeps this client's work when it is away (its resume window, below; at least 60 s).
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
        one gets this client's unfinished tasks again); by default (None) 60 s, or the resume window when longer;
        0: fail the futures at once with DisconnectedError.
        `share`: this client's weight in the split of busy workers between clients with work queued (1: equal);
        `max_running_tasks`: the most of its tasks at workers at once (None: no quota); `max_workers`: the most
        workers' worth of spend its work holds, and the pool grows for (None: no quota); docs/guide/sharing.md."""
        info = m.ClientInfo(
            "",
            checked_share(share),
            checked_quota("max_running_tasks", max_running_tasks),
            checked_quota("max_workers", max_workers),
            resume_seconds=checked_resume_seconds(resume_seconds),
        )
        refuse_tls_security_config(security_config)
        context = processor_context.current()
        if address is None:
            if context is None:
                raise ValueError(
                    "Client() needs the scheduler's address, e.g. Client(address='tcp://127.0.0.1:8516'); "
                    "only a Client created inside a task finds its scheduler by itself"
                )
            address = context.scheduler_address
        self._address = validate_address(address)
        # the one search for keys (given ones, the task's worker's, a local server's or stack's): docs/guide/security.md
        given = {"curve_secret_key": curve_secret_key, "curve_server_key": curve_server_key}
        keys = find_keys(
            "client", self._address, given if any(given.values()) else security,
            inherited=context.security if context is not None else None,
        )  # fmt: skip
        self._profiling = profiling
        self._timeout_seconds = DEFAULT_TIMEOUT_SECONDS if timeout_seconds is None else timeout_seconds
        self._heartbeat_interval_seconds = heartbeat_interval_seconds
        self._serializer: Serializer = serializer if serializer is not None else DefaultSerializer()
        self._stream_output = stream_output
        self._identity = ClientID(new_client_id())
        self._story_name = short(self._identity)  #: how this client is named in its tasks' stories
        self._closed = False
        self._serializer_id: ObjectID | None = None
        hello = m.Hello(m.PROTOCOL_VERSION, local_python_version(), os.getpid(), socket.gethostname(), info)
        self._agent: ClientAgent[ScalerFuture] = ClientAgent(
            self._address, self._identity, hello, heartbeat_interval_seconds, timeout_seconds, keys,
            scheduler_lost_grace_seconds,
        )  # fmt: skip
        reply = self._agent.start(connect_timeout_seconds)
        self._security = security = self._agent.keys.security  #: the keys that reached the scheduler
        self._object_storage = ClientObjectStorage(
            str(object_storage_address or reply.object_storage_address), self._identity, security,
            self._timeout_seconds,
            release=self._agent.submit, forget=lambda object_id: self._encoder.forget_object(object_id),
        )  # fmt: skip
        self._encoder = TaskEncoder(
            self._identity,
            self._serializer,
            self._object_storage.store,
            self._current_serializer_id,
            store_later=self._object_storage.store_later,
            ship_local_modules=self._agent.keys.ship_local_modules,
        )
        self._chunk_runners: dict[int, functools.partial[list[Any]]] = {}
        self._reader = ResultReader(self._serializer, self._object_storage.connection)
        local_schedulers.note_client(self, self._address, self._security)  # the run report finds its scheduler

    # ------------------------------------------------------------ properties and plumbing

    @property
    def identity(self) -> ClientID:
        return self._identity

    @property
    def address(self) -> str:
        return self._address

    def __repr__(self) -> str:
        return (
            f"Client(address={self._address!r}, identity={self._identity.decode()!r}, "
            f"workers={self._agent.worker_count}, unfinished_tasks={self._agent.unfinished_count}, {self._state()})"
        )

    def _repr_html_(self) -> str:
        rows = client_rows(
            self._address, self._object_storage.address, self._agent.worker_count, self._agent.unfinished_count,
            self._state(),
        )  # fmt: skip
        return html_table("scaler Client", rows)

    def _state(self) -> str:
        if self._closed:
            return "disconnected"
        return f"lost: {self._agent.error}" if self._agent.error is not None else "connected"

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.disconnect()

    def __del__(self) -> None:
        try:
            if not getattr(self, "_closed", True):
                self._closed = True
                self._agent.stop(0.0)
                self._object_storage.abandon()
        except Exception:
            pass

    def __reduce__(self) -> tuple[Any, ...]:
        serializer = None if isinstance(self._serializer, DefaultSerializer) else self._serializer
        return (
            _rebuild_client,
            (self._address, self._identity, self._profiling, self._timeout_seconds,
             self._heartbeat_interval_seconds, serializer, self._stream_output),
        )  # fmt: skip

    def _storage(self) -> ObjectStorageConnection:
        """The connection of this client's own objects (opened at first use)."""
        return self._object_storage.connection()

    def _current_serializer_id(self) -> ObjectID:
        if isinstance(self._serializer, DefaultSerializer) and type(self._serializer) is DefaultSerializer:
            return ObjectID(b"")
        if self._serializer_id is None:
            payload = DefaultSerializer.serialize(self._serializer)
            self._serializer_id = self._encoder.put_object(payload, "serializer")
        return self._serializer_id

    def _check_open(self) -> None:
        if self._closed:
            raise ClientQuitException("this client is disconnected; create a new Client to submit more work")
        if self._agent.error is not None:
            raise self._agent.error

    def _new_future(self, task_id: TaskID, profiling: bool) -> ScalerFuture:
        """A future for a task about to be submitted (the agent holds it from the submission on)."""
        future = ScalerFuture(
            task_id, self._reader, self._request_cancel, profiling, self._agent.request_story, self._story_name
        )
        processor_context.submitted(future)
        return future

    def _request_cancel(self, task_id: TaskID) -> None:
        self._object_storage.flush()  # a task still held behind its puts is sent first, so the cancel finds it
        self._agent.cancel([task_id])

    def _cancel_without_waiting(self, futures: Iterable[ScalerFuture]) -> None:
        """Ask the scheduler to cancel the tasks of these futures not done yet, in one message; each future is
        cancelled when the scheduler confirms (or completes, when its result came first)."""
        task_ids = [future.task_id for future in futures if not future.done()]
        if task_ids and self._agent.error is None:
            self._agent.cancel(task_ids)

    @staticmethod
    def _priority(priority: int | None = None) -> int:
        """The wire priority of a task submitted now (client/sharing.py): the user's, nested one level deeper."""
        return wire_priority(priority)

    # ------------------------------------------------------------ tasks

    def submit(self, fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> ScalerFuture[R]:
        """Run fn(*args, **kwargs) on a worker; the future's result has fn's return type. `profiling=True`
        profiles this task; it also reaches fn when fn has a parameter of that name (for a function without
        one, type checkers prefer `submit_verbose(fn, args, kwargs, profiling=True)`). `priority=N` is the task's
        priority (docs/guide/sharing.md) unless fn has a parameter of that name (then it reaches fn; type checkers
        prefer `submit_verbose(..., priority=N)` too)."""
        profiling, priority = self._profiling, None
        call_kwargs: dict[str, Any] = kwargs
        if "priority" in kwargs and not takes_parameter(fn, "priority"):
            priority = checked_priority(kwargs["priority"])
            call_kwargs = {key: value for key, value in kwargs.items() if key != "priority"}
        if "profiling" in kwargs:
            entry = self._encoder.function(fn)
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
        self._check_open()
        wire = self._priority(priority)
        entry = self._encoder.function(fn, refresh=reserialize)
        entry.check_call(args, kwargs)
        profiling = self._profiling if profiling is None else profiling
        task_id = new_task_id()
        task = self._encoder.task(
            task_id, entry, self._encoder.arguments(args, kwargs), profiling=profiling,
            stream_output=self._stream_output, priority=wire, capabilities=m.make_capabilities(capabilities),
        )  # fmt: skip
        future = self._new_future(task_id, profiling)
        self._object_storage.hand_over([(task_id, future, codec.encode(task))])
        return future

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
        if not iterables:
            raise TypeError("map() needs at least one iterable")
        sizes = [len(it) for it in iterables if isinstance(it, Sized)]
        total = min(sizes) if len(sizes) == len(iterables) else None
        calls = zip(*iterables, strict=False)
        return self._starmap(fn, calls, total, capabilities, reserialize, progress, priority)

    def starmap(
        self, fn: Callable[..., R], iterable: Iterable[Iterable[Any]], capabilities: dict[str, int] | None = None,
        reserialize: bool = False, progress: bool = False, priority: int | None = None,
    ) -> list[R]:  # fmt: skip
        """fn(*args) for each args in iterable, run on the workers; returns the results in order.
        A large map travels in chunks of several calls per task (see map_chunks), streamed when its length is
        known (see map_stream). An item that raises ends the map with its exception, which names the item's
        index and arguments in a note."""
        total = len(iterable) if isinstance(iterable, Sized) else None
        calls = (tuple(args) for args in iterable)
        return self._starmap(fn, calls, total, capabilities, reserialize, progress, priority)

    def _starmap(
        self, fn: Callable[..., Any], calls: Iterator[tuple[Any, ...]], total: int | None,
        capabilities: dict[str, int] | None, reserialize: bool, progress: bool, priority: int | None = None,
    ) -> list[Any]:  # fmt: skip
        self._check_open()
        wire = self._priority(priority)  # checked before any item is read
        if total is None:  # an iterator: read just far enough to know whether the map is large
            lookahead = chunk_size_lookahead(self._agent.worker_count)
            head = list(itertools.islice(calls, lookahead + 1))
            total = len(head) if len(head) <= lookahead else None  # None: large; streamed in the largest chunks
            calls = itertools.chain(head, calls)
        first = next(calls, None)
        if first is None:
            return []
        calls = itertools.chain((first,), calls)
        self._encoder.function(fn).check_call(first, {})  # the first call only: all of them would cost too much
        size = chunk_size(total, self._agent.worker_count) if total is not None else MAX_CHUNK
        if size == 1 or not isinstance(self._serializer, DefaultSerializer):
            listed = list(calls)
            futures = self._submit_many(fn, listed, capabilities, reserialize, wire)
            return self._gather(futures, progress, [1] * len(futures), listed)
        runner = self._chunk_runners.get(id(fn))
        if runner is None or runner.args[0] is not fn:
            runner = self._chunk_runners[id(fn)] = functools.partial(run_chunk, fn)

        def submit(chunks: list[list[tuple[Any, ...]]], first: bool) -> list[ScalerFuture]:
            return self._submit_many(runner, [(chunk,) for chunk in chunks], capabilities, reserialize and first, wire)

        def cancel(future: ScalerFuture) -> None:
            self._request_cancel(future.task_id)

        window = chunks_in_flight(self._agent.worker_count)
        with BlockingWait(), progress_counter(total, progress) as advance:
            return stream_map(calls, size, window, submit, cancel, advance)

    def _submit_many(
        self,
        fn: Callable[..., Any],
        calls: list[tuple[Any, ...]],
        capabilities: dict[str, int] | None,
        reserialize: bool = False,
        priority: int | None = None,
    ) -> list[ScalerFuture]:
        """`priority`: the wire priority (`_priority`); None: the default one."""
        entry = self._encoder.function(fn, refresh=reserialize)
        caps = m.make_capabilities(capabilities)
        priority = self._priority() if priority is None else priority
        futures: list[ScalerFuture] = []
        batch: list[tuple[TaskID, ScalerFuture, bytes]] = []
        for args in calls:
            task_id = new_task_id()
            task = self._encoder.task(
                task_id, entry, self._encoder.arguments(args, {}), profiling=self._profiling,
                stream_output=self._stream_output, priority=priority, capabilities=caps,
            )  # fmt: skip
            future = self._new_future(task_id, self._profiling)
            futures.append(future)
            batch.append((task_id, future, codec.encode(task)))
            if len(batch) >= 1024 or (self._object_storage.is_pipelining and len(batch) >= 32):
                # smaller batches while arguments are being stored: they leave sooner
                self._object_storage.hand_over(batch)
                batch = []
        if batch:
            self._object_storage.hand_over(batch)
        return futures

    def _gather(
        self,
        futures: list[ScalerFuture],
        progress: bool = False,
        items: list[int] | None = None,
        calls: list[tuple[Any, ...]] | None = None,
    ) -> list[Any]:
        """The futures' results in order; the first failure cancels the rest and is raised, naming the map
        item (its index and arguments) when `items` and `calls` say which items each future ran."""
        try:
            with BlockingWait():
                if progress:
                    wait_with_bar(futures, items)
                else:
                    concurrent.futures.wait(futures, return_when=concurrent.futures.FIRST_EXCEPTION)
            values = []
            for index, future in enumerate(futures):
                try:
                    values.append(future.result())
                except Exception as error:
                    if items is not None and calls is not None:
                        name_failed_item(error, sum(items[:index]), items[index], calls)
                    raise
            return values
        except BaseException:
            for future in futures:
                if not future.done():
                    self._request_cancel(future.task_id)
            raise

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

        Also Dask's scheduler: `dask.compute(*collections, scheduler=client.get)` (or `scheduler=client`) runs the
        Dask graph as one graph here and returns what Dask expects (see `dask_graph`)."""
        if dask_graph.is_dask_call(graph):
            return dask_graph.compute(self.get, graph, keys, capabilities=capabilities)
        if scheduler_options:
            raise TypeError(f"get() got unexpected keyword argument(s): {', '.join(sorted(scheduler_options))}")
        self._check_open()
        wire = self._priority(priority)
        encoded = encode_graph(
            graph, keys, self._encoder, self._identity, profiling=self._profiling, stream_output=self._stream_output,
            priority=wire, capabilities=m.make_capabilities(capabilities), reserialize=reserialize,
        )  # fmt: skip
        futures: dict[Any, ScalerFuture] = {}
        targets: dict[TaskID, ScalerFuture] = {}
        for key in keys:
            task_id = encoded.node_ids.get(key)
            if task_id is not None:
                futures[key] = targets[task_id] = self._new_future(task_id, self._profiling)
            else:  # data: its value, at once
                futures[key] = ScalerFuture(TaskID(b""), None, None)
                futures[key]._complete_with_value(graph[key])
        if encoded.message is not None:
            frame = codec.encode(encoded.message)
            self._object_storage.flush()  # the graph's arguments are stored before the graph leaves
            self._agent.submit_graph(encoded.message.graph_id, frame, list(targets.items()))
        if not block:
            return futures
        values = self._gather(list(futures.values()))
        return dict(zip(futures.keys(), values, strict=True))

    def map_job(
        self, fn: Callable[[A], R], iterable: Iterable[A], /, *, name: str, priority: int | None = None
    ) -> Job[R]:
        """fn(item) for each item as a job named `name` that outlives this client (docs/guide/sharing.md, "Jobs"):
        returns once the scheduler holds every task; this process may then exit, and any client may follow the job
        with `Client(address).job(name)`. A name taken by a job the scheduler still keeps is a ValueError."""
        return jobs.submit_map_job(self, fn, iterable, name, priority)

    def submit_job(
        self, fn: Callable[..., R], /, *args: Any, name: str, priority: int | None = None, **kwargs: Any
    ) -> Job[R]:
        """fn(*args, **kwargs) as a job of one task named `name`, like `map_job`; `job.result()` reads it. The
        keywords `name` and `priority` are the job's, not fn's."""
        return jobs.submit_calls(self, fn, [(args, kwargs)], name, priority)

    def job(self, name: str) -> Job[Any]:
        """Attach to the job named `name` (submitted by any client, of this client's key when CURVE is on): its
        progress, its results in order or as they complete, its cancel. An unknown or expired name is a ValueError."""
        return jobs.attach_job(self, name)

    def executor(self) -> ScalerExecutor:
        """This client as a `concurrent.futures.Executor` (submit, a lazy ordered map, shutdown): for libraries
        written against one. Its `shutdown()` cancels (when asked) its own futures only; the cluster goes on."""
        from scaler.client.executor import ScalerExecutor

        self._check_open()
        return ScalerExecutor(self)

    # ------------------------------------------------------------ objects

    def send_object(self, obj: Any, name: str | None = None) -> ObjectReference:
        """Store obj once; tasks receive the object wherever they get the returned reference."""
        self._check_open()
        try:
            frames = serialize_to_frames(self._serializer, obj)
        except Exception as error:
            raise TypeError(f"cannot serialize the object of type {describe(obj)}: {error}") from error
        label = name if name is not None else f"object of {describe(obj)}"
        object_id = self._encoder.put_object(frames if len(frames) > 1 else frames[0], label)
        return ObjectReference(label.encode(), frames_size(frames), object_id)

    # ------------------------------------------------------------ ending

    def forward_logging(self, logger_name: str | None = None, level: int = logging.NOTSET) -> None:
        """From now on, the `logging` records this client's tasks emit (on the task's thread) at `level` or above,
        of logger `logger_name` and its children (every logger when None), reach this process's `logging` under
        the same logger names, with `task_id` (hex) and `worker` as record attributes. Records travel in batches;
        a task forwards at most 10,000 records (4 MiB), then one warning says how many were dropped. Tasks
        submitted before the call do not forward. Dask's spelling."""
        if isinstance(level, str):
            level = logging.getLevelName(level.upper())
        if not isinstance(level, int):
            raise ValueError(f"level must be a logging level (logging.INFO or 'INFO'), not {level!r}")
        self._encoder.log_forwarding = m.LogForwarding(level, logger_name or "")

    def clear(self) -> None:
        """Cancel this client's unfinished tasks and delete every object it stored."""
        self._check_open()
        self._cancel_all(CLOSE_TIMEOUT_SECONDS)
        self._storage().delete_owner(self._identity)
        self._encoder.forget_stored()
        self._serializer_id = None

    def disconnect(self) -> None:
        """Cancel this client's unfinished tasks and leave; the cluster keeps running."""
        if self._closed:
            return
        self._closed = True
        local_schedulers.note_client_closed(self)
        try:
            if self._agent.error is None:
                self._cancel_all(CLOSE_TIMEOUT_SECONDS)
                self._agent.send([codec.encode(m.ClientDisconnect(shutdown_cluster=False))])
        except Exception as error:
            logger.debug("disconnect: %s", error)
        finally:
            self._agent.stop(CLOSE_TIMEOUT_SECONDS)
            self._object_storage.close()

    def shutdown(self) -> None:
        """Ask the scheduler to stop the whole cluster; refused when the scheduler is protected."""
        self._check_open()
        self._cancel_all(CLOSE_TIMEOUT_SECONDS)
        reply = self._agent.request_shutdown(CLOSE_TIMEOUT_SECONDS)
        if reply is not None and not reply.accepted:
            raise ClientShutdownException(reply.reason)
        self._closed = True
        local_schedulers.note_client_closed(self)
        self._agent.stop(CLOSE_TIMEOUT_SECONDS)
        self._object_storage.close()

    def _cancel_all(self, timeout_seconds: float) -> None:
        self._object_storage.flush()  # tasks held behind their puts reach the agent first, to be cancelled too
        unfinished = self._agent.unfinished().values()
        pending = [future for future in unfinished if not future.done() and not isinstance(future, jobs.JobFuture)]
        if not pending:
            return
        self._agent.cancel([future.task_id for future in pending])
        concurrent.futures.wait(pending, timeout=timeout_seconds)


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
        if client is None or client._closed or client._agent.error is not None:
            client = Client(address, profiling, timeout_seconds, heartbeat_interval_seconds, serializer, stream_output)
            _unpickled[key] = client
        return client


def refuse_tls_security_config(security_config: Any) -> None:
    """The reference's `security_config` (TLS certificates) is accepted only as None: scaler secures its
    connections with ZeroMQ CURVE keys instead (docs/security.md)."""
    if security_config is not None:
        raise ValueError(
            "security_config (TLS certificates) is not supported: scaler authenticates and encrypts connections "
            "with ZeroMQ CURVE keys instead; see docs/security.md"
        )
