"""Connects the scaling policies (`scaler.policy`) to the scheduler core.

`make_scaling_hook` builds the policy named by the scheduler's policy settings and wraps it in a
`ScalingHook`: on a manager's heartbeat the core asks it for that manager's target; the hook builds a
`ScalingSnapshot` from the core's state, calls `decide` (once per instant: managers heartbeating at
the same `now` share one decision), keeps the policy's memory for the next call, and logs the
policy's warnings. The `no` policy gets no hook at all, so a scheduler without scaling behaves exactly
as one that never heard of policies.

The policy reads a `ScalingSnapshot` derived from the core's read model (`SchedulerCore.view`, the
same view the monitor feed publishes): one pass over the queue's capability groups, the workers (with
their assigned task ids) and the managers; never a walk over all tasks.
"""

from __future__ import annotations

import logging

from scaler.policy.decision import ScalingMemory, ScalingStep
from scaler.policy.protocols import ScalingPolicy
from scaler.policy.registry import PolicyConfig, make_policy
from scaler.policy.scaling import NoScaling
from scaler.policy.snapshot import ScalingSnapshot, scaling_snapshot
from scaler.protocol.messages import ManagerTarget
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

    def reason(self, manager: ManagerRecord) -> str:
        if self._step is None:
            return ""
        given = self._step.reasons.get(manager.manager_id)
        return given if given else f"{self.policy.name} policy"

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
    """The policy's view of the core at `core.now`, derived from the core's read model."""
    return scaling_snapshot(core.view(), core.settings.manager_timeout_seconds)
