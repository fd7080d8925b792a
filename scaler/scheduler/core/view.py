"""The scheduler's read model: one frozen `StatusSnapshot` of the core, built at most once per core step.

Everything that looks at the scheduler from outside reads this view and nothing else: the scaling policies
(through `policy.snapshot.scaling_snapshot`), the status topic of the monitor feed, `scaler_top`, the web
dashboard and `/metrics`. Building it never walks the task table (the table keeps its counts exact), so its
cost grows with workers, managers, clients, functions and capability sets, not with tasks.
"""

from __future__ import annotations

import dataclasses

from scaler.policy.capability import capability_needs, covers
from scaler.protocol import messages as m
from scaler.protocol.ids import ClientID, PeerID
from scaler.scheduler.core.actors import Actors
from scaler.scheduler.core.core_state import CoreState
from scaler.scheduler.core.events import ShellStats
from scaler.scheduler.core.jobs import JobRecord
from scaler.scheduler.core.peers import ManagerRecord, WorkerRecord
from scaler.scheduler.core.quotas import reason_words
from scaler.scheduler.core.task_state import TaskState

#: Characters of a job's owning CURVE key (z85, 40 in all) the monitor shows: enough to tell keys apart.
OWNER_KEY_SHOWN = 10


class ViewBuilder:
    def __init__(self, state: CoreState, actors: Actors) -> None:
        self._state = state
        self._actors = actors
        self.shell_stats = ShellStats(0.0, 0, 0, 0, 0, 0)
        self._cached: tuple[int, m.StatusSnapshot] | None = None

    def view(self) -> m.StatusSnapshot:
        state = self._state
        if self._cached is None or self._cached[0] != state.steps:
            self._cached = (state.steps, self._build())
        return self._cached[1]

    def _build(self) -> m.StatusSnapshot:
        state, shell = self._state, self.shell_stats
        live = state.tasks.live_counts
        stats = m.SchedulerStats(
            address=state.settings.scheduler_address,
            cpu_percent=shell.cpu_percent,
            rss_bytes=shell.rss_bytes,
            queued=live[TaskState.QUEUED] + live[TaskState.WAITING],
            running=live[TaskState.DISPATCHED] + live[TaskState.CANCELING],
            succeeded=state.tasks.succeeded,
            failed=state.tasks.failed,
            canceled=state.tasks.canceled,
            worker_died=state.tasks.worker_died,
            object_count=shell.object_count,
            object_bytes=shell.object_bytes,
            messages_received=shell.messages_received,
            messages_sent=shell.messages_sent,
            graphs=len(state.graphs),
            not_found=state.tasks.not_found,
            near_data=state.object_hosts.near_data,
            away_from_data=state.object_hosts.away_from_data,
        )
        return m.StatusSnapshot(
            time=state.now,
            scheduler=stats,
            workers=tuple(self._worker(worker) for worker in state.workers.values()),
            clients=self._clients(),
            managers=tuple(self._manager(manager) for manager in state.managers.values()),
            pending=self._groups(),
            wall_time=state.wall_time,
            functions=tuple(
                m.FunctionSummary(name, _counts(counts)) for name, counts in sorted(state.tasks.function_counts.items())
            ),
            message_counts=shell.message_counts,
            run_times=state.tasks.run_times.estimates(),
            jobs=tuple(self._job(job) for _, job in sorted(state.jobs.jobs.items())),
            client_loads=self._client_loads(),
            actors=self._actors.summaries(),
            storage=shell.storage,
        )

    def _client_loads(self) -> tuple[m.ClientLoad, ...]:
        state, queue = self._state, self._state.tasks.queue
        loads = []
        for client, running, queued in queue.client_loads():
            record = state.clients.get(PeerID(client))
            budget = record.max_cost_per_hour if record is not None else 0.0
            share = queue.shares.get(client, 1.0)
            loads.append(m.ClientLoad(client, share, running, tuple(sorted(queued.items())), budget))
        return tuple(loads)

    def _job(self, job: JobRecord) -> m.JobSummary:
        state = self._state
        return m.JobSummary(
            job.name,
            job.state,
            len(job.answers),
            len(job.task_ids),
            PeerID(job.submitter) in state.clients,
            job.failed,
            job.submitter_name or bytes(job.submitter).decode(errors="replace")[-12:],
            job.owner[:OWNER_KEY_SHOWN],
            max(0.0, state.now - job.opened_at),
        )

    def _worker(self, worker: WorkerRecord) -> m.WorkerSummary:
        now = self._state.now
        return m.WorkerSummary(
            worker_id=worker.peer,
            manager_id=worker.manager_id,
            capabilities=worker.capabilities,
            capacity=worker.capacity,
            assigned=len(worker.assigned),
            status=with_link_tasks(worker),
            cpu_percent=worker.cpu_percent,
            rss_bytes=worker.rss_bytes,
            last_seen_seconds_ago=max(0.0, now - worker.last_seen),
            hostname=worker.hostname,
            pid=worker.pid,
            lag_seconds=worker.round_trip_seconds,
            worker_type=worker.worker_type,
            connected_seconds_ago=max(0.0, now - worker.connected_at),
        )

    def _clients(self) -> tuple[m.ClientSummary, ...]:
        state = self._state
        summaries = []
        for peer, client in state.clients.items():
            counts = state.tasks.client_counts.get(ClientID(peer))
            live = state.tasks.live_of(ClientID(peer))
            away = max(0.0, state.now - client.last_seen) if client.is_away else 0.0
            summary = m.ClientSummary(
                peer, live, client.name, client.hostname, _counts(counts or [0] * 6), away, client.resume_seconds
            )
            summaries.append(summary)
        return tuple(summaries)

    def _manager(self, manager: ManagerRecord) -> m.ManagerSummary:
        state = self._state
        connected = sum(1 for worker in state.workers.values() if worker.manager_id == manager.manager_id)
        target = sum(entry.workers for entry in manager.last_target.entries) if manager.last_target else 0
        return m.ManagerSummary(
            manager.manager_id, manager.manager_type, manager.capabilities, manager.max_workers, connected, target,
            manager.units, manager.pending_units, manager.last_target, max(0.0, state.now - manager.last_seen),
            manager.worker_cost_per_hour, manager.boot_seconds, manager.min_workers, manager.buffer_workers,
            manager.waits, manager.held,
        )  # fmt: skip

    def _groups(self) -> tuple[m.PendingGroup, ...]:
        """Per capability set (the dispatcher's queue key): queued tasks, why they wait, running tasks; and the
        same by function, with how long each running task has held its worker."""
        state = self._state
        queue, records = state.tasks.queue, state.tasks.records
        queued = dict(queue.groups())
        running: dict[m.Capabilities, int] = {}
        #: queue key -> function name -> how long each of its running tasks has been running
        running_seconds: dict[m.Capabilities, dict[str, list[float]]] = {}
        for worker in state.workers.values():
            held = sorted(
                (record for record in map(records.get, worker.assigned) if record is not None),
                key=lambda record: (record.dispatched_at, record.sequence),
            )
            for index, record in enumerate(held):
                key = queue.key(record)
                running[key] = running.get(key, 0) + 1
                # a worker runs one task at a time: the one it got first, since it got it or finished the one before
                started = max(record.dispatched_at, worker.last_finished_at) if index == 0 else state.now
                elapsed = max(0.0, state.now - started)
                running_seconds.setdefault(key, {}).setdefault(record.traits.function_name, []).append(elapsed)
        groups = []
        held_back = queue.held_back()
        for capabilities in dict.fromkeys([*queued, *running]):
            count = queued.get(capabilities, 0)
            oldest, reason, over_quota = 0.0, "", 0
            if count:
                submitted = queue.oldest_submitted(capabilities, records)  # those held by a quota included
                if submitted is not None:
                    oldest = max(0.0, state.now - submitted)
                reason = self._waiting_reason(capabilities)
                kinds = held_back.get(capabilities, {})
                over_quota = sum(kinds.values())
                if over_quota:  # the quota first: more workers would not start these
                    reason = f"{reason_words(queue.client_quotas, kinds)}; {reason}"
            functions = _function_loads(
                queue.queued_by_function.get(capabilities, {}), running_seconds.get(capabilities, {})
            )
            groups.append(
                m.PendingGroup(capabilities, count, reason, running.get(capabilities, 0), oldest, functions, over_quota)
            )
        return tuple(groups)

    def waiting_reasons(self) -> list[tuple[m.Capabilities, str]]:
        """Why each queue key's tasks wait, as `_groups` words it, without the rest of the view."""
        queue = self._state.tasks.queue
        held_back = queue.held_back()
        reasons = []
        for capabilities, count in queue.groups():
            if count:
                reason = self._waiting_reason(capabilities)
                kinds = held_back.get(capabilities, {})
                if sum(kinds.values()):
                    reason = f"{reason_words(queue.client_quotas, kinds)}; {reason}"
                reasons.append((capabilities, reason))
        return reasons

    def _waiting_reason(self, capabilities: m.Capabilities) -> str:
        """Why queued tasks wait. A worker whose processors have not said hello on their links yet takes no task and
        is not counted, as clients are told (`ready_worker_count`): a task that waits for a capability until such a
        worker has started waits for one reason, not a second one for the moments its processors start."""
        state = self._state
        able = [worker for worker in state.workers.values() if worker.links and worker.can_run(capabilities)]
        managers = [manager for manager in state.managers.values() if covers(manager.capabilities, capabilities)]
        starting = sum(manager.pending_units for manager in managers)
        queued = _queued_units(managers)
        if not able:
            booting = f"; a worker manager is starting {starting} unit(s)" if starting else ""
            if not state.workers:
                return "no worker is connected" + booting + queued
            return f"no connected worker has the capabilities {capability_needs(capabilities)}" + booting + queued
        more = f"; {starting} more unit(s) starting" if starting else ""
        return "all workers that can run them are busy" + more + queued


def _queued_units(managers: list[ManagerRecord]) -> str:
    """` (3 unit(s) of slurm wait in its provider's queue: Resources)`: the managers' units their providers keep
    waiting, with the reasons."""
    parts = [
        f"{sum(wait.units for wait in manager.waits)} unit(s) of {manager.manager_id} wait in its provider's queue: "
        + ", ".join(wait.reason for wait in manager.waits)
        for manager in managers
        if manager.waits
    ]
    return f" ({'; '.join(parts)})" if parts else ""


def with_link_tasks(worker: WorkerRecord) -> m.WorkerStatus:
    """Its status as its agent reports it, with the tasks on its processors' links added: the agent never sees those
    (docs/architecture.md, "One route"), the scheduler sent each on a link and knows where it stands. On each link: one
    task computes while any is not parked (running), those staged behind it wait (queued), the parked ones wait on
    nested futures (blocked). So the monitor feed, `scaler_top`, the dashboard and `/metrics` show a busy worker
    busy."""
    status = worker.status
    running = queued = blocked = 0
    for link in worker.links:
        parked = link.parked
        waiting = link.unparked
        if waiting > 0:
            running += 1
            queued += waiting - 1
        blocked += parked
    if not (running or queued or blocked):
        return status
    return dataclasses.replace(
        status, queued=status.queued + queued, running=status.running + running, blocked=status.blocked + blocked
    )


def _function_loads(queued: dict[str, int], running_seconds: dict[str, list[float]]) -> tuple[m.FunctionLoad, ...]:
    names = sorted({*queued, *running_seconds})
    return tuple(
        m.FunctionLoad(name, queued.get(name, 0), tuple(sorted(running_seconds.get(name, ())))) for name in names
    )


def _counts(counts: list[int]) -> m.TaskCounts:
    return m.TaskCounts(*counts)
