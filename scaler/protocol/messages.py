"""Every wire message as a frozen value. Python code only ever sees these; `codec` maps them to bytes.

Field names are snake_case versions of the schema's (`scaler/protocol/message.capnp`). Optional
structs of the schema become `None`; unions become small enums or `X | None` pairs.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from scaler.protocol.ids import ClientID, GraphID, ObjectID, TaskID

PROTOCOL_VERSION = 1

#: A capability set, normalised: sorted by name. Value -1 means "present, no quantity".
Capabilities = tuple[tuple[str, int], ...]


def make_capabilities(values: dict[str, int] | None) -> Capabilities:
    if not values:
        return ()
    return tuple(sorted((str(name), int(value)) for name, value in values.items()))


#: Worker limit of a manager: None means unlimited.
WorkerLimit = int | None


# ---------------------------------------------------------------- connection set-up


class Role(enum.Enum):
    CLIENT = "client"
    WORKER = "worker"
    MANAGER = "manager"
    PROCESSOR = "processor"


@dataclass(frozen=True, slots=True)
class ClientInfo:
    name: str = ""
    share: float = 1.0  #: its share of the workers against other clients' (docs/guide/sharing.md)
    max_running_tasks: int = 0  #: the most of its tasks at workers at once (0: no quota)
    max_workers: int = 0  #: the most workers' worth of spend it holds (0: no quota; scheduler/core/quotas.py)
    #: how long its unfinished work may wait for it while it is away (negative: as long as the scheduler keeps it)
    resume_seconds: float = -1.0
    #: not on the wire: the client's CURVE key, set by the scheduler's shell (peer_keys.py); it owns the client's jobs
    owner_key: str = field(default="", compare=False)
    #: not on the wire: its key's part of the cost policy's budget per hour (sharing.toml; 0: a part by its share)
    max_cost_per_hour: float = field(default=0.0, compare=False)
    #: not on the wire: its key's storage quota for the results of its jobs (sharing.toml; 0: the scheduler's)
    max_job_result_bytes: int = field(default=0, compare=False)


@dataclass(frozen=True, slots=True)
class WorkerInfo:
    capabilities: Capabilities = ()
    capacity: int = 1
    manager_id: str = ""
    worker_type: str = ""
    held_tasks: tuple[TaskID, ...] = ()  #: what it still holds from a scheduler instance that is gone


@dataclass(frozen=True, slots=True)
class ManagerInfo:
    manager_id: str
    capabilities: Capabilities = ()
    max_workers: WorkerLimit = None
    manager_type: str = ""
    worker_cost_per_hour: float = 0.0  #: what one worker costs per hour (0: free or unknown)
    expected_boot_seconds: float | None = None  #: launch to connected worker, as declared; None: measure it
    min_workers: int = 0  #: workers kept even when idle (warm capacity)
    buffer_workers: int = 0  #: idle workers kept beyond what the queue needs (warm capacity)


@dataclass(frozen=True, slots=True)
class ProcessorInfo:
    processor_id: bytes


RoleInfo = ClientInfo | WorkerInfo | ManagerInfo | ProcessorInfo


@dataclass(frozen=True, slots=True)
class Hello:
    protocol_version: int
    python_version: str
    pid: int
    hostname: str
    info: RoleInfo
    known_instance: bytes = b""  #: the scheduler instance this peer was registered with before (empty: none)

    @property
    def role(self) -> Role:
        return ROLE_OF_INFO[type(self.info)]


ROLE_OF_INFO: dict[type, Role] = {
    ClientInfo: Role.CLIENT,
    WorkerInfo: Role.WORKER,
    ManagerInfo: Role.MANAGER,
    ProcessorInfo: Role.PROCESSOR,
}


@dataclass(frozen=True, slots=True)
class HelloReply:
    accepted: bool
    reason: str = ""
    protocol_version: int = PROTOCOL_VERSION
    python_version: str = ""
    object_storage_address: str = ""
    heartbeat_interval_seconds: float = 2.0
    worker_count: int = 0
    instance_id: bytes = b""  #: the scheduler process that answered; it changes when the scheduler restarts
    resume_seconds: float = 0.0  #: to a client: how long its work waits for it when it is away (0: not at all)


@dataclass(frozen=True, slots=True)
class ProcessorStatus:
    pid: int
    cpu_percent: float = 0.0
    rss_bytes: int = 0
    state: str = ""
    memory_bytes: int = 0  #: PSS: what the kernel charges it, shared pages divided among their sharers


@dataclass(frozen=True, slots=True)
class WorkerStatus:
    queued: int = 0
    running: int = 0
    blocked: int = 0
    free_memory_bytes: int = 0
    processors: tuple[ProcessorStatus, ...] = ()
    memory_bytes: int = 0  #: the agent's and its processors' PSS summed
    memory_limit_bytes: int = 0  #: the limit the worker runs under: its cgroup's, else the machine's memory
    memory_limit_source: str = ""  #: "cgroup v1", "cgroup v2" or "machine"


@dataclass(frozen=True, slots=True)
class ManagerStatus:
    units: int = 0
    pending_units: int = 0
    boot_seconds: float = 0.0  #: measured mean launch-to-registration time of its units; 0: none measured yet


@dataclass(frozen=True, slots=True)
class Heartbeat:
    cpu_percent: float = 0.0
    rss_bytes: int = 0
    worker: WorkerStatus | None = None  #: set by workers
    manager: ManagerStatus | None = None  #: set by managers
    round_trip_seconds: float = 0.0  #: the sender's last heartbeat -> echo round trip (0: not measured yet)
    answers_epoch: int = 0  #: a client's: the epoch its answer count is of (docs/protocol.md 5.15)
    answers_received: int = 0  #: a client's: TaskResults and TaskCancelConfirms received in that epoch


@dataclass(frozen=True, slots=True)
class HeartbeatEcho:
    object_storage_address: str = ""
    worker_count: int = 0


@dataclass(frozen=True, slots=True)
class Ping:
    nonce: int = 0


class ProtocolErrorKind(enum.Enum):
    MALFORMED = "malformed"
    UNEXPECTED = "unexpected"
    UNKNOWN_PEER = "unknownPeer"


@dataclass(frozen=True, slots=True)
class ProtocolError:
    reason: str
    kind: ProtocolErrorKind = ProtocolErrorKind.UNEXPECTED


# ---------------------------------------------------------------- tasks


class ArgumentKind(enum.Enum):
    INLINE = "inline"
    OBJECT_ID = "objectId"
    TASK_RESULT = "taskResult"


@dataclass(frozen=True, slots=True)
class Argument:
    kind: ArgumentKind
    data: bytes  #: serialized value, object id or task id, according to `kind`
    keyword: str = ""  #: empty for a positional argument


@dataclass(frozen=True, slots=True)
class LogForwarding:
    """Which logging records of a task go to its client: at `level` or above, of `logger_name` and its children
    ("" for every logger)."""

    level: int = 0
    logger_name: str = ""


@dataclass(frozen=True, slots=True)
class TaskBody:
    function_id: ObjectID
    args: tuple[Argument, ...] = ()
    serializer_id: ObjectID = ObjectID(b"")  # noqa: RUF009 - a NewType of immutable bytes
    profiling: bool = False
    stream_output: bool = False
    #: the client's clear() count at encoding; objects a processor fetched for this client in this epoch still exist
    clear_epoch: int = 0
    log_forwarding: LogForwarding | None = None


class PayloadKind(enum.Enum):
    NONE = "none"
    INLINE = "inline"
    OBJECT_ID = "objectId"


@dataclass(frozen=True, slots=True)
class TaskInput:
    """The result of a graph node, handed to the nodes that depend on it."""

    task_id: TaskID
    kind: PayloadKind  #: INLINE or OBJECT_ID
    data: bytes


#: A task's priority is the user's priority shifted left by this many bits, plus its nesting depth (client/sharing.py):
#: `priority >> PRIORITY_DEPTH_BITS` is the user's priority.
PRIORITY_DEPTH_BITS = 10


@dataclass(frozen=True, slots=True)
class Task:
    task_id: TaskID
    client_id: ClientID
    body: bytes  #: an encoded TaskBody; only processors read it
    function_name: str = ""
    priority: int = 0
    capabilities: Capabilities = ()
    graph_id: GraphID = GraphID(b"")  # noqa: RUF009 - a NewType of immutable bytes
    dependencies: tuple[TaskID, ...] = ()  #: graph nodes: nodes whose results this one needs
    inputs: tuple[TaskInput, ...] = ()  #: scheduler -> worker: those results
    #: the frame this value was decoded from; the codec reuses it when the value is forwarded unchanged.
    #: Not part of the value: not compared, and dropped by dataclasses.replace.
    wire: bytes | None = field(default=None, init=False, repr=False, compare=False)


class ResultStatus(enum.Enum):
    SUCCESS = "success"
    FAILED = "failed"
    WORKER_DIED = "workerDied"
    PROCESSOR_DIED = "processorDied"
    TIMED_OUT = "timedOut"
    CANCELED = "canceled"
    NOT_SERIALIZABLE = "notSerializable"
    MISSING_OBJECT = "missingObject"
    ERROR = "error"
    NO_WORKER = "noWorker"
    #: worker -> scheduler only: the machine that ran it was lost; run it again (counted against the retry budget)
    HOST_LOST = "hostLost"
    #: the task's processor was killed by the kernel's OOM killer or died at the worker's memory limit
    OUT_OF_MEMORY = "outOfMemory"


@dataclass(frozen=True, slots=True)
class Profile:
    duration_seconds: float = 0.0
    cpu_seconds: float = 0.0
    peak_memory_bytes: int = 0


@dataclass(frozen=True, slots=True)
class RunStamps:
    """A processor's own wall-clock times for one task."""

    started_at: float
    finished_at: float
    processor_pid: int = 0
    received_at: float = 0.0  #: when the processor read the task from its agent (0: unknown)


@dataclass(frozen=True, slots=True)
class TaskResult:
    task_id: TaskID
    status: ResultStatus
    payload_kind: PayloadKind = PayloadKind.NONE
    payload: bytes = b""  #: serialized value / pickled exception, or an object id
    error_message: str = ""
    profile: Profile = field(default_factory=Profile)
    worker_id: bytes = b""
    #: when its processor ran it (for the task's story); None when it did not run
    ran: RunStamps | None = None
    stored_bytes: int = 0  #: an OBJECT_ID result: its size in storage (a job's storage quota counts it)
    #: see Task.wire
    wire: bytes | None = field(default=None, init=False, repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class TaskCancel:
    task_ids: tuple[TaskID, ...]


class CancelOutcome(enum.Enum):
    CANCELED = "canceled"
    NOT_FOUND = "notFound"


@dataclass(frozen=True, slots=True)
class TaskCancelConfirm:
    task_id: TaskID
    outcome: CancelOutcome


class LogStream(enum.Enum):
    STDOUT = "stdout"
    STDERR = "stderr"
    RECORDS = "records"  #: logging records, one JSON object per line


@dataclass(frozen=True, slots=True)
class TaskLog:
    task_id: TaskID
    stream: LogStream
    text: str


@dataclass(frozen=True, slots=True)
class GraphTask:
    graph_id: GraphID
    client_id: ClientID
    nodes: tuple[Task, ...]
    targets: tuple[TaskID, ...]


# ---------------------------------------------------------------- clients


@dataclass(frozen=True, slots=True)
class ClientDisconnect:
    shutdown_cluster: bool = False


@dataclass(frozen=True, slots=True)
class ShutdownReply:
    accepted: bool
    reason: str = ""


@dataclass(frozen=True, slots=True)
class TaskStoryRequest:
    task_id: TaskID


@dataclass(frozen=True, slots=True)
class StoryEntry:
    """One step of a task's history: when, where (component and which one), what, and what caused it."""

    wall_time: float
    component: str  #: scheduler, worker agent, processor, client
    where: str = ""
    what: str = ""
    cause: str = ""


@dataclass(frozen=True, slots=True)
class TaskStoryReply:
    task_id: TaskID
    known: bool  #: False: the scheduler never saw this task or forgot it (`note` says so)
    entries: tuple[StoryEntry, ...] = ()
    note: str = ""


@dataclass(frozen=True, slots=True)
class JobOpen:
    """A named job (docs/guide/sharing.md, "Jobs"): its tasks, sent before them, outlive the client."""

    name: str
    task_ids: tuple[TaskID, ...]


@dataclass(frozen=True, slots=True)
class JobAttach:
    name: str
    follow: bool = False  #: False: only look the job up; True: its kept answers and those to come are sent here


@dataclass(frozen=True, slots=True)
class JobReply:
    """The answer to JobOpen or JobAttach; after an accepted attach the job's kept results follow."""

    name: str
    accepted: bool
    reason: str = ""
    task_ids: tuple[TaskID, ...] = ()
    state: str = ""
    owner_id: bytes = b""  #: the submitter's client id, under which its results are stored


# ---------------------------------------------------------------- a client coming back (docs/protocol.md 5.15)


@dataclass(frozen=True, slots=True)
class ClientResume:
    """A client whose connection closed asks for the answers that may have been lost with it."""

    answers_epoch: int  #: the epoch its count is of
    answers_received: int  #: answers received in that epoch; the scheduler sends the ones after them again
    unfinished: tuple[TaskID, ...] = ()  #: its tasks (graph targets included) without an answer


@dataclass(frozen=True, slots=True)
class ClientResumed:
    """The answer to ClientResume; a new answer epoch starts with it, and the answers sent again follow it."""

    answers_epoch: int
    unknown: tuple[TaskID, ...] = ()  #: of the unfinished ids, those the scheduler never received
    #: of the unfinished ids, those it cancelled when it dropped this client (away past its window, or silent without
    #: one): their work is gone
    cancelled: tuple[TaskID, ...] = ()


# ---------------------------------------------------------------- workers


@dataclass(frozen=True, slots=True)
class WorkerCapacity:
    capacity: int


@dataclass(frozen=True, slots=True)
class WorkerLeaving:
    reason: str = ""


@dataclass(frozen=True, slots=True)
class TaskReturn:
    task_ids: tuple[TaskID, ...]


@dataclass(frozen=True, slots=True)
class Shutdown:
    reason: str = ""


# ---------------------------------------------------------------- worker managers


@dataclass(frozen=True, slots=True)
class UnitsReclaimed:
    """Manager -> scheduler: the provider takes these units back in `notice_seconds` (a spot interruption)."""

    unit_ids: tuple[str, ...]
    notice_seconds: float


@dataclass(frozen=True, slots=True)
class TargetEntry:
    capabilities: Capabilities
    workers: int


@dataclass(frozen=True, slots=True)
class ManagerTarget:
    entries: tuple[TargetEntry, ...]
    drain: tuple[str, ...] = ()  #: ids of the manager's idle workers, best to stop first
    connected: tuple[str, ...] = ()  #: ids of every connected worker of the manager (their units registered)


# ---------------------------------------------------------------- processor <-> agent


@dataclass(frozen=True, slots=True)
class ProcessorReady:
    pid: int


@dataclass(frozen=True, slots=True)
class ProcessorBlocked:
    task_id: TaskID


@dataclass(frozen=True, slots=True)
class ProcessorResumeRequest:
    task_id: TaskID


@dataclass(frozen=True, slots=True)
class ProcessorResume:
    task_id: TaskID


# ---------------------------------------------------------------- monitoring

#: Version of the monitor feed's content; a reader of another version refuses the feed with a clear message.
FEED_VERSION = 1


@dataclass(frozen=True, slots=True)
class TaskCounts:
    waiting: int = 0
    queued: int = 0
    running: int = 0
    succeeded: int = 0
    failed: int = 0
    canceled: int = 0

    @property
    def live(self) -> int:
        return self.waiting + self.queued + self.running


@dataclass(frozen=True, slots=True)
class JobSummary:
    name: str
    state: str  #: running, done, cancelled
    done: int  #: tasks answered
    total: int
    submitter_connected: bool = False
    failed: int = 0  #: of `done`, the answers that are not a success (failed, lost or cancelled tasks)
    submitter: str = ""  #: the submitting client's name, or its id's tail when it gave none
    owner_key: str = ""  #: the start of the CURVE key that owns the job ("" without CURVE: anyone may attach)
    age_seconds: float = 0.0  #: since the job was opened


@dataclass(frozen=True, slots=True)
class FunctionSummary:
    name: str
    counts: TaskCounts = TaskCounts()


@dataclass(frozen=True, slots=True)
class MessageCount:
    name: str
    sent: int = 0
    received: int = 0


@dataclass(frozen=True, slots=True)
class SchedulerStats:
    address: str = ""
    cpu_percent: float = 0.0
    rss_bytes: int = 0
    queued: int = 0
    running: int = 0
    succeeded: int = 0
    failed: int = 0
    canceled: int = 0
    worker_died: int = 0
    object_count: int = 0
    object_bytes: int = 0
    messages_received: int = 0
    messages_sent: int = 0
    graphs: int = 0
    not_found: int = 0  #: cancels of tasks the scheduler did not know (already ended, or never seen)


@dataclass(frozen=True, slots=True)
class WorkerSummary:
    worker_id: bytes
    manager_id: str = ""
    capabilities: Capabilities = ()
    capacity: int = 0
    assigned: int = 0
    status: WorkerStatus = field(default_factory=WorkerStatus)
    cpu_percent: float = 0.0
    rss_bytes: int = 0
    last_seen_seconds_ago: float = 0.0
    hostname: str = ""
    pid: int = 0
    lag_seconds: float = 0.0  #: its heartbeat round trip
    worker_type: str = ""
    connected_seconds_ago: float = 0.0


@dataclass(frozen=True, slots=True)
class ClientSummary:
    client_id: bytes
    tasks: int = 0  #: live tasks
    name: str = ""
    hostname: str = ""
    counts: TaskCounts = TaskCounts()
    away_seconds: float = 0.0  #: how long it has been away (silent, or its connection lost); 0: present
    resume_seconds: float = 0.0  #: how long its work waits for it when it is away; 0: not at all


@dataclass(frozen=True, slots=True)
class ManagerSummary:
    manager_id: str
    manager_type: str = ""
    capabilities: Capabilities = ()
    max_workers: WorkerLimit = None
    connected_workers: int = 0
    target_workers: int = 0
    units: int = 0
    pending_units: int = 0
    last_target: ManagerTarget | None = None
    seconds_since_heartbeat: float = 0.0
    worker_cost_per_hour: float = 0.0  #: declared by the manager (0: free or unknown)
    boot_seconds: float = 0.0  #: launch to connected worker: declared, else measured; 0: unknown
    min_workers: int = 0  #: warm capacity: kept even when idle
    buffer_workers: int = 0  #: warm capacity: idle headroom beyond what the queue needs

    @property
    def spend_per_hour(self) -> float:
        """What its units cost now (booting ones are paid for too), per hour."""
        return self.units * self.worker_cost_per_hour

    @property
    def warm_spend_per_hour(self) -> float:
        """What its warm capacity (min_workers, or buffer_workers when more) costs per hour when idle."""
        return max(self.min_workers, self.buffer_workers) * self.worker_cost_per_hour


@dataclass(frozen=True, slots=True)
class FunctionLoad:
    """One function's live tasks within a capability set (in-process read model; not on the monitor feed)."""

    function_name: str
    queued: int = 0
    #: how long each of its running tasks has held its worker, in seconds
    running_seconds: tuple[float, ...] = ()


@dataclass(frozen=True, slots=True)
class RunTimeEstimate:
    """What the scheduler has learned of a function's run time in one capability set (the dispatcher's queue
    key), from its successful tasks (in-process read model; not on the monitor feed)."""

    function_name: str
    capabilities: Capabilities
    mean_seconds: float  #: exponentially weighted mean of its run times


@dataclass(frozen=True, slots=True)
class PendingGroup:
    """Tasks of one capability set (the dispatcher's queue key): queued ones and why they wait, running ones."""

    capabilities: Capabilities
    count: int  #: queued
    reason: str = ""
    running: int = 0
    oldest_queued_seconds: float = 0.0
    #: the same tasks by function (in-process read model; not on the monitor feed)
    functions: tuple[FunctionLoad, ...] = ()
    #: of `count`, those waiting because their client is at its quota (in-process; the reason says it on the feed)
    over_quota: int = 0


@dataclass(frozen=True, slots=True)
class ClientLoad:
    """A client's work as the scaling policies weigh it (in-process read model; not on the monitor feed)."""

    client_id: bytes
    share: float  #: its weight against other clients'
    running: int  #: its tasks at workers
    #: its queued tasks that could start now (its quotas' held back left out), per capability set
    queued: tuple[tuple[Capabilities, int], ...] = ()
    max_cost_per_hour: float = 0.0  #: its key's part of the cost policy's budget (0: a part by its share)


@dataclass(frozen=True, slots=True)
class StatusSnapshot:
    """The scheduler's state at one instant: its read model (scaling, status, monitor feed and metrics read it)."""

    time: float  #: the scheduler's monotonic clock
    scheduler: SchedulerStats
    workers: tuple[WorkerSummary, ...] = ()
    clients: tuple[ClientSummary, ...] = ()
    managers: tuple[ManagerSummary, ...] = ()
    pending: tuple[PendingGroup, ...] = ()
    wall_time: float = 0.0
    feed_version: int = FEED_VERSION
    functions: tuple[FunctionSummary, ...] = ()
    message_counts: tuple[MessageCount, ...] = ()
    #: learned run times, by function and capability set (in-process read model; not on the monitor feed)
    run_times: tuple[RunTimeEstimate, ...] = ()
    jobs: tuple[JobSummary, ...] = ()  #: the named jobs kept (core/jobs.py)
    #: each client's work, for the budget split per client (in-process read model; not on the monitor feed)
    client_loads: tuple[ClientLoad, ...] = ()


@dataclass(frozen=True, slots=True)
class TaskTransition:
    task_id: TaskID
    state: str  #: waiting, queued, running, canceling, success, failed, canceled, workerDied ...
    worker_id: bytes = b""  #: dispatched: the worker; an end after a run: the worker that ran it
    function_name: str = ""
    wall_time: float = 0.0
    #: an end after a run (a result came back): how long it held its worker (0: it did not run)
    run_seconds: float = 0.0
    #: an end after a profiled run: the peak memory growth the worker measured (0: not measured)
    peak_memory_bytes: int = 0
    client_id: bytes = b""  #: the client that submitted the task (the dashboard's task log reads it)


@dataclass(frozen=True, slots=True)
class TaskTransitions:
    transitions: tuple[TaskTransition, ...]
    dropped: int = 0
    wall_time: float = 0.0
    feed_version: int = FEED_VERSION


@dataclass(frozen=True, slots=True)
class ScalingDecision:
    manager_id: str
    from_workers: int
    to_workers: int
    reason: str = ""
    wall_time: float = 0.0


@dataclass(frozen=True, slots=True)
class ScalingDecisions:
    decisions: tuple[ScalingDecision, ...]
    wall_time: float = 0.0
    feed_version: int = FEED_VERSION


Message = (
    Hello
    | HelloReply
    | Heartbeat
    | HeartbeatEcho
    | Ping
    | ProtocolError
    | Task
    | TaskResult
    | TaskCancel
    | TaskCancelConfirm
    | TaskLog
    | GraphTask
    | ClientDisconnect
    | ShutdownReply
    | WorkerCapacity
    | WorkerLeaving
    | TaskReturn
    | Shutdown
    | ManagerTarget
    | ProcessorReady
    | ProcessorBlocked
    | ProcessorResumeRequest
    | ProcessorResume
    | StatusSnapshot
    | TaskTransitions
    | ScalingDecisions
    | UnitsReclaimed
    | TaskStoryRequest
    | TaskStoryReply
    | JobOpen
    | JobAttach
    | JobReply
    | ClientResume
    | ClientResumed
)

#: Every message type, in schema order; the codec and the routing tables are checked against it.
MESSAGE_TYPES: tuple[type, ...] = (
    Hello,
    HelloReply,
    Heartbeat,
    HeartbeatEcho,
    Ping,
    ProtocolError,
    Task,
    TaskResult,
    TaskCancel,
    TaskCancelConfirm,
    TaskLog,
    GraphTask,
    ClientDisconnect,
    ShutdownReply,
    WorkerCapacity,
    WorkerLeaving,
    TaskReturn,
    Shutdown,
    ManagerTarget,
    ProcessorReady,
    ProcessorBlocked,
    ProcessorResumeRequest,
    ProcessorResume,
    StatusSnapshot,
    TaskTransitions,
    ScalingDecisions,
    UnitsReclaimed,
    TaskStoryRequest,
    TaskStoryReply,
    JobOpen,
    JobAttach,
    JobReply,
    ClientResume,
    ClientResumed,
)
