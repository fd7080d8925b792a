"""The seam between the core and the scaling policy, and the log of the decisions it makes.

The core asks its `ScalingHook` for a manager's target, handing it the `SchedulerView`; the hook (in
`scheduler/scaling_hook.py`) derives the policy's snapshot from the view. A target whose wanted
workers differ from the previous one is a scaling decision, recorded with the policy's reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from scaler.protocol.feed import ScalingDecision, SchedulerView
from scaler.protocol.messages import ManagerTarget


@dataclass(frozen=True, slots=True)
class TargetDecision:
    target: ManagerTarget
    reason: str = ""  #: why, for the decision log: "412 tasks queued"
    policy: str = ""  #: the policy's short name: "work"


class ScalingHook(Protocol):
    """What the core needs from the scaling policy: a manager's target, given the view of the core."""

    def targets(self, view: SchedulerView, manager_id: str) -> TargetDecision | None: ...


def is_a_decision(before: ManagerTarget | None, after: ManagerTarget) -> bool:
    """A first target, or other wanted workers (a changed drain list alone is not a decision)."""
    return before is None or before.entries != after.entries


def decision_record(
    manager_id: str, before: ManagerTarget | None, decision: TargetDecision, connected_workers: int, wall_time: float
) -> ScalingDecision:
    """Before the first target, the manager's connected workers are what the decision changes."""
    workers_before = connected_workers if before is None else sum(entry.workers for entry in before.entries)
    workers_after = sum(entry.workers for entry in decision.target.entries)
    return ScalingDecision(wall_time, manager_id, decision.policy, workers_before, workers_after, decision.reason)
