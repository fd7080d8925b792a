"""What the worker agent's core takes in (events) and asks its shell to do (effects).

Every event carries `now` (monotonic seconds, stamped by the shell); the core has no clock.
"""

from __future__ import annotations

from dataclasses import dataclass

from scaler.protocol import messages as m
from scaler.protocol.exit_codes import ExitCode

# ---------------------------------------------------------------- events


@dataclass(frozen=True, slots=True)
class AgentTick:
    now: float


@dataclass(frozen=True, slots=True)
class FromScheduler:
    message: m.Message
    now: float


@dataclass(frozen=True, slots=True)
class FromProcessor:
    processor_id: bytes
    message: m.Message
    now: float


@dataclass(frozen=True, slots=True)
class ProcessorDied:
    processor_id: bytes
    description: str  #: "exit code 1", "killed by SIGKILL"
    now: float
    #: "" unless it died for memory (worker/memory.py, `MemoryWatch.verdict`): then what to tell the task's owner
    out_of_memory: str = ""
    #: the task it computed, read from its mark (b"": none); None: not known (no mark)
    computing_task: bytes | None = None


@dataclass(frozen=True, slots=True)
class LeaveRequested:
    reason: str
    now: float


@dataclass(frozen=True, slots=True)
class SchedulerDisconnected:
    """The connection to the scheduler closed (it died, or is restarting): the grace period starts."""

    now: float


@dataclass(frozen=True, slots=True)
class StorageRouted:
    """Where the processors reach object storage (rule 7 of the core): the storage server, or the host's cache of it,
    with the CURVE key of the server there when it is not the servers' own ("": theirs)."""

    address: str
    server_key: str
    now: float


Event = (
    AgentTick | FromScheduler | FromProcessor | ProcessorDied | LeaveRequested | SchedulerDisconnected | StorageRouted
)


# ---------------------------------------------------------------- effects


@dataclass(frozen=True, slots=True)
class ToScheduler:
    message: m.Message


@dataclass(frozen=True, slots=True)
class SayHello:
    """Register with the scheduler (again), naming the instance it knew (b"": none)."""

    known_instance: bytes = b""


@dataclass(frozen=True, slots=True)
class SendWorkerHeartbeat:
    status: m.WorkerStatus
    round_trip_seconds: float = 0.0


@dataclass(frozen=True, slots=True)
class ToProcessor:
    processor_id: bytes
    message: m.Message


@dataclass(frozen=True, slots=True)
class SpawnProcessor:
    processor_id: bytes


@dataclass(frozen=True, slots=True)
class KillProcessor:
    processor_id: bytes
    reason: str


@dataclass(frozen=True, slots=True)
class Exit:
    code: int
    reason: str


@dataclass(frozen=True, slots=True)
class RouteStorage:
    """Find where the processors reach the object storage at this address (rule 7): answered by StorageRouted."""

    storage_address: str


Effect = (
    ToScheduler | SayHello | SendWorkerHeartbeat | ToProcessor | SpawnProcessor | KillProcessor | Exit | RouteStorage
)

#: Exit codes of a worker process (the table is `scaler.protocol.exit_codes.ExitCode`).
EXIT_OK = ExitCode.OK
EXIT_ERROR = ExitCode.ERROR
EXIT_NEVER_CONNECTED = ExitCode.NEVER_CONNECTED
EXIT_SCHEDULER_LOST = ExitCode.SCHEDULER_LOST
