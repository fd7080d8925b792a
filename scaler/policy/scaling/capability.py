"""`scaling=capability`: per capability-name set with tasks, max(1, ceil(tasks / tasks_per_worker)).

A manager gets an entry for every set its capabilities cover (the generic set is covered by all);
sets without tasks are left out, and a manager covering none gets an empty target (zero workers).
Entries are clamped in set order so that their sum stays within the manager's max_workers.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import ceil

from scaler.policy.capability import covers
from scaler.policy.decision import ScalingDecision, ScalingMemory, ScalingStep, make_target
from scaler.policy.scaling.capability_sets import capability_sets
from scaler.policy.snapshot import ScalingSnapshot
from scaler.protocol.messages import Capabilities


@dataclass(frozen=True, slots=True)
class CapabilityScaling:
    tasks_per_worker: int = 5

    @property
    def name(self) -> str:
        return f"capability(tasks_per_worker={self.tasks_per_worker})"

    def decide(self, snapshot: ScalingSnapshot, memory: ScalingMemory) -> ScalingStep:
        sets = capability_sets(snapshot)
        decision: ScalingDecision = {}
        reasons: dict[str, str] = {}
        for manager in snapshot.online_managers():
            room = manager.max_workers
            entries: list[tuple[Capabilities, int]] = []
            words: list[str] = []
            for capability_set in sets:
                if not covers(manager.capabilities, capability_set.capabilities):
                    continue
                workers = max(1, ceil(capability_set.tasks / self.tasks_per_worker))
                if room is not None:
                    workers = min(workers, room)
                    room -= workers
                entries.append((capability_set.capabilities, workers))
                words.append(f"{capability_set.tasks} tasks need {', '.join(capability_set.names) or 'nothing'}")
            decision[manager.manager_id] = make_target(snapshot, manager.manager_id, entries)
            load = f"{'; '.join(words)} at {self.tasks_per_worker} per worker" if words else "no tasks it can run"
            reasons[manager.manager_id] = f"{load}, capability policy"
        return ScalingStep(decision=decision, memory=memory, reasons=reasons)
