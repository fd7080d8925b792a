"""Registration: a peer's Hello, checked for compatibility and turned into a client, worker, manager or processor
record.

A connection registers as one role only; a client's share must be a positive number; at most `max_clients` clients
at once (0: any number); a manager id is held by one connection at a time; a processor's link is accepted while its
worker is registered, and its hello names the tasks it holds (`link_sessions.register`: tasks this instance knows
stay with it, tasks from before a restart wait in `reattachment.py` for their clients). The core asks `refusal` and
then `register` (a processor's link: `link_sessions.register`) and `reply`s with the outcome. Pure: time is the core's
`now`.
"""

from __future__ import annotations

import logging
import math

from scaler.protocol import messages as m
from scaler.protocol.handshake import incompatibility
from scaler.protocol.heartbeat_period import given_period
from scaler.protocol.ids import ClientID, PeerID, short
from scaler.scheduler.core.core_state import CoreState
from scaler.scheduler.core.follow_ups import ClientHello, ManagerHello, WorkerJoined
from scaler.scheduler.core.free_workers import order_of
from scaler.scheduler.core.peers import ClientRecord, ManagerRecord, WorkerRecord
from scaler.scheduler.core.quotas import quota_of

logger = logging.getLogger(__name__)


class Registration:
    def __init__(self, state: CoreState) -> None:
        self._state = state
        #: workers registered so far: a worker's sequence number orders workers by arrival
        self._worker_sequence = 0

    def refusal(self, peer: PeerID, hello: m.Hello) -> str | None:
        """Why the hello is refused before its role is looked at: an incompatible peer, or a connection registered
        as another role already; None: neither."""
        state = self._state
        role = hello.role.value
        reason = incompatibility(hello.protocol_version, hello.python_version, state.settings.python_version, role)
        if reason is not None:
            return reason
        known_roles = [kind for kind, table in (("client", state.clients), ("worker", state.workers),
                                                ("manager", state.managers), ("processor", state.processors))
                       if peer in table]  # fmt: skip
        if known_roles and known_roles != [hello.role.value]:
            return f"this connection is already registered as a {known_roles[0]}"
        return None

    def register(self, peer: PeerID, hello: m.Hello) -> str | None:
        """A client, worker or manager: its record made (or found); None, or why it is refused."""
        info = hello.info
        if isinstance(info, m.ClientInfo):
            return self._register_client(peer, hello, info)
        if isinstance(info, m.WorkerInfo):
            self._register_worker(peer, hello, info)
            return None
        assert isinstance(info, m.ManagerInfo)
        return self._register_manager(peer, hello, info)

    def reply(self, peer: PeerID, hello: m.Hello, reason: str | None) -> None:
        """The HelloReply: refused with `reason`, or accepted with what the peer needs to know."""
        state, settings = self._state, self._state.settings
        if reason is not None:
            # a processor is refused in the normal course of things (its worker left): it says hello again later
            log = logger.debug if hello.role is m.Role.PROCESSOR else logger.warning
            log("refused %s %s (pid %d on %s): %s", hello.role.value, short(peer), hello.pid, hello.hostname, reason)
            state.send(peer, m.HelloReply(False, reason, python_version=settings.python_version))
            return
        client = state.clients.get(peer) if hello.role is m.Role.CLIENT else None
        worker = state.workers.get(peer) if hello.role is m.Role.WORKER else None
        period = settings.heartbeat_interval_seconds
        if worker is not None:  # a worker beats at the period the cluster's size gives (heartbeat_period.py)
            period = worker.heartbeat_period = given_period(len(state.workers), settings.heartbeat_interval_seconds)
        state.send(
            peer,
            m.HelloReply(
                True,
                python_version=settings.python_version,
                object_storage_address=settings.object_storage_address,
                heartbeat_interval_seconds=period,
                worker_count=state.ready_worker_count() if hello.role is m.Role.CLIENT else len(state.workers),
                instance_id=settings.instance_id,
                resume_seconds=client.resume_seconds if client is not None else 0.0,
                tunnel_address=settings.tunnel_address or "",
            ),
        )
        if isinstance(hello.info, m.ManagerInfo):
            state.emit(ManagerHello(state.managers[peer]))

    def _register_client(self, peer: PeerID, hello: m.Hello, info: m.ClientInfo) -> str | None:
        state, now = self._state, self._state.now
        limit = state.settings.max_clients
        if limit and peer not in state.clients and len(state.clients) >= limit:
            return (
                f"the scheduler serves at most {limit} client(s) at once (its max_clients setting, --max-clients) "
                f"and {len(state.clients)} are connected; try again when one has closed"
            )
        if not (math.isfinite(info.share) and info.share > 0):
            return f"a client's share must be a positive number, not {info.share!r}"
        state.tasks.queue.shares[ClientID(peer)] = info.share
        quota = quota_of(info)
        if quota is not None:
            state.tasks.queue.set_quota(ClientID(peer), quota)
        record = state.clients.get(peer)
        new = record is None
        if record is None:
            returning = bool(hello.known_instance) and hello.known_instance != state.settings.instance_id
            record = state.clients[peer] = ClientRecord(
                peer, info.name, hello.hostname, hello.pid, now, now, returning, owner=info.owner_key,
                max_cost_per_hour=info.max_cost_per_hour, max_job_result_bytes=info.max_job_result_bytes,
                resume_seconds=resume_window(state.settings.client_resume_seconds, info.resume_seconds),
            )  # fmt: skip
            logger.debug("client %s connected (pid %d on %s)", short(peer), hello.pid, hello.hostname)
        was_away = record.is_away
        state.emit(ClientHello(record, new, hello.known_instance))  # it says hello again while its work waits for it
        if was_away:
            record.last_seen = now
        return None

    def _register_worker(self, peer: PeerID, hello: m.Hello, info: m.WorkerInfo) -> None:
        state, now = self._state, self._state.now
        if peer not in state.workers:
            self._worker_sequence += 1
            rank = state.object_hosts.workers_on(hello.hostname)  # its host's workers so far: dispatch takes turns
            worker = state.workers[peer] = WorkerRecord(
                peer, info.capabilities, frozenset(name for name, _ in info.capabilities), max(1, info.capacity),
                info.manager_id, info.worker_type, hello.hostname, hello.pid, now, now,
                sequence=self._worker_sequence, order=order_of(rank, self._worker_sequence), owner=info.owner_key,
                slots=max(1, info.slots),
                task_timeout_seconds=info.task_timeout_seconds, processor_per_parent=info.processor_per_parent,
            )  # fmt: skip
            state.emit(WorkerJoined(worker))
            logger.debug("worker %s connected (pid %d on %s)", short(peer), hello.pid, hello.hostname)

    def _register_manager(self, peer: PeerID, hello: m.Hello, info: m.ManagerInfo) -> str | None:
        state, now = self._state, self._state.now
        for other in state.managers.values():
            if other.manager_id == info.manager_id and other.peer != peer:
                return (
                    f"worker manager id {info.manager_id!r} is already connected (pid {other.pid} on "
                    f"{other.hostname}); each manager needs its own --worker-manager-id"
                )
        if peer not in state.managers:
            state.managers[peer] = ManagerRecord(
                peer, info.manager_id, info.manager_type, info.capabilities, info.max_workers,
                hello.hostname, hello.pid, now, now, worker_cost_per_hour=info.worker_cost_per_hour,
                declared_boot_seconds=info.expected_boot_seconds, min_workers=info.min_workers,
                buffer_workers=info.buffer_workers,
            )  # fmt: skip
            logger.info("worker manager %r (%s) connected", info.manager_id, info.manager_type)
        return None


def resume_window(scheduler_seconds: float, wish: float) -> float:
    """How long a client's work waits for it when it is away: the scheduler's window, or the client's wish when it
    is shorter (its hello's `resumeSeconds`: 0 for the scheduler's, negative for none; client_sessions.py, rule 2)."""
    if wish < 0:
        return 0.0
    if wish == 0 or not math.isfinite(wish):
        return max(0.0, scheduler_seconds)
    return max(0.0, min(scheduler_seconds, wish))
