"""Records of the scheduler's connected peers: clients, workers, worker managers, and the processors of workers.

Every peer registers with a Hello and is known by its transport identity (PeerID) from then on.
`last_seen` is refreshed by any message from the peer, not only heartbeats (a client busy in user
code may be late with heartbeats but still sends tasks). A processor is its worker's: what it sends counts as its
worker's, it lives as long as its worker's registration, and it has no liveness of its own.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field

from scaler.policy.capability import offered_memory, offers_enough
from scaler.protocol.ids import PeerID, TaskID
from scaler.protocol.messages import Capabilities, ManagerTarget, WorkerLimit, WorkerStatus
from scaler.protocol.staging import LENT_STAGING_SECONDS, STAGED_WAIT_SECONDS
from scaler.scheduler.core.client_answers import AnswerLog
from scaler.scheduler.core.processor_links import ProcessorLink

#: Results read from a worker's processors that its next heartbeat echo names, at most.
MAX_RESULTS_READ = 100_000


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


#: Lent processors (`WorkerRecord.learn_lent`): the most tasks staged behind the one computing (how much of their run
#: time at most: `staging.LENT_STAGING_SECONDS`).
MAX_LENT_STAGED = 64


@dataclass(slots=True)
class WorkerRecord:
    peer: PeerID
    capabilities: Capabilities
    capability_names: frozenset[str]
    capacity: int  #: tasks it accepts at once (running + prefetch + slots yielded by blocked parents)
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
    round_trip_seconds: float = 0.0  #: its last heartbeat round trip (the lag the monitor shows)
    #: when it last returned a result: its next task (held there meanwhile) could not start before
    last_finished_at: float = 0.0
    #: its unit is being taken back (a spot interruption): no new task; what runs at this time is moved
    draining_until: float | None = None
    processors: set[PeerID] = field(default_factory=set)  #: its processors' links (processor_links.ProcessorLink)
    #: the links of the processors it lends (ProcessorInfo.lent): its plain tasks go there (task_lifecycle.py)
    lent_links: list[ProcessorLink] = field(default_factory=list)
    #: its lent processors' tasks that wait on nested futures: each yields its slot, as a parked task at its agent
    lent_parked: int = 0
    #: it lends its processors (its hello, or a lent link, says so): its tasks go to them only (task_lifecycle.dispatch)
    lends: bool = False
    #: tasks its lent processors may hold beyond its capacity, staged behind the one each computes (`learn_lent`)
    lent_staging: int = 0
    lent_run_seconds: float | None = None  #: the moving average of its lent tasks' run times
    owner: str = ""  #: its CURVE key ("" without CURVE): clients inside its tasks connect with it (core/actors.py)
    lent_depth: int = 0  #: tasks each lent processor may hold staged (`learn_lent`)
    #: tasks whose results were read from its processors since its last heartbeat echo, which names them (the
    #: agent's journal forgets them); at most MAX_RESULTS_READ, the oldest dropped (the agent sends those again)
    results_read: collections.deque[TaskID] = field(default_factory=lambda: collections.deque(maxlen=MAX_RESULTS_READ))

    @property
    def free_slots(self) -> int:
        if self.draining_until is not None:
            return 0
        return self.capacity + self.lent_parked + self.lent_staging - len(self.assigned)

    def learn_lent(self, seconds: float) -> None:
        """A task on one of its lent processors computed for `seconds`: its agent, which never sees such a task, cannot
        raise its prefetch for tiny ones, so each lent processor may hold up to MAX_LENT_STAGED more, about
        LENT_STAGING_SECONDS of them (as the agent stages tiny tasks, agent/placement.py rule 2)."""
        average = self.lent_run_seconds
        self.lent_run_seconds = average = seconds if average is None else 0.8 * average + 0.2 * seconds
        self.lent_depth = min(MAX_LENT_STAGED, int(LENT_STAGING_SECONDS / max(average, 1e-6)))
        self.restage()

    def restage(self) -> None:
        """Its lent processors or their depth changed, one computes long, or its lent tasks' run time moved. Each lent
        processor that does not compute long may hold `lent_depth` tasks staged; the one task beyond its slots that its
        agent's capacity counts (the agent's prefetch: one, since it sees no lent task) is not offered while one of
        them computes long or its lent tasks compute STAGED_WAIT_SECONDS on average. Staged behind such a task, it would
        be asked back STAGED_WAIT_SECONDS later (`withdraw_behind_long`), so those tasks wait in the scheduler's queue
        for the first processor to free, on any worker. (Two workers of one slot and four tasks of 2 s: both staged
        ones were asked back, then both sent to the first link to return a result, one behind the other, and asked
        back again a second later: the last one started 1 s late while the other worker was idle.)"""
        long = sum(1 for link in self.lent_links if link.long)
        average = self.lent_run_seconds
        computes_long = long > 0 or (average is not None and average >= STAGED_WAIT_SECONDS)
        self.lent_staging = self.lent_depth * (len(self.lent_links) - long) - (1 if computes_long else 0)

    @property
    def is_idle(self) -> bool:
        return not self.assigned

    @property
    def takes_tasks(self) -> bool:
        """Whether a task can go to it now: a worker that lends its processors takes none until one of their links
        has connected (at its start, or while they restart: its agent would put them on processors that run lent
        ones)."""
        return not self.lends or bool(self.lent_links)

    @property
    def memory_bytes(self) -> int:
        """Its memory: the `memory` capability it declares, else the limit its heartbeats report (0: unknown)."""
        return offered_memory(self.capabilities, self.status.memory_limit_bytes)

    def can_run(self, requirement: Capabilities) -> bool:
        """Whether it offers what a queue key requires: the names, and for `memory` a quantity at least as large
        (policy/capability.py)."""
        return not requirement or offers_enough(self.capability_names, self.memory_bytes, requirement)


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

    @property
    def boot_seconds(self) -> float:
        return self.measured_boot_seconds if self.declared_boot_seconds is None else self.declared_boot_seconds
