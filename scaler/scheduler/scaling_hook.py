"""Connects the scaling policies (`scaler.policy`) to the scheduler core.

`make_scaling_hook` builds the policy named by the scheduler's policy settings and wraps it in a
`ScalingHook`: on a manager's heartbeat the core asks it for that manager's target, handing it the
core's frozen view (never the core itself); the hook derives a `ScalingSnapshot` from the view, calls
`decide` (once per view: managers asking within one step of the core share one decision), keeps the
policy's memory for the next call, and logs the policy's warnings. Whatever the policy decided, a manager keeps
its busy workers (`keep_busy_workers`) and its warm capacity (`keep_warm_capacity`: `min_workers`,
`buffer_workers`, declared in the manager's hello), so every policy respects both; and a manager whose declared
workers are the only ones big enough for queued tasks that ran out of memory elsewhere starts one
(`make_room_for_outgrown`), since `vanilla` and `work` never read capabilities. The `no` policy gets no hook at
all, so a scheduler without scaling behaves exactly as one that never heard of policies.

The policy reads a `ScalingSnapshot` derived from the core's read model (`SchedulerCore.view`, the
same view the monitor feed publishes): one pass over the queue's capability groups, the workers (with
their assigned task ids) and the managers; never a walk over all tasks.
"""

from __future__ import annotations

import logging

from scaler.policy.capability import PRESENT, capability_names, covers, memory_needed, offered_memory, offers_enough
from scaler.policy.content import Allocation
from scaler.policy.decision import ScalingMemory, ScalingStep
from scaler.policy.protocols import ScalingPolicy
from scaler.policy.registry import ResolvedPolicy, make_policy
from scaler.policy.scaling import NoScaling
from scaler.policy.snapshot import scaling_snapshot
from scaler.protocol.messages import ManagerSummary, ManagerTarget, PendingGroup, StatusSnapshot, TargetEntry
from scaler.scheduler.core.scheduler_core import ScalingHook

logger = logging.getLogger(__name__)


def policy_config(engine_type: str, content: str) -> ResolvedPolicy:
    """The policy the settings name; a ValueError carrying the policy's message when they are wrong."""
    try:
        return make_policy(engine_type, content)
    except ValueError:
        raise
    except (TypeError, KeyError) as error:
        raise ValueError(f"invalid scaling policy ({engine_type}: {content!r}): {error}") from None


def allocation_policy(engine_type: str, content: str) -> Allocation:
    """The dispatcher's allocation the policy settings name."""
    return policy_config(engine_type, content).allocate


def make_scaling_hook(engine_type: str, content: str, manager_timeout_seconds: float = 10.0) -> ScalingHook | None:
    """The hook the scheduler core calls on manager heartbeats; None when the policy never scales.
    `manager_timeout_seconds`: the scheduler's; a manager silent that long gets no workers from the policy."""
    return scaling_hook_of(policy_config(engine_type, content), manager_timeout_seconds)


def scaling_hook_of(config: ResolvedPolicy, manager_timeout_seconds: float = 10.0) -> ScalingHook | None:
    """`make_scaling_hook` for a policy already parsed (the scheduler parses its policy settings once)."""
    policy = config.scaling
    if isinstance(policy, NoScaling):
        return None
    logger.info("scaling policy: %s", policy.name)
    return PolicyScalingHook(policy, manager_timeout_seconds)


class PolicyScalingHook:
    def __init__(self, policy: ScalingPolicy, manager_timeout_seconds: float = 10.0) -> None:
        self.policy = policy
        self.manager_timeout_seconds = manager_timeout_seconds
        self.memory = ScalingMemory()
        #: the view the cached decision was made on: the core builds one view per step, so managers asking
        #: within one step share a decision and a later step (a new view) decides again
        self._view: StatusSnapshot | None = None
        self._step: ScalingStep | None = None
        self._kept_busy: dict[str, str] = {}  #: manager id -> why its target was raised to its busy workers
        self.warnings_seen: dict[str, None] = {}  #: every distinct warning of the policy, in order (simulations)

    @property
    def is_budget_capped(self) -> bool:
        """Whether the latest decision held a manager below its need to stay within a budget."""
        return self._step is not None and bool(self._step.capped_manager_ids)

    def reason(self, manager_id: str) -> str:
        if self._step is None:
            return ""
        given = self._step.reasons.get(manager_id) or f"{self.policy.name} policy"
        kept = self._kept_busy.get(manager_id)
        return f"{given}; {kept}" if kept else given

    def targets(self, view: StatusSnapshot, manager_id: str) -> ManagerTarget | None:
        if self._step is None or view is not self._view:
            step = self.policy.decide(scaling_snapshot(view, self.manager_timeout_seconds), self.memory)
            self.memory = step.memory
            for warning in step.warnings:
                if warning not in self.warnings_seen:
                    self.warnings_seen[warning] = None
                logger.warning("scaling: %s", warning)
            self._step, self._view = step, view
            self._kept_busy = {}
        target = self._step.decision.get(manager_id)
        if target is None:
            if not _has_warm_capacity(view, manager_id):
                return None
            target = ManagerTarget(())  # a manager the policy leaves alone still keeps its warm capacity
        kept = keep_busy_workers(target, view, manager_id)
        if kept is not target:
            busy = sum(entry.workers for entry in kept.entries)
            self._kept_busy[manager_id] = f"kept at its {busy} busy workers until they finish their tasks"
        warm = keep_warm_capacity(kept, view, manager_id)
        if warm is not kept:
            workers = sum(entry.workers for entry in warm.entries)
            note = f"raised to {workers} for its warm capacity (min_workers, buffer_workers)"
            self._kept_busy[manager_id] = "; ".join(filter(None, (self._kept_busy.get(manager_id), note)))
        roomy = make_room_for_outgrown(warm, view, manager_id)
        if roomy is not warm:
            workers = sum(entry.workers for entry in roomy.entries)
            note = f"raised to {workers}: queued tasks need more memory than any connected worker has"
            self._kept_busy[manager_id] = "; ".join(filter(None, (self._kept_busy.get(manager_id), note)))
        return roomy


def keep_busy_workers(target: ManagerTarget, view: StatusSnapshot, manager_id: str) -> ManagerTarget:
    """Whatever the policy, no busy worker is stopped: a target below the manager's busy workers is raised to
    them, so a shrinking target takes idle workers (the drain list) and lets busy ones finish their tasks first
    (the policy's next decision lets them go once idle). Returns `target` itself when nothing changes."""
    busy = sum(1 for worker in view.workers if worker.manager_id == manager_id and worker.assigned > 0)
    wanted = sum(max(0, entry.workers) for entry in target.entries)
    if wanted >= busy:
        return target
    entries = list(target.entries) or [TargetEntry((), 0)]
    first = entries[0]
    entries[0] = TargetEntry(first.capabilities, first.workers + busy - wanted)
    return ManagerTarget(tuple(entries), target.drain, target.connected)


def keep_warm_capacity(target: ManagerTarget, view: StatusSnapshot, manager_id: str) -> ManagerTarget:
    """Whatever the policy, a manager keeps its warm capacity: at least `min_workers`, and `buffer_workers` idle
    ones beyond what the policy asked for the queue, never above its `max_workers`. Warm capacity is a standing
    order, spent whatever a budget says (a budget governs what is asked beyond it; the cost policies count the
    warm workers in the spend they see, so they hold back new ones instead). Returns `target` itself when nothing
    changes."""
    manager = next((manager for manager in view.managers if manager.manager_id == manager_id), None)
    if manager is None or not (manager.min_workers or manager.buffer_workers):
        return target
    wanted = sum(max(0, entry.workers) for entry in target.entries)
    warm = max(manager.min_workers, wanted + manager.buffer_workers)
    if manager.max_workers is not None:
        warm = min(warm, manager.max_workers)
    if warm <= wanted:
        return target
    entries = list(target.entries) or [TargetEntry(manager.capabilities, 0)]
    first = entries[0]
    entries[0] = TargetEntry(first.capabilities, first.workers + warm - wanted)
    return ManagerTarget(tuple(entries), target.drain, target.connected)


def make_room_for_outgrown(target: ManagerTarget, view: StatusSnapshot, manager_id: str) -> ManagerTarget:
    """Whatever the policy, queued tasks that need more memory than every connected worker offers (a task that ran
    out of memory is queued needing more than its worker had, core/memory_retry.py) get a worker from a manager
    whose declared workers have enough: its target is at least its connected workers + 1 (the one booting counts:
    the target holds while it boots), never above its `max_workers`. The capability-aware policies ask for it
    already (nothing changes then); `vanilla` and `work` read no capabilities. Returns `target` itself when
    nothing changes."""
    manager = next((manager for manager in view.managers if manager.manager_id == manager_id), None)
    if manager is None or not any(_needs_this_manager(group, manager, view) for group in view.pending):
        return target
    wanted = sum(max(0, entry.workers) for entry in target.entries)
    floor = manager.connected_workers + 1
    if manager.max_workers is not None:
        floor = min(floor, manager.max_workers)
    if wanted >= floor:
        return target
    entries = list(target.entries) or [TargetEntry(manager.capabilities, 0)]
    first = entries[0]
    entries[0] = TargetEntry(first.capabilities, first.workers + floor - wanted)
    return ManagerTarget(tuple(entries), target.drain, target.connected)


def _needs_this_manager(group: PendingGroup, manager: ManagerSummary, view: StatusSnapshot) -> bool:
    """Queued tasks that need a memory quantity no connected worker offers, and that the manager's workers cover."""
    if (
        not group.count
        or memory_needed(group.capabilities) == PRESENT
        or not covers(manager.capabilities, group.capabilities)
    ):
        return False
    return not any(
        offers_enough(
            capability_names(worker.capabilities),
            offered_memory(worker.capabilities, worker.status.memory_limit_bytes),
            group.capabilities,
        )
        for worker in view.workers
    )


def _has_warm_capacity(view: StatusSnapshot, manager_id: str) -> bool:
    return any(m.manager_id == manager_id and (m.min_workers or m.buffer_workers) for m in view.managers)
