"""The only module that knows the wire format: message values <-> Cap'n Proto bytes.

`encode(message) -> bytes` and `decode(frame) -> message` for the scheduler protocol;
`encode_body`/`decode_body` for the TaskBody nested in a Task; `encode_storage_*`/`decode_storage_*`
for the object storage headers. Any frame that cannot be decoded raises `DecodeError`, whose text
names what was wrong; callers log it and answer with a ProtocolError instead of crashing.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

import capnp

from scaler.protocol import messages as m
from scaler.protocol import storage_messages as sm
from scaler.protocol.codec_fields import (
    capabilities_of,
    limit_of,
    set_capabilities,
    set_limit,
    set_worker_status,
    worker_status_of,
)
from scaler.protocol.codec_monitor import MONITOR_DECODERS, MONITOR_ENCODERS
from scaler.protocol.ids import ClientID, GraphID, ObjectID, TaskID

capnp.remove_import_hook()
_HERE = os.path.dirname(__file__)
_schema = capnp.load(os.path.join(_HERE, "message.capnp"))
_storage_schema = capnp.load(os.path.join(_HERE, "object_storage.capnp"))

#: A frame may make the reader visit at most this many words per word it holds (plus a little): a decoder
#: reads a field more than once, but a frame that claims far more than it holds (a list of 222 million empty
#: structs in 48 bytes) is refused at once instead of keeping a server busy for minutes.
_WORDS_VISITED_PER_WORD = 8
_WORDS_VISITED_MINIMUM = 8192


def _limit(frame: bytes) -> int:
    """The traversal limit of one frame: in proportion to its size (Cap'n Proto counts each element of a list
    of empty structs as one word, so a claimed list length costs what it claims)."""
    return _WORDS_VISITED_PER_WORD * (len(frame) // 8) + _WORDS_VISITED_MINIMUM


class DecodeError(ValueError):
    """A frame that is not a valid message of this protocol."""


def _set_task(builder: Any, task: m.Task) -> None:
    builder.taskId = task.task_id
    builder.clientId = task.client_id
    builder.functionName = task.function_name
    builder.priority = task.priority
    set_capabilities(builder, "capabilities", task.capabilities)
    builder.body = task.body
    if task.graph_id:
        builder.graphId = task.graph_id
    if task.dependencies:
        builder.dependencies = list(task.dependencies)
    if task.inputs:
        for item, given in zip(builder.init("inputs", len(task.inputs)), task.inputs, strict=True):
            item.taskId = given.task_id
            setattr(item, given.kind.value, given.data)


#: One bytes object per client id among the tasks decoded lately: a queue of a million tasks from one client
#: holds its id once, not a million times.
_CLIENT_IDS: dict[bytes, bytes] = {}
_MAX_SHARED_IDS = 4096


def _shared(value: Any) -> Any:
    kept = _CLIENT_IDS.get(value)
    if kept is None:
        if len(_CLIENT_IDS) >= _MAX_SHARED_IDS:
            _CLIENT_IDS.clear()
        kept = _CLIENT_IDS[value] = value
    return kept


def _task(reader: Any) -> m.Task:
    # Hot path (every task crosses it several times): readers are Any, so the id NewTypes are not
    # called, and empty lists are detected with one length read.
    capabilities = reader.capabilities
    dependencies = reader.dependencies
    inputs = reader.inputs
    return m.Task(
        reader.taskId,
        _shared(reader.clientId),
        reader.body,
        sys.intern(reader.functionName),
        reader.priority,
        capabilities_of(capabilities) if len(capabilities) else (),
        reader.graphId,
        tuple(dependencies) if len(dependencies) else (),
        tuple(_task_input(i) for i in inputs) if len(inputs) else (),
    )


def _task_input(reader: Any) -> m.TaskInput:
    kind = sys.intern(reader.which())  # a name given to getattr: see decode()
    return m.TaskInput(TaskID(reader.taskId), m.PayloadKind(kind), getattr(reader, kind))


# ---------------------------------------------------------------- encoders, one per message type


def _enc_hello(b: Any, msg: m.Hello) -> None:
    b.protocolVersion = msg.protocol_version
    b.pythonVersion = msg.python_version
    b.pid = msg.pid
    b.hostname = msg.hostname
    b.knownInstance = msg.known_instance
    info = msg.info
    if isinstance(info, m.ClientInfo):
        c = b.role.init("client")
        c.name = info.name
        c.share = info.share
        c.maxRunningTasks = info.max_running_tasks
        c.maxWorkers = info.max_workers
        c.resumeSeconds = info.resume_seconds
    elif isinstance(info, m.WorkerInfo):
        w = b.role.init("worker")
        set_capabilities(w, "capabilities", info.capabilities)
        w.capacity = info.capacity
        w.managerId = info.manager_id
        w.workerType = info.worker_type
        if info.held_tasks:
            held = w.init("heldTasks", len(info.held_tasks))
            for index, task_id in enumerate(info.held_tasks):
                held[index] = task_id
    elif isinstance(info, m.ManagerInfo):
        g = b.role.init("manager")
        g.managerId = info.manager_id
        set_capabilities(g, "capabilities", info.capabilities)
        set_limit(g.maxWorkers, info.max_workers)
        g.managerType = info.manager_type
        g.workerCostPerHour = info.worker_cost_per_hour
        g.expectedBootSeconds = -1.0 if info.expected_boot_seconds is None else info.expected_boot_seconds
        g.minWorkers = info.min_workers
        g.bufferWorkers = info.buffer_workers
    else:
        b.role.init("processor").processorId = info.processor_id


def _enc_hello_reply(b: Any, msg: m.HelloReply) -> None:
    b.accepted = msg.accepted
    b.reason = msg.reason
    b.protocolVersion = msg.protocol_version
    b.pythonVersion = msg.python_version
    b.objectStorageAddress = msg.object_storage_address
    b.heartbeatIntervalSeconds = msg.heartbeat_interval_seconds
    b.workerCount = msg.worker_count
    b.instanceId = msg.instance_id
    b.resumeSeconds = msg.resume_seconds


def _enc_heartbeat(b: Any, msg: m.Heartbeat) -> None:
    b.cpuPercent = msg.cpu_percent
    b.rssBytes = msg.rss_bytes
    b.roundTripSeconds = msg.round_trip_seconds
    if msg.answers_epoch or msg.answers_received:
        b.answersEpoch = msg.answers_epoch
        b.answersReceived = msg.answers_received
    if msg.worker is not None:
        set_worker_status(b.init("worker"), msg.worker)
    elif msg.manager is not None:
        g = b.init("manager")
        g.units = msg.manager.units
        g.pendingUnits = msg.manager.pending_units
        g.bootSeconds = msg.manager.boot_seconds
    else:
        b.client = None


def _enc_heartbeat_echo(b: Any, msg: m.HeartbeatEcho) -> None:
    b.objectStorageAddress = msg.object_storage_address
    b.workerCount = msg.worker_count


def _enc_task_result(b: Any, msg: m.TaskResult) -> None:
    b.taskId = msg.task_id
    b.status = msg.status.value
    b.errorMessage = msg.error_message
    if msg.payload_kind is m.PayloadKind.INLINE:
        b.inline = msg.payload
    elif msg.payload_kind is m.PayloadKind.OBJECT_ID:
        b.objectId = msg.payload
    else:
        b.none = None
    profile = msg.profile
    if profile.duration_seconds or profile.cpu_seconds or profile.peak_memory_bytes:
        p = b.init("profile")
        p.durationSeconds = profile.duration_seconds
        p.cpuSeconds = profile.cpu_seconds
        p.peakMemoryBytes = profile.peak_memory_bytes
    if msg.worker_id:
        b.workerId = msg.worker_id
    if msg.stored_bytes:
        b.storedBytes = msg.stored_bytes
    if msg.ran is not None:
        ran = b.init("ran")
        ran.startedAt = msg.ran.started_at
        ran.finishedAt = msg.ran.finished_at
        ran.processorPid = msg.ran.processor_pid
        ran.receivedAt = msg.ran.received_at


def _enc_story_reply(b: Any, msg: m.TaskStoryReply) -> None:
    b.taskId = msg.task_id
    b.known = msg.known
    b.note = msg.note
    for item, entry in zip(b.init("entries", len(msg.entries)), msg.entries, strict=True):
        item.wallTime = entry.wall_time
        item.component = entry.component
        item.where = entry.where
        item.what = entry.what
        item.cause = entry.cause


def _enc_graph(b: Any, msg: m.GraphTask) -> None:
    b.graphId = msg.graph_id
    b.clientId = msg.client_id
    for item, node in zip(b.init("nodes", len(msg.nodes)), msg.nodes, strict=True):
        _set_task(item, node)
    b.targets = list(msg.targets)


def _enc_manager_target(b: Any, msg: m.ManagerTarget) -> None:
    for item, entry in zip(b.init("entries", len(msg.entries)), msg.entries, strict=True):
        set_capabilities(item, "capabilities", entry.capabilities)
        item.workers = entry.workers
    b.drain = list(msg.drain)
    if msg.connected:
        b.connected = list(msg.connected)


def _enc_fields(**names: str) -> Callable[[Any, Any], None]:
    """An encoder that copies attributes to schema fields one to one (attribute=schemaField)."""

    def encode(b: Any, msg: Any) -> None:
        for attribute, schema_field in names.items():
            value = getattr(msg, attribute)
            setattr(b, schema_field, value.value if hasattr(value, "value") else value)

    return encode


def _enc_ids(b: Any, msg: Any) -> None:
    b.taskIds = list(msg.task_ids)


def _enc_job(b: Any, msg: m.JobOpen) -> None:
    b.name = msg.name
    b.taskIds = list(msg.task_ids)


def _enc_job_reply(b: Any, msg: m.JobReply) -> None:
    b.name, b.accepted, b.reason, b.state, b.ownerId = msg.name, msg.accepted, msg.reason, msg.state, msg.owner_id
    b.taskIds = list(msg.task_ids)


def _enc_resume(b: Any, msg: m.ClientResume) -> None:
    b.answersEpoch = msg.answers_epoch
    b.answersReceived = msg.answers_received
    b.unfinished = list(msg.unfinished)


def _enc_resumed(b: Any, msg: m.ClientResumed) -> None:
    b.answersEpoch = msg.answers_epoch
    b.unknown = list(msg.unknown)
    if msg.cancelled:
        b.cancelled = list(msg.cancelled)


_ENCODERS: dict[type, tuple[str, Callable[[Any, Any], None]]] = {
    m.Hello: ("hello", _enc_hello),
    m.HelloReply: ("helloReply", _enc_hello_reply),
    m.Heartbeat: ("heartbeat", _enc_heartbeat),
    m.HeartbeatEcho: ("heartbeatEcho", _enc_heartbeat_echo),
    m.Ping: ("ping", _enc_fields(nonce="nonce")),
    m.ProtocolError: ("protocolError", _enc_fields(reason="reason", kind="kind")),
    m.Task: ("task", _set_task),
    m.TaskResult: ("taskResult", _enc_task_result),
    m.TaskCancel: ("taskCancel", _enc_ids),
    m.TaskCancelConfirm: ("taskCancelConfirm", _enc_fields(task_id="taskId", outcome="outcome")),
    m.TaskLog: ("taskLog", _enc_fields(task_id="taskId", stream="stream", text="text")),
    m.GraphTask: ("graphTask", _enc_graph),
    m.ClientDisconnect: ("clientDisconnect", _enc_fields(shutdown_cluster="shutdownCluster")),
    m.ShutdownReply: ("shutdownReply", _enc_fields(accepted="accepted", reason="reason")),
    m.TaskStoryRequest: ("taskStoryRequest", _enc_fields(task_id="taskId")),
    m.TaskStoryReply: ("taskStoryReply", _enc_story_reply),
    m.WorkerCapacity: ("workerCapacity", _enc_fields(capacity="capacity")),
    m.WorkerLeaving: ("workerLeaving", _enc_fields(reason="reason")),
    m.TaskReturn: ("taskReturn", _enc_ids),
    m.UnitsReclaimed: ("unitsReclaimed", _enc_fields(unit_ids="unitIds", notice_seconds="noticeSeconds")),
    m.JobOpen: ("jobOpen", _enc_job),
    m.JobAttach: ("jobAttach", _enc_fields(name="name", follow="follow")),
    m.JobReply: ("jobReply", _enc_job_reply),
    m.ClientResume: ("clientResume", _enc_resume),
    m.ClientResumed: ("clientResumed", _enc_resumed),
    m.Shutdown: ("shutdown", _enc_fields(reason="reason")),
    m.ManagerTarget: ("managerTarget", _enc_manager_target),
    m.ProcessorReady: ("processorReady", _enc_fields(pid="pid")),
    m.ProcessorBlocked: ("processorBlocked", _enc_fields(task_id="taskId")),
    m.ProcessorResumeRequest: ("processorResumeRequest", _enc_fields(task_id="taskId")),
    m.ProcessorResume: ("processorResume", _enc_fields(task_id="taskId")),
    **MONITOR_ENCODERS,
}


_FORWARDABLE = (m.Task, m.TaskResult)


def encode(message: m.Message) -> bytes:
    if isinstance(message, _FORWARDABLE) and message.wire is not None:
        return message.wire  # forwarded unchanged: no need to build it again
    name, encoder = _ENCODERS[type(message)]
    envelope = _schema.Message.new_message()
    encoder(envelope.init(name), message)
    return bytes(envelope.to_bytes())


# ---------------------------------------------------------------- decoders


def _dec_hello(r: Any) -> m.Hello:
    role = r.role
    kind = role.which()
    info: m.RoleInfo
    if kind == "client":
        c = role.client
        info = m.ClientInfo(
            c.name, c.share if c.share else 1.0, c.maxRunningTasks, c.maxWorkers, resume_seconds=c.resumeSeconds
        )
    elif kind == "worker":
        w = role.worker
        held = tuple(TaskID(bytes(task_id)) for task_id in w.heldTasks)
        info = m.WorkerInfo(capabilities_of(w.capabilities), w.capacity, w.managerId, w.workerType, held)
    elif kind == "manager":
        g = role.manager
        boot = g.expectedBootSeconds if g.expectedBootSeconds >= 0 else None
        info = m.ManagerInfo(
            g.managerId, capabilities_of(g.capabilities), limit_of(g.maxWorkers), g.managerType,
            g.workerCostPerHour, boot, g.minWorkers, g.bufferWorkers,
        )  # fmt: skip
    else:
        info = m.ProcessorInfo(processor_id=role.processor.processorId)
    return m.Hello(r.protocolVersion, r.pythonVersion, r.pid, r.hostname, info, bytes(r.knownInstance))


def _dec_hello_reply(r: Any) -> m.HelloReply:
    return m.HelloReply(
        r.accepted,
        r.reason,
        r.protocolVersion,
        r.pythonVersion,
        r.objectStorageAddress,
        r.heartbeatIntervalSeconds,
        r.workerCount,
        bytes(r.instanceId),
        r.resumeSeconds,
    )


def _dec_heartbeat(r: Any) -> m.Heartbeat:
    kind = r.which()
    worker = worker_status_of(r.worker) if kind == "worker" else None
    manager = None
    if kind == "manager":
        manager = m.ManagerStatus(r.manager.units, r.manager.pendingUnits, r.manager.bootSeconds)
    return m.Heartbeat(r.cpuPercent, r.rssBytes, worker, manager, r.roundTripSeconds, r.answersEpoch, r.answersReceived)


_RESULT_STATUSES = {raw: m.ResultStatus(name) for raw, name in enumerate(_schema.ResultStatus.schema.enumerants)}
_NO_PROFILE = m.Profile()


def _dec_task_result(r: Any) -> m.TaskResult:
    kind = r.which()
    if kind == "inline":
        payload_kind, payload = m.PayloadKind.INLINE, r.inline
    elif kind == "objectId":
        payload_kind, payload = m.PayloadKind.OBJECT_ID, r.objectId
    else:
        payload_kind, payload = m.PayloadKind.NONE, b""
    if r._has("profile"):
        p = r.profile
        profile = m.Profile(p.durationSeconds, p.cpuSeconds, p.peakMemoryBytes)
    else:
        profile = _NO_PROFILE
    ran = None
    if r._has("ran"):
        stamps = r.ran
        ran = m.RunStamps(stamps.startedAt, stamps.finishedAt, stamps.processorPid, stamps.receivedAt)
    return m.TaskResult(
        r.taskId, _RESULT_STATUSES[r.status.raw], payload_kind, payload, r.errorMessage, profile, r.workerId, ran,
        r.storedBytes,
    )  # fmt: skip


def _dec_story_reply(r: Any) -> m.TaskStoryReply:
    entries = tuple(m.StoryEntry(e.wallTime, e.component, e.where, e.what, e.cause) for e in r.entries)
    return m.TaskStoryReply(TaskID(r.taskId), r.known, entries, r.note)


_DECODERS: dict[str, Callable[[Any], m.Message]] = {
    "hello": _dec_hello,
    "helloReply": _dec_hello_reply,
    "heartbeat": _dec_heartbeat,
    "heartbeatEcho": lambda r: m.HeartbeatEcho(r.objectStorageAddress, r.workerCount),
    "ping": lambda r: m.Ping(r.nonce),
    "protocolError": lambda r: m.ProtocolError(r.reason, m.ProtocolErrorKind(str(r.kind))),
    "task": _task,
    "taskResult": _dec_task_result,
    "taskCancel": lambda r: m.TaskCancel(tuple(TaskID(t) for t in r.taskIds)),
    "taskCancelConfirm": lambda r: m.TaskCancelConfirm(TaskID(r.taskId), m.CancelOutcome(str(r.outcome))),
    "taskLog": lambda r: m.TaskLog(TaskID(r.taskId), m.LogStream(str(r.stream)), r.text),
    "graphTask": lambda r: m.GraphTask(
        GraphID(r.graphId), ClientID(r.clientId), tuple(_task(n) for n in r.nodes), tuple(r.targets)
    ),
    "clientDisconnect": lambda r: m.ClientDisconnect(r.shutdownCluster),
    "shutdownReply": lambda r: m.ShutdownReply(r.accepted, r.reason),
    "taskStoryRequest": lambda r: m.TaskStoryRequest(TaskID(r.taskId)),
    "taskStoryReply": _dec_story_reply,
    "workerCapacity": lambda r: m.WorkerCapacity(r.capacity),
    "workerLeaving": lambda r: m.WorkerLeaving(r.reason),
    "taskReturn": lambda r: m.TaskReturn(tuple(TaskID(t) for t in r.taskIds)),
    "unitsReclaimed": lambda r: m.UnitsReclaimed(tuple(r.unitIds), r.noticeSeconds),
    "jobOpen": lambda r: m.JobOpen(r.name, tuple(TaskID(t) for t in r.taskIds)),
    "jobAttach": lambda r: m.JobAttach(r.name, r.follow),
    "jobReply": lambda r: m.JobReply(
        r.name, r.accepted, r.reason, tuple(TaskID(t) for t in r.taskIds), r.state, r.ownerId
    ),
    "clientResume": lambda r: m.ClientResume(
        r.answersEpoch, r.answersReceived, tuple(TaskID(bytes(t)) for t in r.unfinished)
    ),
    "clientResumed": lambda r: m.ClientResumed(
        r.answersEpoch, tuple(TaskID(bytes(t)) for t in r.unknown), tuple(TaskID(bytes(t)) for t in r.cancelled)
    ),
    "shutdown": lambda r: m.Shutdown(r.reason),
    "managerTarget": lambda r: m.ManagerTarget(
        tuple(m.TargetEntry(capabilities_of(e.capabilities), e.workers) for e in r.entries),
        tuple(r.drain),
        tuple(r.connected),
    ),
    "processorReady": lambda r: m.ProcessorReady(r.pid),
    "processorBlocked": lambda r: m.ProcessorBlocked(TaskID(r.taskId)),
    "processorResumeRequest": lambda r: m.ProcessorResumeRequest(TaskID(r.taskId)),
    "processorResume": lambda r: m.ProcessorResume(TaskID(r.taskId)),
    **MONITOR_DECODERS,
}


def decode(frame: bytes | memoryview, forwarding: bool = False) -> m.Message:
    """`forwarding`: the caller sends a Task on unchanged (the scheduler): its body is not copied out of the
    frame, which the Task keeps to send (`wire`) anyway; such a Task must not be changed with `replace`."""
    if not isinstance(frame, bytes):
        frame = bytes(frame)  # Cap'n Proto needs word-aligned data; bytes objects are, zmq buffers may not be
    try:
        # read_multiple_bytes reads the same unpacked encoding as from_bytes, without a context manager
        message: m.Message | None = None
        for envelope in _schema.Message.read_multiple_bytes(frame, traversal_limit_in_words=_limit(frame)):
            if message is not None:
                raise DecodeError(f"not a valid protocol message ({len(frame)} bytes): it holds several messages")
            # interned: getattr with a fresh string leaves that string in CPython's type attribute cache, where
            # hundreds of them, allocated among a big queue's tasks, kept its memory from going back after it drained
            kind = sys.intern(envelope.which())
            message = _DECODERS[kind](getattr(envelope, kind))
        if message is None:
            raise DecodeError(f"not a valid protocol message ({len(frame)} bytes): no message in it")
        if isinstance(message, _FORWARDABLE):
            object.__setattr__(message, "wire", frame)
            if forwarding and isinstance(message, m.Task):
                object.__setattr__(message, "body", b"")  # the frame holds it; one copy is enough
        return message
    except DecodeError:
        raise
    except Exception as error:  # capnp raises several unrelated types for malformed input
        raise DecodeError(f"not a valid protocol message ({len(frame)} bytes): {error}") from None


# ---------------------------------------------------------------- task bodies


def encode_body(body: m.TaskBody) -> bytes:
    b = _schema.TaskBody.new_message()
    b.functionId = body.function_id
    if body.serializer_id:
        b.serializerId = body.serializer_id
    if body.args:
        for item, arg in zip(b.init("args", len(body.args)), body.args, strict=True):
            if arg.keyword:
                item.keyword = arg.keyword
            setattr(item, arg.kind.value, arg.data)
    b.profiling = body.profiling
    b.streamOutput = body.stream_output
    if body.clear_epoch:
        b.clearEpoch = body.clear_epoch
    if body.log_forwarding is not None:
        b.forwardLogging = True
        b.forwardLevel = body.log_forwarding.level
        b.forwardLogger = body.log_forwarding.logger_name
    return bytes(b.to_bytes())


def decode_body(data: bytes) -> m.TaskBody:
    if not isinstance(data, bytes):
        data = bytes(data)  # see decode()
    try:
        with _schema.TaskBody.from_bytes(data, traversal_limit_in_words=_limit(data)) as r:
            args = []
            for a in r.args:
                kind = sys.intern(a.which())  # a name given to getattr: see decode()
                args.append(m.Argument(m.ArgumentKind(kind), getattr(a, kind), a.keyword))
            forwarding = m.LogForwarding(r.forwardLevel, r.forwardLogger) if r.forwardLogging else None
            return m.TaskBody(
                ObjectID(r.functionId),
                tuple(args),
                ObjectID(r.serializerId),
                r.profiling,
                r.streamOutput,
                r.clearEpoch,
                forwarding,
            )
    except Exception as error:
        raise DecodeError(f"not a valid task body ({len(data)} bytes): {error}") from None


# ---------------------------------------------------------------- object storage headers


def encode_storage_request(request: sm.StorageRequest) -> bytes:
    b = _storage_schema.StorageRequest.new_message()
    b.requestId = request.request_id
    op = request.operation
    if isinstance(op, sm.StorageHello):
        h = b.init("hello")
        h.protocolVersion = op.protocol_version
        h.pythonVersion = op.python_version
        h.role = op.role
        h.ownerId = op.owner_id
    elif isinstance(op, sm.Put):
        p = b.init("put")
        p.objectId = op.object_id
        p.ownerId = op.owner_id
        p.totalBytes = op.total_bytes
        p.name = op.name
    elif isinstance(op, sm.Get):
        b.get = op.object_id
    elif isinstance(op, sm.Delete):
        b.delete = list(op.object_ids)
    elif isinstance(op, sm.Exists):
        b.exists = op.object_id
    elif isinstance(op, sm.Info):
        b.info = None
    else:
        b.deleteOwner = op.owner_id
    return bytes(b.to_bytes())


def decode_storage_request(frame: bytes | memoryview) -> sm.StorageRequest:
    if not isinstance(frame, bytes):
        frame = bytes(frame)  # see decode()
    try:
        with _storage_schema.StorageRequest.from_bytes(frame, traversal_limit_in_words=_limit(frame)) as r:
            kind = r.which()
            op: sm.StorageOperation
            if kind == "hello":
                op = sm.StorageHello(
                    r.hello.protocolVersion, r.hello.pythonVersion, r.hello.role, bytes(r.hello.ownerId)
                )
            elif kind == "put":
                op = sm.Put(ObjectID(r.put.objectId), r.put.ownerId, r.put.totalBytes, r.put.name)
            elif kind == "get":
                op = sm.Get(ObjectID(r.get))
            elif kind == "delete":
                op = sm.Delete(tuple(ObjectID(i) for i in r.delete))
            elif kind == "exists":
                op = sm.Exists(ObjectID(r.exists))
            elif kind == "info":
                op = sm.Info()
            else:
                op = sm.DeleteOwner(r.deleteOwner)
            return sm.StorageRequest(r.requestId, op)
    except Exception as error:
        raise DecodeError(f"not a valid storage request ({len(frame)} bytes): {error}") from None


def encode_storage_reply(reply: sm.StorageReply) -> bytes:
    b = _storage_schema.StorageReply.new_message()
    b.requestId = reply.request_id
    b.status = reply.status.value
    b.reason = reply.reason
    value = reply.value
    if isinstance(value, sm.ObjectSize):
        b.object = value.total_bytes
    elif isinstance(value, bool):
        b.exists = value
    elif isinstance(value, sm.StorageInfo):
        i = b.init("info")
        i.objectCount = value.object_count
        i.totalBytes = value.total_bytes
        i.ownerCount = value.owner_count
    elif isinstance(value, int):
        b.deleted = value
    else:
        b.none = None
    return bytes(b.to_bytes())


def decode_storage_reply(frame: bytes | memoryview) -> sm.StorageReply:
    if not isinstance(frame, bytes):
        frame = bytes(frame)  # see decode()
    try:
        with _storage_schema.StorageReply.from_bytes(frame, traversal_limit_in_words=_limit(frame)) as r:
            kind = r.which()
            value: sm.ReplyValue = None
            if kind == "object":
                value = sm.ObjectSize(r.object)
            elif kind == "exists":
                value = bool(r.exists)
            elif kind == "info":
                value = sm.StorageInfo(r.info.objectCount, r.info.totalBytes, r.info.ownerCount)
            elif kind == "deleted":
                value = int(r.deleted)
            return sm.StorageReply(r.requestId, sm.StorageStatus(str(r.status)), r.reason, value)
    except Exception as error:
        raise DecodeError(f"not a valid storage reply ({len(frame)} bytes): {error}") from None
