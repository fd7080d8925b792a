"""Where the Python values differ from the schema: the only hand-written part of a message's declaration.

`python -m scaler.protocol.generate` reads the schemas and this table and writes messages.py,
storage_messages.py and codec_structs.py. What needs no entry here (docs/protocol.md, "Adding a message or a
field"): a struct is a frozen dataclass of the same name, a field `fooBar` an attribute `foo_bar`, in the order
the schema declares them, with the zero of its type as default; Text is str, Data bytes, List(T) tuple[T, ...],
an enum an enum.Enum of the same name (`unknownPeer` is UNKNOWN_PEER = "unknownPeer"); the codec writes every
field in ordinal order and reads it back.
"""

from __future__ import annotations

from scaler.protocol.generate.options import Converter, Extra, Field, Kind, Member, Members, OneOf, Struct

#: The struct that is the envelope of every frame: its union lists the messages.
ENVELOPE = "Message"

#: Schema types held as another Python type, wherever they appear.
CONVERTERS = {
    "List(Capability)": Converter("Capabilities", "()", "set_capabilities", "capabilities_of"),
    "WorkerLimit": Converter("WorkerLimit", "None", "set_limit", "limit_of"),
}

#: Data fields (and lists of Data) named so hold ids: their NewType (scaler/protocol/ids.py).
ID_TYPES = {
    "taskId": "TaskID",
    "taskIds": "TaskID",
    "dependencies": "TaskID",
    "targets": "TaskID",
    "heldTasks": "TaskID",
    "resultsRead": "TaskID",
    "graphId": "GraphID",
    "functionId": "ObjectID",
    "serializerId": "ObjectID",
    "objectId": "ObjectID",
    "actorId": "TaskID",
    "unfinished": "TaskID",
    "unknown": "TaskID",
    "cancelled": "TaskID",
    "largeInputs": "ObjectID",
    "resultId": "ObjectID",
}

_NOT_ON_THE_FEED = "in-process read model; not on the monitor feed"
_WIRE = "wire: bytes | None = field(default=None, init=False, repr=False, compare=False)"

STRUCTS = {
    # ------------------------------------------------------------ connection set-up
    "Hello": Struct(
        required="protocolVersion pythonVersion pid hostname role",
        fields={"role": OneOf("info", "RoleInfo", enum="Role")},
        write_last="role",
    ),
    "ClientInfo": Struct(
        fields={"share": Field(default="1.0", decode="share_or_default")},
        extra=(
            Extra(
                'owner_key: str = field(default="", compare=False)',
                "the client's CURVE key, set by the scheduler's shell (peer_keys.py); it owns the client's jobs",
            ),
            Extra(
                "max_cost_per_hour: float = field(default=0.0, compare=False)",
                "its key's part of the cost policy's budget per hour (sharing.toml; 0: a part by its share)",
            ),
            Extra(
                "max_job_result_bytes: int = field(default=0, compare=False)",
                "its key's storage quota for the results of its jobs (sharing.toml; 0: the scheduler's)",
            ),
        ),
    ),
    "WorkerInfo": Struct(
        fields={"capacity": Field(default="1"), "heldTasks": Field(omit_empty=True)},
        extra=(
            Extra(
                'owner_key: str = field(default="", compare=False)',
                "the worker's CURVE key, set by the scheduler's shell (peer_keys.py): clients inside its tasks use it",
            ),
        ),
    ),
    "ManagerInfo": Struct(
        required="managerId",
        fields={
            "expectedBootSeconds": Field(
                type="float | None", default="None", encode="negative_if_none", decode="none_if_negative"
            )
        },
    ),
    "ProcessorInfo": Struct(required="processorId workerId", fields={"heldTasks": Field(omit_empty=True)}),
    "HelloReply": Struct(
        required="accepted",
        fields={"protocolVersion": Field(default="PROTOCOL_VERSION"), "heartbeatIntervalSeconds": Field(default="2.0")},
    ),
    "Heartbeat": Struct(
        fields={
            "union": Members(),
            "answersEpoch": Field(omit_empty=True),  # a client's; absent from workers' and managers' heartbeats
            "answersReceived": Field(omit_empty=True),
        }
    ),
    "HeartbeatEcho": Struct(fields={"resultsRead": Field(omit_empty=True)}),
    "WorkerStatus": Struct(fields={"processors": Field(omit_empty=True)}, write_last="processors"),
    "ProcessorStatus": Struct(required="pid"),
    "ProtocolError": Struct(required="reason", fields={"kind": Field(default="ProtocolErrorKind.UNEXPECTED")}),
    # ------------------------------------------------------------ tasks
    "Argument": Struct(
        required="union",
        fields={
            "union": Kind("ArgumentKind"),
            "keyword": Field(omit_empty=True),
            "copyOnWrite": Field(omit_empty=True),
        },
    ),
    "TaskBody": Struct(
        required="functionId",
        fields={
            "serializerId": Field(omit_empty=True),
            "args": Field(omit_empty=True),
            "clearEpoch": Field(omit_empty=True),
            "logForwarding": Field(present_if="forwardLogging"),
        },
    ),
    "Task": Struct(
        required="taskId clientId body",
        fields={
            "clientId": Field(type="ClientID", decode="shared"),  # one bytes object per client among a queue's tasks
            "functionName": Field(decode="sys.intern"),
            "graphId": Field(omit_empty=True),
            "dependencies": Field(omit_empty=True),
            "inputs": Field(omit_empty=True),
            "streamCredit": Field(omit_empty=True),
            "actorId": Field(omit_empty=True),
            "actor": Field(optional=True),
            "largeInputs": Field(omit_empty=True),
            "resultId": Field(omit_empty=True),
        },
        extra=(
            Extra(
                _WIRE,
                "the frame this value was decoded from; the codec reuses it when the value is forwarded "
                "unchanged. Not part of the value: not compared, and dropped by dataclasses.replace",
            ),
        ),
    ),
    "TaskInput": Struct(required="taskId union", fields={"union": Kind("PayloadKind")}),
    "TaskResult": Struct(
        required="taskId status",
        fields={
            "union": Kind("PayloadKind", kind="payload_kind", data="payload"),
            "profile": Field(omit_empty=True),
            "workerId": Field(omit_empty=True),
            "ran": Field(optional=True),
            "storedBytes": Field(omit_empty=True),
            "streamed": Field(omit_empty=True),
        },
        extra=(Extra(_WIRE, "see Task.wire"),),
    ),
    "RunStamps": Struct(required="startedAt finishedAt"),
    "TaskCancel": Struct(required="taskIds"),
    "TaskCancelConfirm": Struct(required="taskId outcome"),
    "TaskLog": Struct(required="taskId stream text"),
    "GraphTask": Struct(required="graphId clientId nodes targets", fields={"clientId": Field(type="ClientID")}),
    # ------------------------------------------------------------ clients
    "ShutdownReply": Struct(required="accepted"),
    "TaskStoryRequest": Struct(required="taskId"),
    "StoryEntry": Struct(required="wallTime component"),
    "TaskStoryReply": Struct(required="taskId known", write_last="entries"),
    "ClientResume": Struct(required="answersEpoch answersReceived"),
    "ClientResumed": Struct(required="answersEpoch", fields={"cancelled": Field(omit_empty=True)}),
    # ------------------------------------------------------------ workers and managers
    "WorkerCapacity": Struct(required="capacity"),
    "TaskReturn": Struct(required="taskIds"),
    "TargetEntry": Struct(required="capabilities workers"),
    "ManagerTarget": Struct(required="entries", fields={"connected": Field(omit_empty=True)}),
    "UnitsReclaimed": Struct(required="unitIds noticeSeconds"),
    "ProcessorReady": Struct(required="pid"),
    "ProcessorBlocked": Struct(required="taskId"),
    "ProcessorResumeRequest": Struct(required="taskId"),
    "ProcessorResume": Struct(required="taskId"),
    "ResultSent": Struct(required="taskId result"),
    "ProcessorWriting": Struct(required="writing"),
    "ProcessorKill": Struct(required="processorId"),
    "ProcessorsWanted": Struct(required="beyondSlots"),
    # ------------------------------------------------------------ jobs
    "JobOpen": Struct(required="name taskIds"),
    "JobAttach": Struct(required="name"),
    "JobReply": Struct(required="name accepted", write_last="taskIds"),
    # ------------------------------------------------------------ streaming tasks and actors
    "ActorSpec": Struct(fields={"maxConcurrency": Field(default="1"), "fromTask": Field(omit_empty=True)}),
    "StreamItem": Struct(
        required="taskId index union", fields={"union": Kind("PayloadKind", kind="payload_kind", data="payload")}
    ),
    "StreamCredit": Struct(required="taskId upTo"),
    "ActorReady": Struct(required="actorId"),
    "ActorStop": Struct(required="actorId"),
    "ActorLookup": Struct(required="name", fields={"fromTask": Field(omit_empty=True)}),
    "ActorReply": Struct(required="name found"),
    "ActorSummary": Struct(required="actorId className"),
    # ------------------------------------------------------------ monitoring
    "StatusSnapshot": Struct(
        required="time scheduler",
        fields={"feedVersion": Field(default="FEED_VERSION"), "actors": Field(omit_empty=True)},
        extra=(
            Extra(
                "run_times: tuple[RunTimeEstimate, ...] = ()",
                f"learned run times, by function and capability set ({_NOT_ON_THE_FEED})",
            ),
            Extra(
                "client_loads: tuple[ClientLoad, ...] = ()",
                f"each client's work, for the budget split per client ({_NOT_ON_THE_FEED})",
            ),
        ),
    ),
    "JobSummary": Struct(required="name state done total"),
    "TaskCounts": Struct(base="TaskCountsMethods"),
    "FunctionSummary": Struct(required="name"),
    "MessageCount": Struct(required="name"),
    "TaskTransitions": Struct(required="transitions", fields={"feedVersion": Field(default="FEED_VERSION")}),
    "TaskTransition": Struct(required="taskId state"),
    "ScalingDecisions": Struct(required="decisions", fields={"feedVersion": Field(default="FEED_VERSION")}),
    "ScalingDecision": Struct(required="managerId fromWorkers toWorkers"),
    "WorkerSummary": Struct(required="workerId"),
    "ClientSummary": Struct(required="clientId"),
    "UnitWaits": Struct(base="UnitWaitsMethods"),
    "ManagerSummary": Struct(
        required="managerId", fields={"lastTarget": Field(present_if="hasTarget")}, base="ManagerSummaryMethods"
    ),
    "PendingGroup": Struct(
        required="capabilities count",
        extra=(
            Extra("functions: tuple[FunctionLoad, ...] = ()", f"the same tasks by function ({_NOT_ON_THE_FEED})"),
            Extra(
                "over_quota: int = 0",
                "of `count`, those waiting because their client is at its quota "
                "(in-process; the reason says it on the feed)",
            ),
        ),
    ),
    # ------------------------------------------------------------ object storage
    "StorageRequest": Struct(
        required="requestId union",
        fields={
            "union": OneOf(
                "operation",
                "StorageOperation",
                {
                    "get": Member("Get", "object_id", "ObjectID"),
                    "delete": Member("Delete", "object_ids", "tuple[ObjectID, ...]"),
                    "exists": Member("Exists", "object_id", "ObjectID"),
                    "info": Member("Info"),
                    "deleteOwner": Member("DeleteOwner", "owner_id", "bytes"),
                    "getMapped": Member("GetMapped", "object_id", "ObjectID"),
                    "getInParts": Member("GetInParts", "object_id", "ObjectID"),
                    "fates": Member("Fates", "object_ids", "tuple[ObjectID, ...]"),
                    "clientKey": Member("ClientKey", "public_key", "str"),
                },
            )
        },
    ),
    "StorageHello": Struct(required="protocolVersion pythonVersion role"),
    "PutRequest": Struct(
        name="Put",
        required="objectId ownerId totalBytes",
        fields={
            "frameBytes": Field(omit_empty=True),
            "turn": Field(omit_empty=True),
            "hold": Field(omit_empty=True),
            "pieceDigests": Field(omit_empty=True),
            "wanted": Field(omit_empty=True),
        },
    ),
    "AdoptRequest": Struct(name="Adopt", required="objectId ownerId fileName totalBytes"),
    "StorageReply": Struct(
        required="requestId status",
        fields={
            "union": OneOf(
                "value",
                "ReplyValue",
                {
                    "none": Member(bare=True),
                    "object": Member("ObjectSize", "total_bytes", "int"),
                    "exists": Member(bare=True),
                    "deleted": Member(bare=True),
                    "mapped": Member("MappedSize", "total_bytes", "int"),
                    "fates": Member("ObjectFates", "losses", "tuple[int, ...]"),
                    "owners": Member("KeyOwners", "owner_ids", "tuple[bytes, ...]"),
                },
            ),
            "frameBytes": Field(omit_empty=True),
        },
    ),
    "StorageInfo": Struct(required="objectCount totalBytes ownerCount"),
    "AdoptOutcome": Struct(required="status"),
    "AdoptMany": Struct(required="adopts"),
    "WriteBegin": Struct(required="objectId ownerId fileName totalBytes frameBytes"),
    "WriteProgress": Struct(required="objectId writtenBytes"),
    "AdoptOutcomes": Struct(required="outcomes"),
    "SegmentDirectory": Struct(required="path bootId device inode sharedMemory"),
}
