"""The only module that knows the wire format: message values <-> Cap'n Proto bytes.

`encode(message) -> bytes` and `decode(frame) -> message` for the scheduler protocol;
`encode_body`/`decode_body` for the TaskBody nested in a Task; `encode_storage_*`/`decode_storage_*`
for the object storage headers. Any frame that cannot be decoded raises `DecodeError`, whose text
names what was wrong; callers log it and answer with a ProtocolError instead of crashing.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import capnp

from scaler.protocol import messages as m
from scaler.protocol import storage_messages as sm
from scaler.protocol.ids import ClientID, GraphID, ObjectID, TaskID

capnp.remove_import_hook()
_HERE = os.path.dirname(__file__)
_schema = capnp.load(os.path.join(_HERE, "message.capnp"))
_storage_schema = capnp.load(os.path.join(_HERE, "object_storage.capnp"))

#: Frames may carry large graphs and inline payloads; the reader's default limit (64 MiB) is too low.
_TRAVERSAL_LIMIT = 1 << 40


class DecodeError(ValueError):
    """A frame that is not a valid message of this protocol."""


# ---------------------------------------------------------------- shared pieces


def _set_capabilities(builder: Any, name: str, capabilities: m.Capabilities) -> None:
    if not capabilities:
        return
    items = builder.init(name, len(capabilities))
    for item, (cap_name, value) in zip(items, capabilities, strict=True):
        item.name = cap_name
        item.value = value


def _capabilities(reader: Any) -> m.Capabilities:
    return tuple(sorted((c.name, c.value) for c in reader))


def _set_limit(builder: Any, limit: m.WorkerLimit) -> None:
    if limit is None:
        builder.unlimited = None
    else:
        builder.limit = limit


def _limit(reader: Any) -> m.WorkerLimit:
    return None if reader.which() == "unlimited" else int(reader.limit)


def _set_worker_status(builder: Any, status: m.WorkerStatus) -> None:
    builder.queued = status.queued
    builder.running = status.running
    builder.blocked = status.blocked
    builder.freeMemoryBytes = status.free_memory_bytes
    if status.processors:
        items = builder.init("processors", len(status.processors))
        for item, processor in zip(items, status.processors, strict=True):
            item.pid = processor.pid
            item.cpuPercent = processor.cpu_percent
            item.rssBytes = processor.rss_bytes
            item.state = processor.state


def _worker_status(reader: Any) -> m.WorkerStatus:
    return m.WorkerStatus(
        queued=reader.queued,
        running=reader.running,
        blocked=reader.blocked,
        free_memory_bytes=reader.freeMemoryBytes,
        processors=tuple(
            m.ProcessorStatus(pid=p.pid, cpu_percent=p.cpuPercent, rss_bytes=p.rssBytes, state=p.state)
            for p in reader.processors
        ),
    )


def _set_task(builder: Any, task: m.Task) -> None:
    builder.taskId = task.task_id
    builder.clientId = task.client_id
    builder.functionName = task.function_name
    builder.priority = task.priority
    _set_capabilities(builder, "capabilities", task.capabilities)
    builder.body = task.body
    if task.graph_id:
        builder.graphId = task.graph_id
    if task.dependencies:
        builder.dependencies = list(task.dependencies)
    if task.inputs:
        for item, given in zip(builder.init("inputs", len(task.inputs)), task.inputs, strict=True):
            item.taskId = given.task_id
            setattr(item, given.kind.value, given.data)


def _task(reader: Any) -> m.Task:
    # Hot path (every task crosses it several times): readers are Any, so the id NewTypes are not
    # called, and empty lists are detected with one length read.
    capabilities = reader.capabilities
    dependencies = reader.dependencies
    inputs = reader.inputs
    return m.Task(
        reader.taskId,
        reader.clientId,
        reader.body,
        reader.functionName,
        reader.priority,
        _capabilities(capabilities) if len(capabilities) else (),
        reader.graphId,
        tuple(dependencies) if len(dependencies) else (),
        tuple(_task_input(i) for i in inputs) if len(inputs) else (),
    )


def _task_input(reader: Any) -> m.TaskInput:
    kind = reader.which()
    return m.TaskInput(TaskID(reader.taskId), m.PayloadKind(kind), getattr(reader, kind))


# ---------------------------------------------------------------- encoders, one per message type


def _enc_hello(b: Any, msg: m.Hello) -> None:
    b.protocolVersion = msg.protocol_version
    b.pythonVersion = msg.python_version
    b.pid = msg.pid
    b.hostname = msg.hostname
    info = msg.info
    if isinstance(info, m.ClientInfo):
        b.role.init("client").name = info.name
    elif isinstance(info, m.WorkerInfo):
        w = b.role.init("worker")
        _set_capabilities(w, "capabilities", info.capabilities)
        w.capacity = info.capacity
        w.managerId = info.manager_id
        w.workerType = info.worker_type
    elif isinstance(info, m.ManagerInfo):
        g = b.role.init("manager")
        g.managerId = info.manager_id
        _set_capabilities(g, "capabilities", info.capabilities)
        _set_limit(g.maxWorkers, info.max_workers)
        g.managerType = info.manager_type
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


def _enc_heartbeat(b: Any, msg: m.Heartbeat) -> None:
    b.cpuPercent = msg.cpu_percent
    b.rssBytes = msg.rss_bytes
    b.roundTripSeconds = msg.round_trip_seconds
    if msg.worker is not None:
        _set_worker_status(b.init("worker"), msg.worker)
    elif msg.manager is not None:
        g = b.init("manager")
        g.units = msg.manager.units
        g.pendingUnits = msg.manager.pending_units
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


def _enc_graph(b: Any, msg: m.GraphTask) -> None:
    b.graphId = msg.graph_id
    b.clientId = msg.client_id
    for item, node in zip(b.init("nodes", len(msg.nodes)), msg.nodes, strict=True):
        _set_task(item, node)
    b.targets = list(msg.targets)


def _enc_manager_target(b: Any, msg: m.ManagerTarget) -> None:
    for item, entry in zip(b.init("entries", len(msg.entries)), msg.entries, strict=True):
        _set_capabilities(item, "capabilities", entry.capabilities)
        item.workers = entry.workers
    b.drain = list(msg.drain)


def _enc_snapshot(b: Any, msg: m.StatusSnapshot) -> None:
    b.time = msg.time
    s, stats = b.init("scheduler"), msg.scheduler
    s.address = stats.address
    s.cpuPercent = stats.cpu_percent
    s.rssBytes = stats.rss_bytes
    s.queued = stats.queued
    s.running = stats.running
    s.succeeded = stats.succeeded
    s.failed = stats.failed
    s.canceled = stats.canceled
    s.workerDied = stats.worker_died
    s.objectCount = stats.object_count
    s.objectBytes = stats.object_bytes
    s.messagesReceived = stats.messages_received
    s.messagesSent = stats.messages_sent
    s.graphs = stats.graphs
    for item, worker in zip(b.init("workers", len(msg.workers)), msg.workers, strict=True):
        item.workerId = worker.worker_id
        item.managerId = worker.manager_id
        _set_capabilities(item, "capabilities", worker.capabilities)
        item.capacity = worker.capacity
        item.assigned = worker.assigned
        _set_worker_status(item.init("status"), worker.status)
        item.cpuPercent = worker.cpu_percent
        item.rssBytes = worker.rss_bytes
        item.lastSeenSecondsAgo = worker.last_seen_seconds_ago
        item.hostname = worker.hostname
        item.pid = worker.pid
    for item, client in zip(b.init("clients", len(msg.clients)), msg.clients, strict=True):
        item.clientId = client.client_id
        item.tasks = client.tasks
    for item, manager in zip(b.init("managers", len(msg.managers)), msg.managers, strict=True):
        item.managerId = manager.manager_id
        item.managerType = manager.manager_type
        _set_capabilities(item, "capabilities", manager.capabilities)
        _set_limit(item.maxWorkers, manager.max_workers)
        item.connectedWorkers = manager.connected_workers
        item.targetWorkers = manager.target_workers
        item.units = manager.units
        item.pendingUnits = manager.pending_units
    for item, group in zip(b.init("pending", len(msg.pending)), msg.pending, strict=True):
        _set_capabilities(item, "capabilities", group.capabilities)
        item.count = group.count
        item.reason = group.reason


def _enc_fields(**names: str) -> Callable[[Any, Any], None]:
    """An encoder that copies attributes to schema fields one to one (attribute=schemaField)."""

    def encode(b: Any, msg: Any) -> None:
        for attribute, schema_field in names.items():
            value = getattr(msg, attribute)
            setattr(b, schema_field, value.value if hasattr(value, "value") else value)

    return encode


def _enc_ids(b: Any, msg: Any) -> None:
    b.taskIds = list(msg.task_ids)


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
    m.WorkerCapacity: ("workerCapacity", _enc_fields(capacity="capacity")),
    m.WorkerLeaving: ("workerLeaving", _enc_fields(reason="reason")),
    m.TaskReturn: ("taskReturn", _enc_ids),
    m.Shutdown: ("shutdown", _enc_fields(reason="reason")),
    m.ManagerTarget: ("managerTarget", _enc_manager_target),
    m.ProcessorReady: ("processorReady", _enc_fields(pid="pid")),
    m.ProcessorBlocked: ("processorBlocked", _enc_fields(task_id="taskId")),
    m.ProcessorResumeRequest: ("processorResumeRequest", _enc_fields(task_id="taskId")),
    m.ProcessorResume: ("processorResume", _enc_fields(task_id="taskId")),
    m.StatusSnapshot: ("statusSnapshot", _enc_snapshot),
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
        info = m.ClientInfo(name=role.client.name)
    elif kind == "worker":
        w = role.worker
        info = m.WorkerInfo(_capabilities(w.capabilities), w.capacity, w.managerId, w.workerType)
    elif kind == "manager":
        g = role.manager
        info = m.ManagerInfo(g.managerId, _capabilities(g.capabilities), _limit(g.maxWorkers), g.managerType)
    else:
        info = m.ProcessorInfo(processor_id=role.processor.processorId)
    return m.Hello(r.protocolVersion, r.pythonVersion, r.pid, r.hostname, info)


def _dec_hello_reply(r: Any) -> m.HelloReply:
    return m.HelloReply(
        r.accepted,
        r.reason,
        r.protocolVersion,
        r.pythonVersion,
        r.objectStorageAddress,
        r.heartbeatIntervalSeconds,
        r.workerCount,
    )


def _dec_heartbeat(r: Any) -> m.Heartbeat:
    kind = r.which()
    worker = _worker_status(r.worker) if kind == "worker" else None
    manager = m.ManagerStatus(r.manager.units, r.manager.pendingUnits) if kind == "manager" else None
    return m.Heartbeat(r.cpuPercent, r.rssBytes, worker, manager, r.roundTripSeconds)


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
    return m.TaskResult(
        r.taskId, _RESULT_STATUSES[r.status.raw], payload_kind, payload, r.errorMessage, profile, r.workerId
    )


def _dec_snapshot(r: Any) -> m.StatusSnapshot:
    s = r.scheduler
    stats = m.SchedulerStats(
        s.address,
        s.cpuPercent,
        s.rssBytes,
        s.queued,
        s.running,
        s.succeeded,
        s.failed,
        s.canceled,
        s.workerDied,
        s.objectCount,
        s.objectBytes,
        s.messagesReceived,
        s.messagesSent,
        s.graphs,
    )
    workers = tuple(
        m.WorkerSummary(
            w.workerId,
            w.managerId,
            _capabilities(w.capabilities),
            w.capacity,
            w.assigned,
            _worker_status(w.status),
            w.cpuPercent,
            w.rssBytes,
            w.lastSeenSecondsAgo,
            w.hostname,
            w.pid,
        )
        for w in r.workers
    )
    clients = tuple(m.ClientSummary(c.clientId, c.tasks) for c in r.clients)
    managers = tuple(
        m.ManagerSummary(
            g.managerId,
            g.managerType,
            _capabilities(g.capabilities),
            _limit(g.maxWorkers),
            g.connectedWorkers,
            g.targetWorkers,
            g.units,
            g.pendingUnits,
        )
        for g in r.managers
    )
    pending = tuple(m.PendingGroup(_capabilities(p.capabilities), p.count, p.reason) for p in r.pending)
    return m.StatusSnapshot(r.time, stats, workers, clients, managers, pending)


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
    "workerCapacity": lambda r: m.WorkerCapacity(r.capacity),
    "workerLeaving": lambda r: m.WorkerLeaving(r.reason),
    "taskReturn": lambda r: m.TaskReturn(tuple(TaskID(t) for t in r.taskIds)),
    "shutdown": lambda r: m.Shutdown(r.reason),
    "managerTarget": lambda r: m.ManagerTarget(
        tuple(m.TargetEntry(_capabilities(e.capabilities), e.workers) for e in r.entries), tuple(r.drain)
    ),
    "processorReady": lambda r: m.ProcessorReady(r.pid),
    "processorBlocked": lambda r: m.ProcessorBlocked(TaskID(r.taskId)),
    "processorResumeRequest": lambda r: m.ProcessorResumeRequest(TaskID(r.taskId)),
    "processorResume": lambda r: m.ProcessorResume(TaskID(r.taskId)),
    "statusSnapshot": _dec_snapshot,
}


def decode(frame: bytes | memoryview) -> m.Message:
    if not isinstance(frame, bytes):
        frame = bytes(frame)  # Cap'n Proto needs word-aligned data; bytes objects are, zmq buffers may not be
    try:
        # read_multiple_bytes reads the same unpacked encoding as from_bytes, without a context manager
        message: m.Message | None = None
        for envelope in _schema.Message.read_multiple_bytes(frame, traversal_limit_in_words=_TRAVERSAL_LIMIT):
            if message is not None:
                raise DecodeError(f"not a valid protocol message ({len(frame)} bytes): it holds several messages")
            kind = envelope.which()
            message = _DECODERS[kind](getattr(envelope, kind))
        if message is None:
            raise DecodeError(f"not a valid protocol message ({len(frame)} bytes): no message in it")
        if isinstance(message, _FORWARDABLE):
            object.__setattr__(message, "wire", frame)
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
    return bytes(b.to_bytes())


def decode_body(data: bytes) -> m.TaskBody:
    if not isinstance(data, bytes):
        data = bytes(data)  # see decode()
    try:
        with _schema.TaskBody.from_bytes(data, traversal_limit_in_words=_TRAVERSAL_LIMIT) as r:
            args = []
            for a in r.args:
                kind = a.which()
                args.append(m.Argument(m.ArgumentKind(kind), getattr(a, kind), a.keyword))
            return m.TaskBody(
                ObjectID(r.functionId), tuple(args), ObjectID(r.serializerId), r.profiling, r.streamOutput
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
        with _storage_schema.StorageRequest.from_bytes(frame, traversal_limit_in_words=_TRAVERSAL_LIMIT) as r:
            kind = r.which()
            op: sm.StorageOperation
            if kind == "hello":
                op = sm.StorageHello(r.hello.protocolVersion, r.hello.pythonVersion, r.hello.role)
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
        with _storage_schema.StorageReply.from_bytes(frame, traversal_limit_in_words=_TRAVERSAL_LIMIT) as r:
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
