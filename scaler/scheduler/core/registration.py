"""Registration: a peer's Hello, checked for compatibility and turned into a client, worker, manager or processor
record.

A connection registers as one role only; a client's share must be a positive number; at most `max_clients` clients
at once (0: any number); a manager id is held by one connection at a time; a processor's link is accepted while its
worker is registered, and its hello names the tasks it holds (`link_sessions.register`: tasks this instance knows
stay with it, tasks from before a restart wait in `reattachment.py` for their clients). Pure, like the core it belongs
to: it reads the core's time and writes effects through it.
"""

from __future__ import annotations

import logging
import math
from typing import TYPE_CHECKING

from scaler.protocol import messages as m
from scaler.protocol.handshake import incompatibility
from scaler.protocol.ids import ClientID, PeerID, short
from scaler.scheduler.core.peers import ClientRecord, ManagerRecord, WorkerRecord
from scaler.scheduler.core.quotas import quota_of

if TYPE_CHECKING:
    from scaler.scheduler.core.scheduler_core import SchedulerCore

logger = logging.getLogger(__name__)


class Registration:
    def __init__(self, core: SchedulerCore) -> None:
        self._core = core
        #: workers registered so far: a worker's sequence number orders workers by arrival
        self._worker_sequence = 0

    def on_hello(self, peer: PeerID, hello: m.Hello) -> None:
        core, settings = self._core, self._core.settings
        role = hello.role.value
        reason = incompatibility(hello.protocol_version, hello.python_version, settings.python_version, role)
        if reason is None:
            reason = self._register(peer, hello)
        if reason is not None:
            # a processor is refused in the normal course of things (its worker left): it says hello again later
            log = logger.debug if hello.role is m.Role.PROCESSOR else logger.warning
            log("refused %s %s (pid %d on %s): %s", role, short(peer), hello.pid, hello.hostname, reason)
            core.send(peer, m.HelloReply(False, reason, python_version=settings.python_version))
            return
        client = core.clients.get(peer) if hello.role is m.Role.CLIENT else None
        worker = core.workers.get(peer) if hello.role is m.Role.WORKER else None
        period = settings.heartbeat_interval_seconds
        if worker is not None:  # a worker beats at the period the cluster's size gives (heartbeat_period.py)
            period = worker.heartbeat_period = core.worker_sessions.period()
        core.send(
            peer,
            m.HelloReply(
                True,
                python_version=settings.python_version,
                object_storage_address=settings.object_storage_address,
                heartbeat_interval_seconds=period,
                worker_count=core.ready_worker_count() if hello.role is m.Role.CLIENT else len(core.workers),
                instance_id=settings.instance_id,
                resume_seconds=client.resume_seconds if client is not None else 0.0,
                tunnel_address=settings.tunnel_address or "",
            ),
        )
        if isinstance(hello.info, m.ManagerInfo):
            core.manager_sessions.send_target(core.managers[peer])

    def _register(self, peer: PeerID, hello: m.Hello) -> str | None:
        core, info = self._core, hello.info
        known_roles = [kind for kind, table in (("client", core.clients), ("worker", core.workers),
                                                ("manager", core.managers), ("processor", core.processors))
                       if peer in table]  # fmt: skip
        if known_roles and known_roles != [hello.role.value]:
            return f"this connection is already registered as a {known_roles[0]}"
        if isinstance(info, m.ClientInfo):
            return self._register_client(peer, hello, info)
        if isinstance(info, m.WorkerInfo):
            self._register_worker(peer, hello, info)
            return None
        if isinstance(info, m.ProcessorInfo):
            return core.link_sessions.register(peer, info)
        assert isinstance(info, m.ManagerInfo)
        return self._register_manager(peer, hello, info)

    def _register_client(self, peer: PeerID, hello: m.Hello, info: m.ClientInfo) -> str | None:
        core, now = self._core, self._core.now
        limit = core.settings.max_clients
        if limit and peer not in core.clients and len(core.clients) >= limit:
            return (
                f"the scheduler serves at most {limit} client(s) at once (its max_clients setting, --max-clients) "
                f"and {len(core.clients)} are connected; try again when one has closed"
            )
        if not (math.isfinite(info.share) and info.share > 0):
            return f"a client's share must be a positive number, not {info.share!r}"
        core.tasks.queue.shares[ClientID(peer)] = info.share
        quota = quota_of(info)
        if quota is not None:
            core.tasks.queue.set_quota(ClientID(peer), quota)
        existing = core.clients.get(peer)
        if existing is None:
            returning = bool(hello.known_instance) and hello.known_instance != core.settings.instance_id
            core.clients[peer] = ClientRecord(
                peer, info.name, hello.hostname, hello.pid, now, now, returning, owner=info.owner_key,
                max_cost_per_hour=info.max_cost_per_hour, max_job_result_bytes=info.max_job_result_bytes,
                resume_seconds=resume_window(core.settings.client_resume_seconds, info.resume_seconds),
                cancelled_ids=core.client_sessions.take_expired(peer),
            )  # fmt: skip
            record = core.clients[peer]
            # dropped by this very instance, which kept nothing of it: what it had is to be told cancelled
            record.forgot_cancelled = (
                hello.known_instance == core.settings.instance_id != b"" and not record.cancelled_ids
            )
            logger.debug("client %s connected (pid %d on %s)", short(peer), hello.pid, hello.hostname)
        elif existing.is_away:  # it says hello again while its work waits for it
            core.client_sessions.back(peer, resuming=False)
            existing.last_seen = now
        if core.retention.client_back(ClientID(peer)):  # it had not left for good: its objects stay
            logger.info("client %s is back within its retention time; its objects are kept", short(peer))
        return None

    def _register_worker(self, peer: PeerID, hello: m.Hello, info: m.WorkerInfo) -> None:
        core, now = self._core, self._core.now
        if peer not in core.workers:
            self._worker_sequence += 1
            core.workers[peer] = WorkerRecord(
                peer, info.capabilities, frozenset(name for name, _ in info.capabilities), max(1, info.capacity),
                info.manager_id, info.worker_type, hello.hostname, hello.pid, now, now,
                sequence=self._worker_sequence, owner=info.owner_key, slots=max(1, info.slots),
                task_timeout_seconds=info.task_timeout_seconds, processor_per_parent=info.processor_per_parent,
            )  # fmt: skip
            core.workers[peer].heartbeat_period = core.worker_sessions.period()
            core.worker_sessions.registered(core.workers[peer])
            core.lifecycle.worker_has_room(peer)
            logger.debug("worker %s connected (pid %d on %s)", short(peer), hello.pid, hello.hostname)

    def _register_manager(self, peer: PeerID, hello: m.Hello, info: m.ManagerInfo) -> str | None:
        core, now = self._core, self._core.now
        for other in core.managers.values():
            if other.manager_id == info.manager_id and other.peer != peer:
                return (
                    f"worker manager id {info.manager_id!r} is already connected (pid {other.pid} on "
                    f"{other.hostname}); each manager needs its own --worker-manager-id"
                )
        if peer not in core.managers:
            core.managers[peer] = ManagerRecord(
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
