"""Connects the scaling policies (`scaler.policy`) to the scheduler core.

`make_scaling_hook` builds the policy named by the scheduler's policy settings and wraps it in a
`ScalingHook`: on a manager's heartbeat (and on ticks) the core asks it for that manager's target,
handing it the `SchedulerView`; the hook derives the policy's `ScalingSnapshot` from the view, calls
`decide` once per view (the managers asked during one tick share one decision), keeps the policy's
memory for the next call, logs the policy's warnings, and returns the target with the policy's reason.
The `no` policy gets no hook at all, so a scheduler without scaling behaves exactly as one that never
heard of policies.
"""

from __future__ import annotations

import logging

from scaler.policy.decision import ScalingMemory, ScalingStep
from scaler.policy.protocols import ScalingPolicy
from scaler.policy.registry import PolicyConfig, make_policy
from scaler.policy.scaling import NoScaling
from scaler.policy.snapshot import ManagerView, ScalingSnapshot, TaskGroup, WorkerView
from scaler.protocol.feed import SchedulerView
from scaler.protocol.messages import ManagerTarget
from scaler.scheduler.core.scaling_targets import ScalingHook, TargetDecision

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
        self.policy_name = policy.name.split("(", 1)[0]  #: "work(tasks_per_worker=1, ...)" -> "work"
        self.memory = ScalingMemory()
        #: the view the cached step was decided from: the core builds one per event, so all the managers
        #: asked during one event (a tick) share one decision, and any change of state means a new one
        self._step_view: SchedulerView | None = None
        self._step: ScalingStep | None = None

    def targets(self, view: SchedulerView, manager_id: str) -> TargetDecision | None:
        if self._step is None or view is not self._step_view:
            step = self.policy.decide(scaling_snapshot(view), self.memory)
            self.memory = step.memory
            for warning in step.warnings:
                logger.warning("scaling: %s", warning)
            self._step, self._step_view = step, view
        target = self._step.decision.get(manager_id)
        if target is None:
            return None
        return TargetDecision(target, self._step.reasons.get(manager_id, ""), self.policy_name)


def scaling_snapshot(view: SchedulerView) -> ScalingSnapshot:
    """The policy's part of the view: task groups, workers (by the id drain lists use), managers."""
    now = view.now
    return ScalingSnapshot(
        now=now,
        task_groups=tuple(
            TaskGroup(group.capabilities, group.queued, group.running, group.oldest_queued_seconds)
            for group in view.groups
        ),
        workers=tuple(
            WorkerView(
                worker_id=worker.worker_id.decode(errors="replace"),
                manager_id=worker.manager_id,
                capabilities=worker.capabilities,
                capacity=worker.capacity,
                assigned=worker.assigned,
                connected_since=now - worker.connected_seconds,
            )
            for worker in view.workers
        ),
        managers=tuple(
            ManagerView(
                manager_id=manager.manager_id,
                capabilities=manager.capabilities,
                max_workers=manager.max_workers,
                last_target=None if manager.target is None else ManagerTarget(manager.target),
                seconds_since_heartbeat=manager.seconds_since_heartbeat,
            )
            for manager in view.managers
        ),
        manager_timeout_seconds=view.manager_timeout_seconds,
    )
