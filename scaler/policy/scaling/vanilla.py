"""`scaling=vanilla`: one wildcard target per manager from the cluster's task-to-worker ratio.

Per online manager, with T = all tasks (queued + running), W = all connected workers and C = this
manager's workers: W = 0 -> C+1 if T > 0 else C; T/W > upper -> C+1; T/W < lower -> 0 if T = 0 else
max(1, ceil(T/upper)); otherwise C. Clamped to the manager's max_workers, never below 0. So ramp-up
is one worker per manager heartbeat, and scale-down may ask for fewer workers than are busy.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import ceil

from scaler.policy.decision import ScalingDecision, ScalingMemory, ScalingStep, clamp_workers, make_target
from scaler.policy.snapshot import ScalingSnapshot


@dataclass(frozen=True, slots=True)
class VanillaScaling:
    upper_ratio: float = 10.0
    lower_ratio: float = 1.0

    @property
    def name(self) -> str:
        return f"vanilla(upper_ratio={self.upper_ratio:g}, lower_ratio={self.lower_ratio:g})"

    def decide(self, snapshot: ScalingSnapshot, memory: ScalingMemory) -> ScalingStep:
        tasks = snapshot.total_tasks
        all_workers = len(snapshot.workers)
        decision: ScalingDecision = {}
        reasons: dict[str, str] = {}
        for manager in snapshot.online_managers():
            current = len(snapshot.workers_of(manager.manager_id))
            wanted, why = self.explain(tasks, all_workers, current)
            workers = clamp_workers(wanted, manager.max_workers)
            decision[manager.manager_id] = make_target(snapshot, manager.manager_id, [((), workers)])
            capped = f" (capped at {manager.max_workers})" if workers < wanted else ""
            reasons[manager.manager_id] = f"{why}{capped}, vanilla policy"
        return ScalingStep(decision=decision, memory=memory, reasons=reasons)

    def explain(self, tasks: int, all_workers: int, current: int) -> tuple[int, str]:
        """The manager's wanted workers, and why in words."""
        if all_workers == 0:
            return (current + 1, f"{tasks} tasks and no worker: one more") if tasks > 0 else (current, "no tasks")
        ratio = tasks / all_workers
        load = f"{tasks} tasks on {all_workers} workers ({ratio:.3g} per worker"
        if ratio > self.upper_ratio:
            return current + 1, f"{load}, above {self.upper_ratio:g}): one more"
        if ratio < self.lower_ratio:
            if tasks == 0:
                return 0, "no tasks"
            wanted = max(1, ceil(tasks / self.upper_ratio))
            # the formula's count, which may be more than this manager has (its own count is not its base here)
            to = "shrink" if wanted < current else "grow" if wanted > current else "keep"
            return wanted, f"{load}, below {self.lower_ratio:g}): {to} to {wanted}, {self.upper_ratio:g} tasks each"
        return current, f"{load}): keep"
