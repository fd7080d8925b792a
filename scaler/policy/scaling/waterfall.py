"""`waterfall_v1`: a priority ladder of managers; cheap tiers fill first and drain last.

With tasks: per capability-name set, total = max(1, ceil(tasks / tasks_per_worker)), filled down the
rules in ascending priority. A manager takes min(what is left, its room), where its room starts at
min(rule max, manager max_workers) and is shared by all sets (most specific sets first). Only online
managers whose capabilities cover the set take part; offline or unknown managers are skipped.

Without tasks: a manager keeps its current worker count while any lower-priority (larger number)
online manager still has workers, so the expensive tiers drain first; otherwise its target is 0.

Managers without a rule get no target at all, and one warning each.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import ceil

from scaler.policy.capability import covers
from scaler.policy.content import WaterfallRule
from scaler.policy.decision import (
    ScalingDecision,
    ScalingMemory,
    ScalingStep,
    clamp_workers,
    make_target,
    tasks_in_words,
    warn_once,
)
from scaler.policy.scaling.capability_sets import capability_sets, most_specific_first
from scaler.policy.snapshot import ManagerView, ScalingSnapshot
from scaler.protocol.messages import Capabilities, WorkerLimit

Tier = tuple[WaterfallRule, ManagerView]


@dataclass(frozen=True, slots=True)
class WaterfallScaling:
    rules: tuple[WaterfallRule, ...]  #: ascending priority
    tasks_per_worker: int = 10

    @property
    def name(self) -> str:
        ladder = "; ".join(f"{rule.priority}:{rule.manager_id}" for rule in self.rules)
        return f"waterfall_v1({ladder}; tasks_per_worker={self.tasks_per_worker})"

    def decide(self, snapshot: ScalingSnapshot, memory: ScalingMemory) -> ScalingStep:
        online = {manager.manager_id: manager for manager in snapshot.online_managers()}
        tiers = [(rule, online[rule.manager_id]) for rule in self.rules if rule.manager_id in online]
        if snapshot.total_tasks == 0:
            decision = self._drain_lowest_tiers_first(snapshot, tiers)
            reasons = {
                manager_id: "no tasks: kept until the later tiers have drained, waterfall_v1 policy"
                if target.entries
                else "no tasks, waterfall_v1 policy"
                for manager_id, target in decision.items()
            }
        else:
            decision = self._fill_in_priority_order(snapshot, tiers)
            load = f"{tasks_in_words(snapshot)} at {self.tasks_per_worker} per worker, tiers filled in priority order"
            reasons = dict.fromkeys(decision, f"{load}, waterfall_v1 policy")
        ruled = {rule.manager_id for rule in self.rules}
        unruled = {
            manager.manager_id: f"worker manager {manager.manager_id!r} has no waterfall_v1 rule; it gets no target"
            for manager in snapshot.managers
            if manager.manager_id not in ruled
        }
        memory, warnings = warn_once(memory, snapshot, unruled)
        return ScalingStep(decision=decision, memory=memory, warnings=warnings, reasons=reasons)

    def _fill_in_priority_order(self, snapshot: ScalingSnapshot, tiers: list[Tier]) -> ScalingDecision:
        room = {manager.manager_id: _effective_cap(rule, manager) for rule, manager in tiers}
        entries: dict[str, list[tuple[Capabilities, int]]] = {manager.manager_id: [] for _rule, manager in tiers}
        for capability_set in most_specific_first(capability_sets(snapshot)):
            remaining = max(1, ceil(capability_set.tasks / self.tasks_per_worker))
            for _rule, manager in tiers:
                if remaining == 0:
                    break
                if not covers(manager.capabilities, capability_set.capabilities):
                    continue
                manager_room = room[manager.manager_id]
                workers = remaining if manager_room is None else min(remaining, manager_room)
                if manager_room is not None:
                    room[manager.manager_id] = manager_room - workers
                remaining -= workers
                entries[manager.manager_id].append((capability_set.capabilities, workers))
        return {manager_id: make_target(snapshot, manager_id, listed) for manager_id, listed in entries.items()}

    def _drain_lowest_tiers_first(self, snapshot: ScalingSnapshot, tiers: list[Tier]) -> ScalingDecision:
        decision: ScalingDecision = {}
        for rule, manager in tiers:
            is_lower_tier_running = any(
                other_rule.priority > rule.priority and snapshot.workers_of(other.manager_id)
                for other_rule, other in tiers
            )
            current = len(snapshot.workers_of(manager.manager_id))
            workers = clamp_workers(current if is_lower_tier_running else 0, _effective_cap(rule, manager))
            decision[manager.manager_id] = make_target(snapshot, manager.manager_id, [((), workers)])
        return decision


def _effective_cap(rule: WaterfallRule, manager: ManagerView) -> WorkerLimit:
    if rule.max_workers is None:
        return manager.max_workers
    if manager.max_workers is None:
        return rule.max_workers
    return min(rule.max_workers, manager.max_workers)
