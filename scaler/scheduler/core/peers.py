"""Records of the scheduler's connected peers: clients, workers and worker managers (a worker's processors' links
are `processor_links.ProcessorLink`s, held by their worker's record).

Every peer registers with a Hello and is known by its transport identity (PeerID) from then on.
`last_seen` is refreshed by any message from the peer, not only heartbeats (a client busy in user
code may be late with heartbeats but still sends tasks). A processor is its worker's: what it sends counts as its
worker's, it lives as long as its worker's registration, and it has no liveness of its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from scaler.policy.capability import offered_memory, offers_enough
from scaler.protocol.ids import PeerID, TaskID
from scaler.protocol.messages import Capabilities, ManagerTarget, UnitWaits, WorkerLimit, WorkerStatus
from scaler.protocol.staging import STAGED_WAIT_SECONDS, STAGING_SECONDS
from scaler.scheduler.core.client_answers import AnswerLog
from scaler.scheduler.core.processor_links import ProcessorLink


@dataclass(slots=True)
class ClientRecord:
    peer: PeerID
    name: str
    hostname: str
    pid: int
    connected_at: float
    last_seen: float
    #: it was registered with an instance of the scheduler that is gone (it re-attaches after a restart)
    returning: bool = False
    owner: str = ""  #: its CURVE key, which owns the jobs it opens ("" without CURVE)
    max_cost_per_hour: float = 0.0  #: its key's part of the cost policy's budget (0: a part by its share)
    max_job_result_bytes: int = 0  #: its key's storage quota for its jobs' results (0: the scheduler's)
    #: how long its work waits for it once it is silent or its connection is lost (0: it is dropped at once)
    resume_seconds: float = 0.0
    away_reason: str = ""  #: why it is away (silent, connection lost); "" while it is present
    #: away because its connection closed while it was talking: dropped at this time unless it speaks again
    drop_at: float | None = None
    answers: AnswerLog = field(default_factory=AnswerLog)  #: its answers sent unacknowledged, or held while away
    #: registered again after it was dropped: the (packed) ids of its tasks cancelled then, until its ClientResume
    cancelled_ids: bytes = b""
    #: registered again by the instance that dropped it, which no longer remembers what it cancelled then: its
    #: ClientResume is told that all its unfinished work unknown here was cancelled (none of it runs again)
    forgot_cancelled: bool = False

    @property
    def is_away(self) -> bool:
        return bool(self.away_reason)


#: The most tasks staged in a processor behind the one it computes (how much of their run time at most:
#: `staging.STAGING_SECONDS`; `WorkerRecord.learn`).
MAX_STAGED = 64


@dataclass(slots=True)
class WorkerRecord:
    peer: PeerID
    capabilities: Capabilities
    capability_names: frozenset[str]
    capacity: int  #: tasks it accepts at once beyond those staged, parked or hosting an actor (slots + a prefetch)
    manager_id: str
    worker_type: str
    hostname: str
    pid: int
    connected_at: float
    last_seen: float
    assigned: set[TaskID] = field(default_factory=set)  #: DISPATCHED or CANCELING tasks held there
    status: WorkerStatus = field(default_factory=WorkerStatus)
    cpu_percent: float = 0.0
    rss_bytes: int = 0
    sequence: int = 0  #: join order, breaks ties between equally loaded workers
    #: its place among equally loaded workers in dispatch (free_workers.py): how many workers its host had when it
    #: joined, then its join order (`free_workers.order_of`); unique among live workers
    order: int = 0
    round_trip_seconds: float = 0.0  #: its last heartbeat round trip (the lag the monitor shows)
    #: when it last returned a result: its next task (held there meanwhile) could not start before
    last_finished_at: float = 0.0
    #: its unit is being taken back (a spot interruption), or its lifetime ends: no new task; what runs at this time
    #: is moved
    draining_until: float | None = None
    #: it asked to drain (WorkerLeaving with drainSeconds): it is let go (Shutdown) once it holds no task
    leaves_when_drained: bool = False
    owner: str = ""  #: its CURVE key ("" without CURVE): clients inside its tasks connect with it (core/actors.py)
    slots: int = 1  #: processors computing at once (its hello)
    task_timeout_seconds: float = 0.0  #: a task computing longer times out (its hello; 0: no limit)
    processor_per_parent: bool = False  #: a waiting parent keeps its processor (nested_parents "process")
    #: its processors' links, in the order they said hello: its tasks go there, and only there
    links: list[ProcessorLink] = field(default_factory=list)
    #: the identities of its processors' links in `SchedulerCore.processors`, closing ones included: they go with it
    processors: set[PeerID] = field(default_factory=set)
    beyond_slots: int = 0  #: processors it was asked to keep beyond its slots (ProcessorsWanted)
    #: tasks that hold no slot: parked on nested futures, or hosting an actor (`restage`)
    beside: int = 0
    #: its tasks placed by their large inputs (object_hosts.py): a shuffle's readers spread over the hosts by them
    readers: int = 0
    #: tasks its processors may hold beyond its capacity, staged behind the one each computes (`learn`, `restage`)
    staging: int = 0
    run_seconds: float | None = None  #: the moving average of its tasks' run times
    depth: int = 0  #: tasks each of its processors may hold staged (`learn`)
    slow: bool = False  #: its tasks compute STAGED_WAIT_SECONDS on average (`learn`): its prefetch is not offered
    #: the heartbeat period it was given last (its HelloReply, then each echo): its silence is judged by it
    heartbeat_period: float = 0.0
    #: its preemption slots by nesting depth, each held by the task that filled it (None: granted, not filled yet):
    #: a slot each beyond its capacity, and a processor each beyond its slots (core/preemption.py)
    preemption_slots: dict[int, TaskID | None] = field(default_factory=dict)

    @property
    def free_slots(self) -> int:  # `no_free_slot` below is its test for none, on the path of every task
        if self.draining_until is not None:
            return 0
        return self.capacity + self.beside + self.staging + len(self.preemption_slots) - len(self.assigned)

    def learn(self, seconds: float) -> None:
        """A task computed for `seconds` here: each processor that stages may hold up to MAX_STAGED tasks behind the
        one it computes, about STAGING_SECONDS of them."""
        average = self.run_seconds
        self.run_seconds = average = seconds if average is None else 0.8 * average + 0.2 * seconds
        # min(MAX_STAGED, int(STAGING_SECONDS / max(average, 1e-6))), without the calls: on the path of every result
        depth = int(STAGING_SECONDS / average) if average > 1e-6 else int(STAGING_SECONDS / 1e-6)
        if depth > MAX_STAGED:
            depth = MAX_STAGED
        slow = average >= STAGED_WAIT_SECONDS
        if depth != self.depth or slow != self.slow:  # what it offers changed (the common case: it did not)
            self.depth, self.slow = depth, slow
            self.restage()

    def restage(self) -> None:
        """Its links, what they hold or their depth changed, one computes long, or its tasks' run time moved. Parked
        tasks and hosted actors take no slot (`beside`). Each processor that stages and does not compute long may hold
        `depth` tasks staged; the one task beyond its slots its hello counts (the prefetch, where its credit exceeds its
        slots) is not offered while one of them computes long or its tasks compute STAGED_WAIT_SECONDS on average.
        Staged behind such a task, it would be asked back STAGED_WAIT_SECONDS later (processor_links.py rule 3), so
        those tasks wait in the scheduler's queue for the first processor to free, on any worker. (Two workers of one
        slot and four tasks of 2 s: both staged ones were asked back, then both sent to the first link to return a
        result, one behind the other, and asked back again a second later: the last one started 1 s late while the
        other worker was idle.)"""
        beside = staging = long = 0
        stageable = False
        depth, per_parent = self.depth, self.processor_per_parent
        for link in self.links:  # on the path of every result: `_stages` inline
            parked = link.parked
            beside += parked + (link.hosting is not None)
            if link.max_staged > 0 and not per_parent and not link.killing and link.actor_start is None:
                stageable = True
                if link.long:
                    long += 1
                else:
                    staging += min(depth, link.max_staged)
        # a credit of its slots or fewer (`per_worker_task_queue_size` at most its processors' count) counts no
        # prefetch: withdrawing one there would take a task of its slots' credit, all of it for a worker of one task
        has_prefetch = stageable and self.capacity > self.slots
        self.beside = beside
        self.staging = staging - (1 if (long > 0 or self.slow) and has_prefetch else 0)

    def link_for(self) -> ProcessorLink | None:
        """The link its next task goes to: among those with room (`_has_room`, inline: on the path of every task), the
        one holding the fewest tasks not parked, one that computes long only when all do (None: none has room now).
        While it has preemption slots, only a link that computes nothing has room (core/preemption.py rule 3)."""
        best: ProcessorLink | None = None
        best_order = (True, 0)
        per_parent = self.processor_per_parent
        no_staging = per_parent or bool(self.preemption_slots)
        for link in self.links:
            parked = link.parked
            if link.killing or link.actor_start is not None or (per_parent and parked):
                continue  # it serves no task
            unparked = len(link.tasks) - parked
            if (link.max_staged <= 0 or no_staging) and unparked:
                continue  # it stages nothing and computes a task
            order = (link.long, unparked)
            if best is None or order < best_order:
                best, best_order = link, order
        return best

    @property
    def takes_tasks(self) -> bool:
        """Whether a task can go to it now: one of its links has room (none at its start, before its processors said
        hello, nor while all of them host actors or keep parents waiting)."""
        return self.link_for() is not None

    def _serves(self, link: ProcessorLink) -> bool:
        """Whether the link takes tasks: not while it is killed, holds an actor, or keeps a parent waiting in "process"
        mode."""
        return not (link.killing or link.holds_actor or (self.processor_per_parent and link.parked))

    def _stages(self, link: ProcessorLink) -> bool:
        return link.max_staged > 0 and not self.processor_per_parent and self._serves(link)

    def _has_room(self, link: ProcessorLink) -> bool:
        """Whether the link takes a task now (`link_for` has it inline)."""
        if not self._serves(link):
            return False
        return self._stages(link) or link.unparked == 0

    @property
    def is_idle(self) -> bool:
        return not self.assigned

    @property
    def memory_bytes(self) -> int:
        """Its memory: the `memory` capability it declares, else the limit its heartbeats report (0: unknown)."""
        return offered_memory(self.capabilities, self.status.memory_limit_bytes)

    def can_run(self, requirement: Capabilities) -> bool:
        """Whether it offers what a queue key requires: the names, and for `memory` a quantity at least as large
        (policy/capability.py)."""
        return not requirement or offers_enough(self.capability_names, self.memory_bytes, requirement)


def no_free_slot(worker: WorkerRecord) -> bool:
    """`worker.free_slots <= 0` (its formula), as a function: a property is read through a call from C, a function is
    called by the interpreter itself (the index of free workers asks a few times per task)."""
    if worker.draining_until is not None:
        return True
    return worker.capacity + worker.beside + worker.staging + len(worker.preemption_slots) <= len(worker.assigned)


@dataclass(slots=True)
class ManagerRecord:
    peer: PeerID
    manager_id: str
    manager_type: str
    capabilities: Capabilities
    max_workers: WorkerLimit
    hostname: str
    pid: int
    connected_at: float
    last_seen: float
    units: int = 0
    pending_units: int = 0
    last_target: ManagerTarget | None = None
    worker_cost_per_hour: float = 0.0
    declared_boot_seconds: float | None = None  #: as the manager's hello declared it; None: use the measured
    measured_boot_seconds: float = 0.0  #: from its heartbeats; 0: none measured yet
    min_workers: int = 0  #: warm capacity (scaling_hook.keep_warm_capacity)
    buffer_workers: int = 0
    #: its units waiting in their provider's queue, by reason, and why it holds launches back (its heartbeat's)
    waits: tuple[UnitWaits, ...] = ()
    held: str = ""

    @property
    def boot_seconds(self) -> float:
        return self.measured_boot_seconds if self.declared_boot_seconds is None else self.declared_boot_seconds
