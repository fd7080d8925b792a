"""Records of the scheduler's connected peers: clients, workers and worker managers.

Every peer registers with a Hello and is known by its transport identity (PeerID) from then on.
`last_seen` is refreshed by any message from the peer, not only heartbeats (a client busy in user
code may be late with heartbeats but still sends tasks).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from scaler.protocol.ids import PeerID, TaskID, short
from scaler.protocol.messages import (
    Capabilities,
    ClientInfo,
    Hello,
    ManagerInfo,
    ManagerTarget,
    WorkerInfo,
    WorkerLimit,
    WorkerStatus,
)

logger = logging.getLogger(__name__)


@dataclass(slots=True)
class ClientRecord:
    peer: PeerID
    name: str
    hostname: str
    pid: int
    connected_at: float
    last_seen: float


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
    #: heartbeat round trip as the worker last measured it ("lag" in scaler_top); 0 until it reports one
    round_trip_seconds: float = 0.0

    @property
    def free_slots(self) -> int:
        return self.capacity - len(self.assigned)

    @property
    def is_idle(self) -> bool:
        return not self.assigned

    def can_run(self, capability_names: frozenset[str]) -> bool:
        return capability_names <= self.capability_names


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


class Peers:
    """The connected peers by role. `register` turns an accepted Hello into a record."""

    def __init__(self) -> None:
        self.clients: dict[PeerID, ClientRecord] = {}
        self.workers: dict[PeerID, WorkerRecord] = {}
        self.managers: dict[PeerID, ManagerRecord] = {}
        self._worker_sequence = 0

    def register(self, peer: PeerID, hello: Hello, now: float) -> str | None:
        """Record the peer (a repeated Hello changes nothing); the reason it is refused, or None."""
        info = hello.info
        known_roles = [kind for kind, table in (("client", self.clients), ("worker", self.workers),
                                                ("manager", self.managers)) if peer in table]  # fmt: skip
        if known_roles and known_roles != [hello.role.value]:
            return f"this connection is already registered as a {known_roles[0]}"
        if isinstance(info, ClientInfo):
            if peer not in self.clients:
                self.clients[peer] = ClientRecord(peer, info.name, hello.hostname, hello.pid, now, now)
                logger.info("client %s connected (pid %d on %s)", short(peer), hello.pid, hello.hostname)
            return None
        if isinstance(info, WorkerInfo):
            if peer not in self.workers:
                self._worker_sequence += 1
                self.workers[peer] = WorkerRecord(
                    peer, info.capabilities, frozenset(name for name, _ in info.capabilities), max(1, info.capacity),
                    info.manager_id, info.worker_type, hello.hostname, hello.pid, now, now,
                    sequence=self._worker_sequence,
                )  # fmt: skip
                logger.info("worker %s connected (pid %d on %s)", short(peer), hello.pid, hello.hostname)
            return None
        assert isinstance(info, ManagerInfo)
        return self._register_manager(peer, hello, info, now)

    def _register_manager(self, peer: PeerID, hello: Hello, info: ManagerInfo, now: float) -> str | None:
        for other in self.managers.values():
            if other.manager_id == info.manager_id and other.peer != peer:
                return (
                    f"worker manager id {info.manager_id!r} is already connected (pid {other.pid} on "
                    f"{other.hostname}); each manager needs its own --worker-manager-id"
                )
        if peer not in self.managers:
            self.managers[peer] = ManagerRecord(
                peer, info.manager_id, info.manager_type, info.capabilities, info.max_workers,
                hello.hostname, hello.pid, now, now,
            )  # fmt: skip
            logger.info("worker manager %r (%s) connected", info.manager_id, info.manager_type)
        return None
