"""What a registry says should follow: small values it emits (`CoreState.emit`), each routed by the core's one
table (`routing.Routing`) to the registry that carries it out, or to a composition of several when a fact concerns
them all (a client or a worker gone, a task's result).

A registry never calls another: it changes its own records and emits what another must do, and the core decides who
does it. A follow-up is carried out at once, before the emitting registry goes on, so the order of what happens is the
order it is said in. Each names a fact ("a worker joined") or a request to the registry that owns the records
concerned ("take these tasks back"); the table in `routing.py` says who handles each.
"""

from __future__ import annotations

from dataclasses import dataclass

from scaler.protocol import messages as m
from scaler.protocol.ids import ClientID, PeerID, TaskID
from scaler.scheduler.core.peers import ClientRecord, ManagerRecord, WorkerRecord
from scaler.scheduler.core.processor_links import ProcessorLink
from scaler.scheduler.core.task_state import TaskEvent

# ------------------------------------------------------------ for a client's session


@dataclass(frozen=True, slots=True)
class ClientHello:
    """A client said hello: `new`, a record made for it now; else one already known, maybe away."""

    record: ClientRecord
    new: bool
    known_instance: bytes


@dataclass(frozen=True, slots=True)
class ClientBack:
    """An away client spoke again: it is present, and what waits for it is sent (unless `resuming`: its resume says
    what to send)."""

    peer: PeerID
    resuming: bool


@dataclass(frozen=True, slots=True)
class ClientLeft:
    """A client was dropped (its record is gone): its tasks, calls, held work and objects go with it."""

    client: ClientID


@dataclass(frozen=True, slots=True)
class ClusterShutdown:
    """A client asked the cluster to shut down: workers and managers are told, kept objects go, the scheduler stops."""

    reason: str


# ------------------------------------------------------------ for the task lifecycle


@dataclass(frozen=True, slots=True)
class TaskStep:
    """A lifecycle event for one task (task_state.TRANSITIONS says what it does), with its reason or its result."""

    task_id: TaskID
    event: TaskEvent
    reason: str = ""
    result: m.TaskResult | None = None


@dataclass(frozen=True, slots=True)
class TaskEnded:
    """A task's result from its worker (its processor's, or one made here): an actor's start first, then a task from
    before a restart, then the lifecycle's."""

    worker: PeerID
    result: m.TaskResult


@dataclass(frozen=True, slots=True)
class RoomAt:
    """A worker may take tasks (it joined, its capacity grew, a slot was freed): considered at the next dispatch."""

    worker: PeerID


@dataclass(frozen=True, slots=True)
class TakeBack:
    """Ask the worker's processors to give back these tasks they have not started."""

    worker: PeerID
    task_ids: tuple[TaskID, ...]


@dataclass(frozen=True, slots=True)
class KillLinkProcessor:
    """Ask the link's worker to kill its processor."""

    link: ProcessorLink
    reason: str


@dataclass(frozen=True, slots=True)
class StopOnLink:
    """Stop a task held on a link (timed out): by killing its processor when it computes alone, else in it."""

    link: ProcessorLink
    task_id: TaskID
    reason: str


@dataclass(frozen=True, slots=True)
class HeldAgain:
    """A processor says hello again holding a task this instance knows."""

    link: ProcessorLink
    task_id: TaskID


@dataclass(frozen=True, slots=True)
class CancelConfirmed:
    """A processor confirmed a task's cancel."""

    worker: PeerID
    confirm: m.TaskCancelConfirm


@dataclass(frozen=True, slots=True)
class GivenBack:
    """A worker's processor gave these tasks back unstarted."""

    worker: PeerID
    task_ids: tuple[TaskID, ...]


@dataclass(frozen=True, slots=True)
class Drain:
    """A worker drains: what it has not started is asked back."""

    worker: WorkerRecord


@dataclass(frozen=True, slots=True)
class NoticeOver:
    """A draining worker's notice ended with tasks still there: they are moved."""

    worker: WorkerRecord


@dataclass(frozen=True, slots=True)
class Cancel:
    """A client cancels its tasks (or a job follower a job's, as its submitter)."""

    client: ClientID
    task_ids: tuple[TaskID, ...]
    queued_only: bool


@dataclass(frozen=True, slots=True)
class GraphSubmitted:
    graph: m.GraphTask
    client: ClientID


# ------------------------------------------------------------ for workers, their links and actors


@dataclass(frozen=True, slots=True)
class WorkerJoined:
    """A worker registered: its silence is judged from now on, and it may take tasks."""

    worker: WorkerRecord


@dataclass(frozen=True, slots=True)
class WorkerLeft:
    """A worker was dropped (its record is gone): its actors are lost, its tasks go back or end."""

    worker: WorkerRecord
    reason: str
    graceful: bool


@dataclass(frozen=True, slots=True)
class Reclaimed:
    """A worker's unit is reclaimed by its provider: it drains until `until`."""

    worker: WorkerRecord
    until: float


@dataclass(frozen=True, slots=True)
class HeartbeatAnswered:
    """A worker's heartbeat was echoed: each of its links is told the results read there since."""

    worker: WorkerRecord


@dataclass(frozen=True, slots=True)
class Surplus:
    """A worker has `count` processors beyond what it needs: of its `idle` links, up to `count` that serve no actor
    call are killed."""

    worker: WorkerRecord
    idle: tuple[ProcessorLink, ...]
    count: int


@dataclass(frozen=True, slots=True)
class SlotGone:
    """A preemption slot of the worker went (the task that held it left it): the processors it keeps change
    (core/preemption.py rule 4)."""

    worker: WorkerRecord


@dataclass(frozen=True, slots=True)
class HeldFromBefore:
    """A processor's hello named tasks from before a restart: they are its worker's until their clients send them."""

    worker: PeerID
    task_ids: tuple[TaskID, ...]


@dataclass(frozen=True, slots=True)
class HeldForgotten:
    """A processor that held tasks from before a restart ended before they were adopted."""

    task_ids: frozenset[TaskID]


@dataclass(frozen=True, slots=True)
class ActorReadyAt:
    """An actor's constructor returned in the processor of `link`, of worker `worker`."""

    worker: PeerID
    ready: m.ActorReady
    link: PeerID


@dataclass(frozen=True, slots=True)
class ProcessorGone:
    """A processor's link is gone: the actors it hosted are lost."""

    processor: PeerID
    reason: str


# ------------------------------------------------------------ for managers and the monitor feed


@dataclass(frozen=True, slots=True)
class ManagerHello:
    """A manager registered: it is sent its target at once."""

    manager: ManagerRecord


@dataclass(frozen=True, slots=True)
class ScalingDecided:
    """A scaling decision (or a change of why a manager's units wait), for the monitor feed."""

    decision: m.ScalingDecision


FollowUp = (
    ClientHello | ClientBack | ClientLeft | ClusterShutdown
    | TaskStep | TaskEnded | RoomAt | TakeBack | KillLinkProcessor | StopOnLink | HeldAgain | CancelConfirmed
    | GivenBack
    | Drain | NoticeOver | Cancel | GraphSubmitted
    | WorkerJoined | WorkerLeft | Reclaimed | HeartbeatAnswered | Surplus | SlotGone | HeldFromBefore | HeldForgotten
    | ActorReadyAt | ProcessorGone
    | ManagerHello | ScalingDecided
)  # fmt: skip
