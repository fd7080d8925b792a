"""A client session: one connection to a cluster, under every front end (`Client`, `AsyncClient`, the Executor, jobs,
the Ray, joblib and Dask front ends).

It owns, and is the only thing that touches:

- the scheduler connection: `ClientAgent` (the I/O thread) around `ClientCore` (futures, resubmission, cancels);
- the task encoder (`payload.task_encoder`: functions stored once, arguments inline or in storage);
- the object storage side (`object_storage_side.ClientObjectStorage`: this client's objects, stored once, arguments
  pipelined and the tasks held behind them, other owners' objects for followed jobs);
- the result reader (a future's value, fetched when first asked for);
- the one resolution of where it connects and with which keys (`scheduler_and_keys`: `security.find.find_keys`,
  the one search every connecting side makes; the agent finds them again while the stack starts).

Front ends speak to it in tasks and objects: `submit` / `submit_many` / `prepare` + `send` (a call or many, each a
`ScalerFuture`), `stream` (streaming tasks, each a `TaskStream`), `submit_graph`, `cancel` / `cancel_futures` /
`cancel_all`, `store` / `read`, `ask_job` / `follow`, `worker_count`, `close`. A new kind of work (streams, actors)
adds a message pair and a method here, as jobs did (`ask_job`): the agent's request/answer seam carries it, and no
front end reaches below the session.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import logging
import os
import socket
import sys
from collections.abc import Hashable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, NamedTuple, TypeVar

from scaler.client import cluster_view
from scaler.client.agent import ClientAgent
from scaler.client.cluster_view import ClusterView
from scaler.client.eager_reads import EagerReads
from scaler.client.future import ScalerFuture
from scaler.client.graph import encode_graph
from scaler.client.object_storage_side import ClientObjectStorage, HeldTask
from scaler.client.read_ahead import NoReadAhead, ReadAhead
from scaler.client.sharing import checked_quota, checked_resume_seconds, checked_share, wire_priority
from scaler.client.streams import DEFAULT_WINDOW, TaskStream
from scaler.errors import ClientQuitException, ClientShutdownException
from scaler.io.address import parse_address, validate_address
from scaler.io.sockets import HEARTBEAT_TIMEOUT_SECONDS, TransportSecurity
from scaler.io.tunnel.front import storage_for
from scaler.monitor import local_schedulers
from scaler.payload import processor_context
from scaler.payload.references import ObjectReference
from scaler.payload.result_reader import ResultReader
from scaler.payload.serializer import DefaultSerializer, Serializer, deserialize_frames, serialize_to_frames
from scaler.payload.task_encoder import FunctionEntry, TaskEncoder, describe, frames_size
from scaler.payload.uploads import Upload
from scaler.protocol import codec
from scaler.protocol import messages as m
from scaler.protocol.handshake import local_python_version
from scaler.protocol.ids import ClientID, TaskID, new_client_id, new_task_id, short
from scaler.security.connection_files import MONITOR_SERVICE
from scaler.security.find import FoundKeys, find_keys

logger = logging.getLogger(__name__)

#: Bound on the waits of clear(), close() and shutdown_cluster().
CLOSE_TIMEOUT_SECONDS = 10.0
#: How long a request waits (object storage, jobs) when `timeout_seconds` is not given.
DEFAULT_TIMEOUT_SECONDS = 60.0

FutureT = TypeVar("FutureT", bound=ScalerFuture[Any])

#: Arguments of one call: (args, kwargs).
Call = tuple[tuple[Any, ...], dict[str, Any]]


@dataclass(frozen=True)
class SessionSettings:
    """What a session is opened with (the `Client`'s arguments of the same names)."""

    profiling: bool = False
    #: None: requests wait `DEFAULT_TIMEOUT_SECONDS`, a silent scheduler as long as it keeps this client's work
    timeout_seconds: float | None = None
    heartbeat_interval_seconds: float = 2.0
    serializer: Serializer = field(default_factory=DefaultSerializer)
    stream_output: bool = False
    object_storage_address: str | None = None
    connect_timeout_seconds: float = 15.0
    #: None: 60 s (a connection the scheduler closed), or the resume window when longer (one that died of silence)
    scheduler_lost_grace_seconds: float | None = None
    share: float = 1.0
    max_running_tasks: int | None = None
    max_workers: int | None = None
    resume_seconds: float | None = None  #: how long its work waits for it while it is away (None: the scheduler's)
    link_heartbeat_timeout_seconds: float = HEARTBEAT_TIMEOUT_SECONDS  #: ZeroMQ's pings of the scheduler go unanswered

    @property
    def request_timeout_seconds(self) -> float:
        """How long a request (object storage, a job) waits."""
        return DEFAULT_TIMEOUT_SECONDS if self.timeout_seconds is None else self.timeout_seconds


class TaskOptions(NamedTuple):
    """How the tasks of one submission travel: their priority on the wire (the user's and the nesting depth,
    `client/sharing.py`), capabilities, and profiling (None: the session's). A tuple: one is made per submit."""

    priority: int = 0
    capabilities: m.Capabilities = ()
    profiling: bool | None = None

    @classmethod
    def of(
        cls, priority: int | None = None, capabilities: dict[str, int] | None = None, profiling: bool | None = None
    ) -> TaskOptions:
        """For tasks submitted now: `priority` is the user's (checked here; None: the default, or the parent's)."""
        return cls(wire_priority(priority), m.make_capabilities(capabilities), profiling)


def scheduler_and_keys(
    address: str | None,
    security: TransportSecurity | None = None,
    curve_secret_key: str | None = None,
    curve_server_key: str | None = None,
) -> tuple[str, FoundKeys]:
    """The scheduler's address (None: inside a task, the task's own) and the keys `find_keys` finds for it: the key
    files given, else `security`, else the task's worker's, else what a local server's or stack's connection file,
    the key text variables or the user's keys say (docs/guide/security.md)."""
    context = processor_context.current()
    if address is None:
        if context is None:
            raise ValueError(
                "No scheduler address provided, and not running inside a worker context (a task): Client() needs "
                "the scheduler's address, e.g. Client(address='tcp://127.0.0.1:8516'); only a Client created "
                "inside a task finds its scheduler by itself"
            )
        address = context.scheduler_address
    address = validate_address(address)
    given = {"curve_secret_key": curve_secret_key, "curve_server_key": curve_server_key}
    keys = find_keys(
        "client", address, given if any(given.values()) else security,
        inherited=context.security if context is not None else None,
    )  # fmt: skip
    return address, keys


class Session:
    """One client's connection to a cluster (see the module's docstring). Thread-safe."""

    def __init__(
        self,
        address: str | None,
        settings: SessionSettings,
        *,
        security: TransportSecurity | None = None,
        curve_secret_key: str | None = None,
        curve_server_key: str | None = None,
    ) -> None:
        """Connects (waiting up to `settings.connect_timeout_seconds` for the scheduler's answer)."""
        if not settings.link_heartbeat_timeout_seconds > 0:
            raise ValueError(
                f"link_heartbeat_timeout_seconds must be a positive number of seconds, not "
                f"{settings.link_heartbeat_timeout_seconds!r} (the default is {HEARTBEAT_TIMEOUT_SECONDS:g})"
            )
        info = m.ClientInfo(
            "",
            checked_share(settings.share),
            checked_quota("max_running_tasks", settings.max_running_tasks),
            checked_quota("max_workers", settings.max_workers),
            resume_seconds=checked_resume_seconds(settings.resume_seconds),
        )
        self.settings = settings
        self.address, keys = scheduler_and_keys(address, security, curve_secret_key, curve_server_key)
        self.identity = ClientID(new_client_id())
        self._story_name = short(self.identity)  #: how this client is named in its tasks' stories
        self._closed = False
        hello = m.Hello(m.PROTOCOL_VERSION, local_python_version(), os.getpid(), socket.gethostname(), info)
        self._agent: ClientAgent[ScalerFuture] = ClientAgent(
            self.address, self.identity, hello, settings.heartbeat_interval_seconds, settings.timeout_seconds,
            keys, settings.scheduler_lost_grace_seconds, settings.link_heartbeat_timeout_seconds,
        )  # fmt: skip
        reply = self._agent.start(settings.connect_timeout_seconds)
        #: a thread waiting on a future reads the connection itself (`ClientAgent.wait_reading`), except in a
        #: processor: its task threads are parked, stopped and have their output captured by the processor
        self._reading = self._agent if processor_context.current() is None else None
        #: what every future is handed, made once: a bound method made per future was 128 bytes of each pending one
        self._cancel_one = self.cancel_one
        self._request_story = self._agent.request_story
        self.security: TransportSecurity | None = self._agent.keys.security  #: the keys that reached the scheduler
        self._storage = ClientObjectStorage(
            settings.object_storage_address or storage_for(reply.object_storage_address, reply.tunnel_address,
                                                           self.address),
            self.identity, self.security,
            settings.request_timeout_seconds, release=self._agent.submit,
        )  # fmt: skip
        self._encoder = TaskEncoder(
            self.identity, settings.serializer, self._storage.objects, self._agent.keys.ship_local_modules,
            stored=self._storage,
        )  # fmt: skip
        self._reader = ResultReader(
            settings.serializer, self._storage.connection, read_in_parts=self._storage.read_result
        )
        #: stored results read as soon as their tasks are answered (client/eager_reads.py)
        self._eager = EagerReads(self._storage.as_reader, self._storage.reads_locally)
        self._agent.on_answered = self._read_stored_results
        self._agent.restore_stored = self._restore_stored
        local_schedulers.note_client(self, self.address, self.security)  # the run report finds its scheduler

    # ------------------------------------------------------------ what it is

    @property
    def serializer(self) -> Serializer:
        return self.settings.serializer

    @property
    def storage_address(self) -> str:
        return self._storage.address

    @property
    def worker_count(self) -> int:
        """Workers the scheduler had at its last answer."""
        return self._agent.worker_count

    @property
    def unfinished_count(self) -> int:
        return self._agent.unfinished_count

    @property
    def error(self) -> BaseException | None:
        """Why the connection is gone, once it is."""
        return self._agent.error

    @property
    def is_open(self) -> bool:
        """Not closed, and the connection is not lost."""
        return not self._closed and self._agent.error is None

    @property
    def state(self) -> str:
        """ "connected", "lost: ..." or "disconnected"."""
        if self._closed:
            return "disconnected"
        return f"lost: {self._agent.error}" if self._agent.error is not None else "connected"

    @property
    def monitor_address(self) -> str:
        """Where the scheduler publishes its status (`client/cluster_view.py`): what its connection file says, else
        what a local cluster of this process bound, else its port + 2 (the scheduler's default)."""
        named = self._agent.keys.services.get(MONITOR_SERVICE) or local_schedulers.started().get(self.address)
        return named or str(parse_address(self.address).with_port_offset(2))

    def cluster_view(self, monitor_address: str | None = None) -> ClusterView:
        """The scheduler's view of its workers now (`client/cluster_view.py`; ClusterViewError when it cannot be read:
        give `monitor_address` when the scheduler publishes elsewhere than `monitor_address` says)."""
        self.check_open()
        return cluster_view.read(self.address, monitor_address or self.monitor_address, self.security)

    @property
    def is_pipelining(self) -> bool:
        """Arguments are being stored pipelined (tasks may wait behind their puts): submit in smaller batches."""
        return self._storage.is_pipelining

    def check_open(self) -> None:
        if self._closed:
            raise ClientQuitException("this client is disconnected; create a new Client to submit more work")
        if self._agent.error is not None:
            raise self._agent.error

    # ------------------------------------------------------------ tasks

    def function(self, fn: Any, refresh: bool = False) -> FunctionEntry:
        """`fn` stored (once per session; `refresh`: again), with what a call needs checked against it."""
        return self._encoder.function(fn, refresh=refresh)

    def prepare(
        self,
        fn: Any,
        calls: Iterable[Call],
        options: TaskOptions,
        *,
        future_type: type[FutureT] = ScalerFuture,  # type: ignore[assignment]
        reader: ResultReader | None = None,
        outlives_task: bool = False,
    ) -> list[tuple[TaskID, FutureT, bytes]]:
        """Each call encoded as a task with its future, not sent yet (`send`): for front ends that announce tasks
        before they leave (jobs). `reader`: how the futures read their results (default: this client's objects,
        deleted once read). `outlives_task`: inside a task, the futures are not the task's children (a job's: a
        stopped task does not cancel them)."""
        entry = self._encoder.function(fn)
        encode = self._encode
        return [encode(entry, args, kwargs, options, future_type, reader, outlives_task) for args, kwargs in calls]

    def send(self, tasks: list[HeldTask]) -> None:
        """Prepared tasks to the scheduler, each once the arguments it was encoded with are stored."""
        self._storage.hand_over(tasks)

    def submit(
        self, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any], *, priority: int | None = None,
        capabilities: dict[str, int] | None = None, profiling: bool | None = None, refresh: bool = False,
    ) -> ScalerFuture[Any]:  # fmt: skip
        """fn(*args, **kwargs) on a worker (the call checked against fn's signature first), with the options of
        `TaskOptions.of`. `refresh`: serialize fn again (the API's `reserialize`)."""
        self.check_open()
        options = TaskOptions(wire_priority(priority), m.make_capabilities(capabilities), profiling)
        entry = self._encoder.function(fn, refresh=refresh)
        entry.check_call(args, kwargs)
        task = self._encode(entry, args, kwargs, options, ScalerFuture, None, False)
        self._storage.hand_over([task])
        return task[1]

    def submit_many(
        self, fn: Any, calls: Iterable[tuple[Any, ...]], options: TaskOptions, refresh: bool = False
    ) -> list[ScalerFuture[Any]]:
        """fn(*args) for each args, sent in batches as they are encoded (smaller ones while arguments are stored, so
        that they leave sooner)."""
        entry = self._encoder.function(fn, refresh=refresh)
        futures: list[ScalerFuture[Any]] = []
        batch: list[HeldTask] = []
        for args in calls:
            task = self._encode(entry, args, {}, options, ScalerFuture, None, False)
            futures.append(task[1])
            batch.append(task)
            if len(batch) >= 1024 or (self._storage.is_pipelining and len(batch) >= 32):
                self._storage.hand_over(batch)
                batch = []
        if batch:
            self._storage.hand_over(batch)
        return futures

    def stream(
        self, fn: Any, calls: Iterable[Call], options: TaskOptions, window: int = DEFAULT_WINDOW, refresh: bool = False
    ) -> list[TaskStream[Any]]:
        """fn(*args, **kwargs) for each call as a streaming task (`client/streams.py`): its values come as they are
        made, at most `window` ahead of their reader. Each call is checked against fn's signature first."""
        self.check_open()
        if not isinstance(window, int) or isinstance(window, bool) or window < 1:
            raise ValueError(f"window must be a whole number of values of at least 1, not {window!r}")
        entry = self._encoder.function(fn, refresh=refresh)
        streams: list[TaskStream[Any]] = []
        batch: list[HeldTask] = []
        for args, kwargs in calls:
            entry.check_call(args, kwargs)
            task = self._encode(entry, args, kwargs, options, TaskStream, None, False, stream_credit=window)
            task[1].open(window, self._grant_credit)
            streams.append(task[1])
            batch.append(task)
            if len(batch) >= 1024:
                self._storage.hand_over(batch)
                batch = []
        if batch:
            self._storage.hand_over(batch)
        return streams

    # ------------------------------------------------------------ actors (client/actors.py)

    def start_actor(
        self, cls: type, args: tuple[Any, ...], kwargs: dict[str, Any], spec: m.ActorSpec, options: TaskOptions,
        actor_id: TaskID | None = None,
    ) -> tuple[TaskID, ScalerFuture[Any]]:  # fmt: skip
        """Start an actor: `cls(*args, **kwargs)` built on a worker (the call checked against the class first). Its
        id (the start task's: `actor_id` when given, else a new one) and the start task's future (done when the actor
        ends)."""
        self.check_open()
        entry = self._encoder.function(cls)
        entry.check_call(args, kwargs)
        task = self._encode(entry, args, kwargs, options, ScalerFuture, None, False, task_id=actor_id, actor=spec)
        self._storage.hand_over([task])
        return task[0], task[1]

    def call_actor(
        self, actor_id: TaskID, method: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> ScalerFuture[Any]:
        """`method` (an `ActorMethodFunction`) called on the actor: its future. Calls leave in the order they are
        made."""
        self.check_open()
        entry = self._encoder.function(method)
        task = self._encode(entry, args, kwargs, TaskOptions(), ScalerFuture, None, False, actor_id=actor_id)
        self._storage.hand_over([task])
        return task[1]

    def stop_actor(self, actor_id: TaskID, flush: bool = True) -> None:
        """Ask the actor to stop once the calls made before have run. `flush`: calls held behind the puts of their
        arguments leave first (a wait); a collected handle does not wait (it may be collected on any thread)."""
        if flush:
            self._storage.flush()
        self._agent.send([codec.encode(m.ActorStop(actor_id))])

    def lookup_actor(self, name: str) -> m.ActorReply:
        """The live actor of that name among those of this client's key, or inside a task among those of its
        client's key (TimeoutError after the client's timeout)."""
        self.check_open()
        lookup = m.ActorLookup(name, processor_context.running_task_id())
        return self._agent.ask_actor(lookup, self.settings.request_timeout_seconds)

    def _grant_credit(self, task_id: TaskID, up_to: int) -> None:
        """A stream's reader read far enough: its task may yield values of index below `up_to`."""
        self._agent.send([codec.encode(m.StreamCredit(task_id, up_to))])

    def submit_graph(
        self, graph: dict[Hashable, Any], keys: list[Hashable], options: TaskOptions, refresh: bool = False
    ) -> dict[Hashable, ScalerFuture[Any]]:
        """A dict graph (client/graph.py) as one GraphTask; a future per key (a data key's is done at once)."""
        self.check_open()
        profiling = self.settings.profiling if options.profiling is None else options.profiling
        encoded = encode_graph(
            graph, keys, self._encoder, self.identity, profiling=profiling, stream_output=self.settings.stream_output,
            priority=options.priority, capabilities=options.capabilities, reserialize=refresh,
        )  # fmt: skip
        futures: dict[Hashable, ScalerFuture[Any]] = {}
        targets: dict[TaskID, ScalerFuture[Any]] = {}
        for key in keys:
            task_id = encoded.node_ids.get(key)
            if task_id is not None:
                futures[key] = targets[task_id] = self._new_future(task_id, profiling, ScalerFuture)
            else:  # data: its value, at once
                futures[key] = ScalerFuture(TaskID(b""), None, None)
                futures[key].set_value(graph[key])
        if encoded.message is not None:
            frame = codec.encode(encoded.message)
            self._storage.flush()  # the graph's arguments are stored before the graph leaves
            self._agent.submit_graph(encoded.message.graph_id, frame, list(targets.items()))
        return futures

    def cancel(self, task_ids: list[TaskID]) -> None:
        """Ask the scheduler to cancel tasks; their futures are cancelled when it confirms (or complete, when their
        result came first)."""
        self._storage.flush()  # a task still held behind its puts is sent first, so the cancel finds it
        self._agent.cancel(task_ids)

    def cancel_futures(self, futures: Iterable[concurrent.futures.Future[Any]], queued_only: bool = False) -> None:
        """Cancel the tasks of these futures not done yet, in one message, without waiting (a lost connection: no
        message). `queued_only`: only those the scheduler has not yet given to a worker; the others finish."""
        task_ids = [future.task_id for future in futures if isinstance(future, ScalerFuture) and not future.done()]
        if task_ids and self._agent.error is None:
            self._agent.cancel(task_ids, queued_only)

    def cancel_all(self, timeout_seconds: float = CLOSE_TIMEOUT_SECONDS) -> None:
        """Cancel every unfinished task of this client but the job tasks it submitted (they outlive it), and wait
        up to `timeout_seconds` for the answers."""
        self._storage.flush()  # tasks held behind their puts reach the agent first, to be cancelled too
        unfinished = self._agent.unfinished().values()
        pending = [future for future in unfinished if not future.done() and not future.outlives_client]
        if not pending:
            return
        self._agent.cancel([future.task_id for future in pending])
        concurrent.futures.wait(pending, timeout=timeout_seconds)

    def cancel_one(self, task_id: TaskID) -> None:
        """What a future's `cancel()` asks (see `cancel`)."""
        self.cancel([task_id])

    def unfinished(self) -> dict[TaskID, ScalerFuture[Any]]:
        """The futures of this client's tasks not answered yet, by task id (a copy)."""
        return self._agent.unfinished()

    # ------------------------------------------------------------ jobs (the scheduler's request/answer seam)

    def ask_job(self, request: m.JobOpen | m.JobAttach) -> m.JobReply:
        """Send a job request and wait for the scheduler's answer (TimeoutError after the client's timeout)."""
        return self._agent.ask_job(request, self.settings.request_timeout_seconds)

    def follow(self, futures: list[ScalerFuture[Any]]) -> None:
        """Futures of tasks another client submitted (a job's): completed as the scheduler sends their results."""
        self._agent.follow([(future.task_id, future) for future in futures])

    def result_reader(self, owner_id: bytes | None = None, keep_objects: bool = False) -> ResultReader:
        """How futures read results stored by `owner_id` (None: this client), deleting them once read unless
        `keep_objects` (a job's results: other clients may read them too)."""
        if owner_id is None:
            return ResultReader(
                self.serializer, self._storage.connection, keep_objects=keep_objects,
                read_in_parts=self._storage.read_result,
            )  # fmt: skip
        return ResultReader(self.serializer, lambda: self._storage.of_owner(owner_id), keep_objects=keep_objects)

    def read_ahead(self, count: int = 2) -> ReadAhead | NoReadAhead:
        """For a caller about to take `count` results in turn: it tells the one it returns which it takes next, whose
        values are then read several at once (client/read_ahead.py); on the storage's host (results mapped), or for
        one result, nothing is."""
        if count < 2 or self._storage.reads_locally():
            return NoReadAhead()
        return ReadAhead(self._storage.as_reader)

    @contextlib.contextmanager
    def reading_each(self, futures: list[Any]) -> Iterator[None]:
        """For a caller that takes all of these (a gather): each is read as soon as it is done, several at once."""
        with self.read_ahead(len(futures)) as ahead:
            ahead.each(futures)
            yield

    def _read_stored_results(self, answered: list[tuple[ScalerFuture[Any], m.TaskResult]]) -> None:
        """On the thread that read the answers: this client's stored results, to be read at once."""
        stored = [
            (future, result.stored_bytes)
            for future, result in answered
            if result.payload_kind is m.PayloadKind.OBJECT_ID and type(future) is ScalerFuture
            and future.reads_with(self._reader) and result.status is m.ResultStatus.SUCCESS
        ]  # fmt: skip
        if stored:
            self._eager.done(stored)

    # ------------------------------------------------------------ objects

    def store(self, obj: Any, name: str | None = None) -> ObjectReference:
        """Store obj once; tasks receive the object wherever they get the returned reference."""
        self.check_open()
        try:
            frames = serialize_to_frames(self.serializer, obj)
        except Exception as error:
            raise TypeError(f"cannot serialize the object of type {describe(obj)}: {error}") from error
        label = name if name is not None else f"object of {describe(obj)}"
        object_id = self._encoder.put_object(frames if len(frames) > 1 else frames[0], label)
        return ObjectReference(label.encode(), frames_size(frames), object_id)

    def read(self, reference: ObjectReference) -> Any:
        """The object a reference names, read back from storage. On the storage's host a numpy array (a pandas
        frame's blocks) is a read-only view of the object's one copy in shared memory, as in a task; a reference
        marked `copy_on_write()` gives a private writable view instead (pages copied only as they are written)."""
        frames = self._storage.connection().get_frames(reference.object_id, copy_on_write=reference.writable)
        return deserialize_frames(self.serializer, frames)

    def upload(self, upload: Upload) -> None:
        """The tasks encoded from now on can import the uploaded file's modules (Client.upload_file,
        payload/uploads.py)."""
        self._encoder.add_upload(upload)

    def forward_logging(self, forwarding: m.LogForwarding) -> None:
        """The tasks encoded from now on forward their logging records (Client.forward_logging)."""
        self._encoder.log_forwarding = forwarding

    # ------------------------------------------------------------ ending

    def _restore_stored(self) -> None:
        """A restarted scheduler registered this client again, and its unfinished tasks go again next: what they need
        and object storage lost with the scheduler (its own storage restarts with it) is stored again first, from the
        functions this client holds; what it does not hold any more (an argument's bytes) is named, and a task that
        needs it fails naming it (MissingObjects)."""
        try:
            outcome = self._storage.restore(self._encoder.held_objects())
        except Exception as error:  # storage unreachable: the tasks go as they are, and say what they miss
            logger.warning("could not check what object storage at %s still holds: %s", self._storage.address, error)
            return
        if outcome is None:
            return
        self._encoder.forget_contents()
        restored, lost = outcome
        text = (
            f"object storage at {self._storage.address} lost this client's objects: {restored} function(s) stored again"
        )
        if lost:
            named = ", ".join(f"{name} {object_id.hex()}" for object_id, name in list(lost.items())[:3])
            more = ", ..." if len(lost) > 3 else ""
            text += (
                f"; {len(lost)} object(s) this client does not hold any more are lost ({named}{more}): a task "
                "that needs one fails with MissingObjects naming it"
            )
        print(f"scaler: {text}", file=sys.stderr, flush=True)

    def clear(self) -> None:
        """Cancel this client's unfinished tasks and delete every object it stored."""
        self.check_open()
        self.cancel_all(CLOSE_TIMEOUT_SECONDS)
        self._storage.delete_all()
        self._encoder.forget_stored()

    def close(self) -> None:
        """Cancel this client's unfinished tasks and leave; the cluster keeps running. Idempotent."""
        if self._closed:
            return
        self._closed = True
        local_schedulers.note_client_closed(self)
        try:
            if self._agent.error is None:
                self.cancel_all(CLOSE_TIMEOUT_SECONDS)
                self._agent.send([codec.encode(m.ClientDisconnect(shutdown_cluster=False))])
        except Exception as error:
            logger.debug("disconnect: %s", error)
        finally:
            self._agent.stop(CLOSE_TIMEOUT_SECONDS)
            self._eager.close()
            self._storage.close()

    def shutdown_cluster(self) -> None:
        """Ask the scheduler to stop the whole cluster (ClientShutdownException when it refuses), then close."""
        self.check_open()
        self.cancel_all(CLOSE_TIMEOUT_SECONDS)
        reply = self._agent.request_shutdown(CLOSE_TIMEOUT_SECONDS)
        if reply is not None and not reply.accepted:
            raise ClientShutdownException(reply.reason)
        self._closed = True
        local_schedulers.note_client_closed(self)
        self._agent.stop(CLOSE_TIMEOUT_SECONDS)
        self._eager.close()
        self._storage.close()

    def __del__(self) -> None:
        """Garbage collected unclosed (nothing holds it: no client, future, executor or job): stop without a word to
        the scheduler, without waiting."""
        try:
            if not self.__dict__.get("_closed", True):
                self._closed = True
                self._agent.stop(0.0)
                self._eager.close()
                self._storage.close()  # its sockets before their contexts: a context collected first would wait
        except Exception:
            pass

    # ------------------------------------------------------------ internals

    def _encode(
        self,
        entry: FunctionEntry,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        options: TaskOptions,
        future_type: type[FutureT],
        reader: ResultReader | None,
        outlives_task: bool,
        task_id: TaskID | None = None,
        **task_fields: Any,
    ) -> tuple[TaskID, FutureT, bytes]:
        """`task_fields`: the Task's fields of a stream or an actor (`TaskEncoder.task`); `task_id`: made before (an
        actor started later, whose handle has its id already), else a new one."""
        profiling = self.settings.profiling if options.profiling is None else options.profiling
        task_id = task_id or new_task_id()
        task = self._encoder.task(
            task_id, entry, self._encoder.arguments(args, kwargs), profiling=profiling,
            stream_output=self.settings.stream_output, priority=options.priority, capabilities=options.capabilities,
            **task_fields,
        )  # fmt: skip
        return task_id, self._new_future(task_id, profiling, future_type, reader, outlives_task), codec.encode(task)

    def _new_future(
        self,
        task_id: TaskID,
        profiling: bool,
        future_type: type[FutureT],
        reader: ResultReader | None = None,
        outlives_task: bool = False,
    ) -> FutureT:
        """A future for a task about to be submitted (the agent holds it from the submission on)."""
        future = future_type(
            task_id, reader or self._reader, self._cancel_one, profiling, self._request_story, self._story_name,
            self._reading,
        )  # fmt: skip
        if not outlives_task:
            processor_context.submitted(future)
        return future
