"""`waterfall_v1`: a priority ladder of managers; cheap tiers fill first and drain last.

With tasks: per capability-name set, total = max(1, ceil(tasks / tasks_per_worker)), filled down the
rules in ascending priority. A manager takes min(what is left, its room), where its room starts at
min(rule max, manager max_workers) and is shared by all sets (most specific sets first). Only online
managers whose capabilities cover the set take part; offline or unknown managers are skipped.

Without tasks: a manager keeps its current worker count while any lower-priority (larger number)
online manager still has workers, so the expensive tiers drain first; otherwise its target is 0.

Managers without a rule get no target at all, and one warning each.

Prices: managers of equal priority fill cheapest first (their declared `worker_cost_per_hour`; equal prices
keep the written order). With `max_cost_per_hour`, while the targets cost more than that together, the last
tier (the largest priority number, the dearest within it) gives up workers first, never busy ones; the work
queues, and the trimmed managers' reasons say the budget is why.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import ceil

from scaler.policy.capability import covers
from scaler.policy.content import WaterfallRule
from scaler.policy.decision import (
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
#: manager id -> (capabilities, workers) entries of its target
Entries = dict[str, list[tuple[Capabilities, int]]]


@dataclass(frozen=True, slots=True)
class WaterfallScaling:
    rules: tuple[WaterfallRule, ...]  #: ascending priority
    tasks_per_worker: int = 10
    max_cost_per_hour: float | None = None  #: the most the tiers' workers may cost per hour together

    @property
    def name(self) -> str:
        ladder = "; ".join(f"{rule.priority}:{rule.manager_id}" for rule in self.rules)
        budget = "" if self.max_cost_per_hour is None else f"; max_cost_per_hour={self.max_cost_per_hour:g}"
        return f"waterfall_v1({ladder}; tasks_per_worker={self.tasks_per_worker}{budget})"

    def decide(self, snapshot: ScalingSnapshot, memory: ScalingMemory) -> ScalingStep:
        online = {manager.manager_id: manager for manager in snapshot.online_managers()}
        tiers = [(rule, online[rule.manager_id]) for rule in self.rules if rule.manager_id in online]
        tiers.sort(key=lambda tier: (tier[0].priority, tier[1].worker_cost_per_hour))  # stable: written order
        if snapshot.total_tasks == 0:
            entries = self._drain_lowest_tiers_first(snapshot, tiers)
            reasons = {
                manager_id: "no tasks: kept until the later tiers have drained, waterfall_v1 policy"
                if any(workers for _caps, workers in listed)
                else "no tasks, waterfall_v1 policy"
                for manager_id, listed in entries.items()
            }
        else:
            entries = self._fill_in_priority_order(snapshot, tiers)
            load = f"{tasks_in_words(snapshot)} at {self.tasks_per_worker} per worker, tiers filled in priority order"
            reasons = dict.fromkeys(entries, f"{load}, waterfall_v1 policy")
        capped = self._within_budget(snapshot, tiers, entries)  #: manager id -> workers the budget held back
        for manager_id, cut in capped.items():
            reasons[manager_id] += (
                f"; budget: {cut} worker(s) held back, the tiers' workers would cost more than "
                f"max_cost_per_hour={self.max_cost_per_hour:g}; the work queues instead"
            )
        decision = {manager_id: make_target(snapshot, manager_id, listed) for manager_id, listed in entries.items()}
        ruled = {rule.manager_id for rule in self.rules}
        unruled = {
            manager.manager_id: f"worker manager {manager.manager_id!r} has no waterfall_v1 rule; it gets no target"
            for manager in snapshot.managers
            if manager.manager_id not in ruled
        }
        memory, warnings = warn_once(memory, snapshot, unruled)
        return ScalingStep(decision, memory, warnings, reasons, frozenset(capped))

    def _within_budget(self, snapshot: ScalingSnapshot, tiers: list[Tier], entries: Entries) -> dict[str, int]:
        """Trim the last tiers first until the targets fit `max_cost_per_hour` (never below busy workers); the
        workers cut per manager."""
        budget = self.max_cost_per_hour
        if budget is None:
            return {}
        totals = {manager_id: sum(workers for _caps, workers in listed) for manager_id, listed in entries.items()}
        spend = sum(totals[manager.manager_id] * manager.worker_cost_per_hour for _rule, manager in tiers)
        cuts: dict[str, int] = {}
        for _rule, manager in reversed(tiers):
            cost = manager.worker_cost_per_hour
            if spend <= budget + 1e-9 or cost <= 0:
                continue
            busy = sum(1 for worker in snapshot.workers_of(manager.manager_id) if worker.is_busy)
            keep = max(busy, totals[manager.manager_id] - ceil((spend - budget) / cost - 1e-9))
            cut = totals[manager.manager_id] - keep
            if cut <= 0:
                continue
            entries[manager.manager_id] = _trimmed(entries[manager.manager_id], cut)
            spend -= cut * cost
            cuts[manager.manager_id] = cut
        return cuts

    def _fill_in_priority_order(self, snapshot: ScalingSnapshot, tiers: list[Tier]) -> Entries:
        room = {manager.manager_id: _effective_cap(rule, manager) for rule, manager in tiers}
        entries: Entries = {manager.manager_id: [] for _rule, manager in tiers}
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
        return entries

    def _drain_lowest_tiers_first(self, snapshot: ScalingSnapshot, tiers: list[Tier]) -> Entries:
        entries: Entries = {}
        for rule, manager in tiers:
            is_lower_tier_running = any(
                other_rule.priority > rule.priority and snapshot.workers_of(other.manager_id)
                for other_rule, other in tiers
            )
            current = len(snapshot.workers_of(manager.manager_id))
            workers = clamp_workers(current if is_lower_tier_running else 0, _effective_cap(rule, manager))
            entries[manager.manager_id] = [((), workers)]
        return entries


def _effective_cap(rule: WaterfallRule, manager: ManagerView) -> WorkerLimit:
    if rule.max_workers is None:
        return manager.max_workers
    if manager.max_workers is None:
        return rule.max_workers
    return min(rule.max_workers, manager.max_workers)


def _trimmed(listed: list[tuple[Capabilities, int]], cut: int) -> list[tuple[Capabilities, int]]:
    """The entries with `cut` workers fewer, taken from the last entries first."""
    kept: list[tuple[Capabilities, int]] = []
    for capabilities, workers in reversed(listed):
        taken = min(cut, workers)
        cut -= taken
        kept.append((capabilities, workers - taken))
    return list(reversed(kept))
