"""What a scaling policy returns: targets per manager, its memory for next time, and warnings.

A decision maps a manager id to the `ManagerTarget` the scheduler should send it now. A manager that
is absent from the decision gets nothing (the `no` policy, or a waterfall manager without a rule).
A target with no entries means "run no workers" (the reference's empty command list).

Memory is the only state a policy keeps between two decisions. It is a frozen value the caller stores
and hands back on the next call, so `decide` stays a pure function of its inputs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from scaler.policy.snapshot import ScalingSnapshot
from scaler.protocol.messages import Capabilities, ManagerTarget, TargetEntry, WorkerLimit

ScalingDecision = dict[str, ManagerTarget]

#: (manager id, sorted capability names of a set): what the work policy keeps a level for
LevelKey = tuple[str, tuple[str, ...]]


@dataclass(frozen=True, slots=True)
class SetLevel:
    """The work policy's current target for one manager and one capability set."""

    capabilities: Capabilities  #: what the target entry carries
    workers: int  #: the target last computed (sent or not)
    surplus_since: float | None = None  #: snapshot time since which the need has been below `workers`
    surplus_peak: int = 0  #: the highest need seen since then: the level to step down to
    idle_since: float | None = None  #: snapshot time since which the need has been zero


@dataclass(frozen=True, slots=True)
class ScalingMemory:
    """What a policy remembers between decisions. Stateless policies hand it back unchanged."""

    #: work policy levels, sorted by key; only online managers, only levels above 0 or in a surplus
    levels: tuple[tuple[LevelKey, SetLevel], ...] = ()
    #: managers the work policy has decided for (one with no levels wants zero); only online managers
    tracked_manager_ids: frozenset[str] = frozenset()
    #: managers already warned about (waterfall: no rule); only managers still in the snapshot
    warned_manager_ids: frozenset[str] = frozenset()

    def levels_of(self, manager_id: str) -> dict[tuple[str, ...], SetLevel]:
        return {names: level for (owner, names), level in self.levels if owner == manager_id}


@dataclass(frozen=True, slots=True)
class ScalingStep:
    decision: ScalingDecision
    memory: ScalingMemory
    warnings: tuple[str, ...] = ()  #: for the caller to log; each is said once per manager
    #: manager id -> why its target is what it is ("412 tasks queued, 8 running"); shown with each change
    reasons: Mapping[str, str] = field(default_factory=dict)
    #: managers whose target a budget held below the need (the cost policy's `max_cost_per_hour`)
    capped_manager_ids: frozenset[str] = frozenset()


def clamp_workers(workers: int, max_workers: WorkerLimit) -> int:
    """Never below 0; never above `max_workers` unless it is None (unlimited)."""
    if max_workers is not None:
        workers = min(workers, max_workers)
    return max(0, workers)


def drain_order(snapshot: ScalingSnapshot, manager_id: str) -> tuple[str, ...]:
    """The manager's idle workers, best to stop first: the most recently connected first.

    Newer workers have warmed the fewest caches, and the older ones are the ones a dispatcher that
    prefers long-lived workers keeps busy. Busy workers are never listed.
    """
    idle = [worker for worker in snapshot.workers_of(manager_id) if not worker.is_busy]
    idle.sort(key=lambda worker: (-worker.connected_since, worker.worker_id))
    return tuple(worker.worker_id for worker in idle)


def make_target(
    snapshot: ScalingSnapshot, manager_id: str, entries: Iterable[tuple[Capabilities, int]]
) -> ManagerTarget:
    """A target with the non-zero entries (in the given order), the manager's drain list and its connected
    workers (the manager learns from them which of its units registered)."""
    kept = tuple(TargetEntry(capabilities, workers) for capabilities, workers in entries if workers > 0)
    connected = tuple(sorted(worker.worker_id for worker in snapshot.workers_of(manager_id)))
    return ManagerTarget(entries=kept, drain=drain_order(snapshot, manager_id), connected=connected)


def tasks_in_words(snapshot: ScalingSnapshot) -> str:
    """ "412 tasks queued, 12 running" (as the work policy says it)."""
    queued = sum(group.queued for group in snapshot.task_groups)
    return f"{queued} tasks queued, {snapshot.total_tasks - queued} running"


def target_total(target: ManagerTarget | None) -> int:
    if target is None:
        return 0
    return sum(entry.workers for entry in target.entries)


def warn_once(
    memory: ScalingMemory, snapshot: ScalingSnapshot, messages: dict[str, str]
) -> tuple[ScalingMemory, tuple[str, ...]]:
    """Emit each manager's message the first time only; forget managers that left the snapshot."""
    present = {manager.manager_id for manager in snapshot.managers}
    fresh = tuple(text for manager_id, text in sorted(messages.items()) if manager_id not in memory.warned_manager_ids)
    warned = frozenset((memory.warned_manager_ids | messages.keys()) & present)
    if warned == memory.warned_manager_ids:
        return memory, fresh
    return replace(memory, warned_manager_ids=warned), fresh
