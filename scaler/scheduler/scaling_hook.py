"""Connects the scaling policies (`scaler.policy`) to the scheduler core.

`make_scaling_hook` builds the policy named by the scheduler's policy settings and wraps it in a
`ScalingHook`: on a manager's heartbeat the core asks it for that manager's target; the hook builds a
`ScalingSnapshot` from the core's state, calls `decide` (once per instant: managers heartbeating at
the same `now` share one decision), keeps the policy's memory for the next call, and logs the
policy's warnings. The `no` policy gets no hook at all, so a scheduler without scaling behaves exactly
as one that never heard of policies.

Cost per decision: one pass over the queue's capability groups, the workers (with their assigned task
ids) and the managers; never a walk over all tasks.
"""

from __future__ import annotations

import logging

from scaler.policy.decision import ScalingMemory, ScalingStep
from scaler.policy.protocols import ScalingPolicy
from scaler.policy.registry import PolicyConfig, make_policy
from scaler.policy.scaling import NoScaling
from scaler.policy.snapshot import ManagerView, ScalingSnapshot, TaskGroup, WorkerView
from scaler.protocol.messages import Capabilities, ManagerTarget
from scaler.scheduler.core.peers import ManagerRecord
from scaler.scheduler.core.scheduler_core import ScalingHook, SchedulerCore

logger = logging.getLogger(__name__)


def policy_config(engine_type: str, content: str) -> PolicyConfig:
    """The policy the settings name; a ValueError carrying the policy's message when they are wrong."""
    try:
        return make_policy(engine_type, content)
    except ValueError:
        raise
    except (TypeError, KeyError) as error:
        raise ValueError(f"invalid scaling policy ({engine_type}: {content!r}): {error}") from None


def allocation_policy(engine_type: str, content: str) -> str:
    """The dispatcher's allocation: "even_load" or "capability"."""
    return policy_config(engine_type, content).allocate


def make_scaling_hook(engine_type: str, content: str) -> ScalingHook | None:
    """The hook the scheduler core calls on manager heartbeats; None when the policy never scales."""
    policy = policy_config(engine_type, content).scaling
    if isinstance(policy, NoScaling):
        return None
    logger.info("scaling policy: %s", policy.name)
    return PolicyScalingHook(policy)


class PolicyScalingHook:
    def __init__(self, policy: ScalingPolicy) -> None:
        self.policy = policy
        self.memory = ScalingMemory()
        #: (core step, manager ids) of the cached decision: managers asking within one step of the core share it
        self._step_key: tuple[int, frozenset[str]] | None = None
        self._step: ScalingStep | None = None
        self.warnings_seen: dict[str, None] = {}  #: every distinct warning of the policy, in order (simulations)

    def targets(self, core: SchedulerCore, manager: ManagerRecord) -> ManagerTarget | None:
        key = (core.steps, frozenset(record.manager_id for record in core.managers.values()))
        if self._step is None or key != self._step_key:
            step = self.policy.decide(build_snapshot(core), self.memory)
            self.memory = step.memory
            for warning in step.warnings:
                if warning not in self.warnings_seen:
                    self.warnings_seen[warning] = None
                logger.warning("scaling: %s", warning)
            self._step, self._step_key = step, key
        return self._step.decision.get(manager.manager_id)


def build_snapshot(core: SchedulerCore) -> ScalingSnapshot:
    """The policy's view of the core's state at `core.now`.

    Tasks are grouped by the dispatch queue's key: their capabilities, or one wildcard group when the
    allocation is `even_load` (which ignores capabilities, so scaling does too). Running counts come
    from the workers' assigned task ids; graph nodes waiting for their dependencies are not counted.
    """
    now, table = core.now, core.tasks
    queue, records = table.queue, table.records
    queued: dict[Capabilities, int] = dict(queue.groups())
    running: dict[Capabilities, int] = {}
    workers = []
    for worker in core.workers.values():
        for task_id in worker.assigned:
            record = records.get(task_id)
            if record is not None:
                key = queue.key(record)
                running[key] = running.get(key, 0) + 1
        workers.append(
            WorkerView(
                worker_id=worker.peer.decode(errors="replace"),
                manager_id=worker.manager_id,
                capabilities=worker.capabilities,
                capacity=worker.capacity,
                assigned=len(worker.assigned),
                connected_since=worker.connected_at,
            )
        )
    groups = []
    for capabilities in dict.fromkeys([*queued, *running]):
        oldest = 0.0
        if queued.get(capabilities):
            head = queue.peek(capabilities, records)  # the next task to dispatch: highest priority, then oldest
            if head is not None:
                oldest = max(0.0, now - records[head[2]].submitted_at)
        groups.append(TaskGroup(capabilities, queued.get(capabilities, 0), running.get(capabilities, 0), oldest))
    managers = tuple(
        ManagerView(
            manager_id=record.manager_id,
            capabilities=record.capabilities,
            max_workers=record.max_workers,
            last_target=record.last_target,
            seconds_since_heartbeat=max(0.0, now - record.last_seen),
        )
        for record in core.managers.values()
    )
    return ScalingSnapshot(
        now=now,
        task_groups=tuple(groups),
        workers=tuple(workers),
        managers=managers,
        manager_timeout_seconds=core.settings.manager_timeout_seconds,
    )
