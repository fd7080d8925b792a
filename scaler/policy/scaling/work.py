"""`scaling=work`: ask for the outstanding work in one step; give workers back only after a cooldown.

Need: per capability-name set, ceil((queued + running) / tasks_per_worker) workers. With
`target_finish_seconds` T, the need is ceil(outstanding work seconds / T) instead (`outstanding_work`: learned
run times, and an estimate for functions not seen finish yet): at least 1, and never more than the count by
tasks (a task runs on one worker). So many short tasks share a few workers, and long ones get one each.

Spread over the online managers that cover the set, most specific sets first, in two passes:
1. keep work where workers already are: each manager (in id order) takes up to what it holds
   (connected workers, or its last target if larger: launches in flight count);
2. the rest fills managers in id order, each up to its remaining `max_workers`.
So a stable load never moves between managers, and a new load lands on the first manager by id.

Level: up at once to the need; down only when the need has stayed below the level for
`cooldown_seconds`, and then only to the highest need seen during that time plus a noise margin
(see `step_down_to`); the next step down needs another full cooldown. A set with no work at all
for a full cooldown goes to zero in one step. A manager's total never drops
below its busy workers and never exceeds its `max_workers`. The levels live in `ScalingMemory`, so a
decision that is computed but not sent (the scheduler sends only the heartbeating manager's target)
still counts, and a departed manager's levels are forgotten with it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from math import ceil, isqrt

from scaler.policy.capability import covers
from scaler.policy.decision import (
    LevelKey,
    ScalingDecision,
    ScalingMemory,
    ScalingStep,
    SetLevel,
    clamp_workers,
    make_target,
    target_total,
)
from scaler.policy.outstanding_work import UNKNOWN_TASK_SECONDS, RunTimeTable, outstanding_seconds
from scaler.policy.scaling.capability_sets import (
    CapabilityNames,
    CapabilitySet,
    capability_sets,
    most_specific_first,
    names_of,
)
from scaler.policy.snapshot import ManagerView, ScalingSnapshot
from scaler.protocol.messages import Capabilities, WorkerLimit

#: need per capability set of one manager: names -> (capabilities to carry, workers)
Needs = dict[CapabilityNames, tuple[Capabilities, int]]
Levels = dict[CapabilityNames, SetLevel]

#: Slack when dividing work seconds by T: learned run times carry float noise (20 tasks of 30.000000001 s
#: with T = 30 need 20 workers, not 21).
ROUNDING = 1e-6


@dataclass(frozen=True, slots=True)
class WorkScaling:
    tasks_per_worker: int = 1
    cooldown_seconds: float = 15.0
    #: size the need to finish the outstanding work in this long (learned run times); None: count tasks only
    target_finish_seconds: float | None = None

    @property
    def policy_word(self) -> str:
        return "work"

    @property
    def name(self) -> str:
        target = "" if self.target_finish_seconds is None else f", target_finish_seconds={self.target_finish_seconds:g}"
        return f"work(tasks_per_worker={self.tasks_per_worker}, cooldown_seconds={self.cooldown_seconds:g}{target})"

    def decide(self, snapshot: ScalingSnapshot, memory: ScalingMemory) -> ScalingStep:
        managers = sorted(snapshot.online_managers(), key=lambda manager: manager.manager_id)
        run_times = RunTimeTable.of(snapshot.run_times)
        needs = self._spread(snapshot, managers, run_times)
        levels_of: dict[str, Levels] = {}
        followed_of: dict[str, Levels] = {}  #: the levels before the busy floor: what memory keeps
        for manager in managers:
            levels = self._follow(
                snapshot,
                needs[manager.manager_id],
                _previous_levels(snapshot, manager, memory),
                self._cooldown_of(manager),
            )
            followed_of[manager.manager_id] = within_limit(levels, manager.max_workers)
            levels_of[manager.manager_id] = within_limit(_at_least_busy(snapshot, manager, levels), manager.max_workers)
        levels_of, notes = self._capped(snapshot, managers, levels_of)
        decision: ScalingDecision = {}
        reasons: dict[str, str] = {}
        kept: list[tuple[LevelKey, SetLevel]] = []
        for manager in managers:
            levels = levels_of[manager.manager_id]
            entries = [(level.capabilities, level.workers) for level in levels.values()]
            decision[manager.manager_id] = make_target(snapshot, manager.manager_id, entries)
            reason = self._reason(snapshot, run_times, needs[manager.manager_id], levels, self._cooldown_of(manager))
            note = notes.get(manager.manager_id)
            reasons[manager.manager_id] = f"{reason}; {note}" if note else reason
            kept.extend(
                ((manager.manager_id, names), level)
                for names, level in self._remembered(levels, followed_of[manager.manager_id]).items()
                if level.workers > 0 or level.surplus_since is not None
            )
        kept.sort(key=lambda item: item[0])
        tracked = frozenset(manager.manager_id for manager in managers)
        memory = replace(memory, levels=tuple(kept), tracked_manager_ids=tracked)
        return ScalingStep(decision=decision, memory=memory, reasons=reasons, capped_manager_ids=frozenset(notes))

    def _capped(
        self, snapshot: ScalingSnapshot, managers: list[ManagerView], levels_of: dict[str, Levels]
    ) -> tuple[dict[str, Levels], dict[str, str]]:
        """A last limit across managers on the levels (the cost policy's budget), with a note per manager it
        changed. The work policy has none."""
        return levels_of, {}

    def _reason(
        self, snapshot: ScalingSnapshot, run_times: RunTimeTable, needs: Needs, levels: Levels, cooldown: float
    ) -> str:
        queued = sum(group.queued for group in snapshot.task_groups)
        running = sum(group.running for group in snapshot.task_groups)
        needed = sum(workers for _capabilities, workers in needs.values())
        wanted = sum(level.workers for level in levels.values())
        text = f"{queued} tasks queued, {running} running: {needed} workers needed, {self.policy_word} policy"
        deadline = self._deadline(snapshot)
        if deadline is not None:
            seconds = outstanding_seconds(snapshot.task_groups, run_times)
            text = (
                f"{queued} tasks queued, {running} running, about {seconds:,.1f} s of work: {needed} workers "
                f"needed to finish in {deadline:g} s{self._deadline_note()}, {self.policy_word} policy"
            )
            if run_times.is_empty:
                text += (
                    f" (no task has finished yet: each counts {UNKNOWN_TASK_SECONDS:g} s, or twice the longest "
                    "running one)"
                )
        if wanted > needed:
            text += f" (keeping {wanted - needed} for the {cooldown:g} s cooldown)"
        return text

    def _deadline(self, snapshot: ScalingSnapshot) -> float | None:
        """The T the need is sized by this time; None: count tasks."""
        return self.target_finish_seconds

    def _deadline_note(self) -> str:
        """Words after the T in the reason (where it came from, when not given)."""
        return ""

    def _need(self, snapshot: ScalingSnapshot, run_times: RunTimeTable, capability_set: CapabilitySet) -> int:
        """Workers the set's tasks need: by count, or by estimated run time when `target_finish_seconds` is set."""
        by_tasks = ceil(capability_set.tasks / self.tasks_per_worker)
        if self.target_finish_seconds is None:
            return by_tasks
        groups = [group for group in snapshot.task_groups if names_of(group.capabilities) == capability_set.names]
        seconds = outstanding_seconds(groups, run_times)
        by_time = ceil(seconds / self.target_finish_seconds - ROUNDING)
        return min(by_tasks, max(1, by_time))

    def _spread(
        self, snapshot: ScalingSnapshot, managers: list[ManagerView], run_times: RunTimeTable
    ) -> dict[str, Needs]:
        room: dict[str, WorkerLimit] = {manager.manager_id: manager.max_workers for manager in managers}
        held = held_workers(snapshot, managers)
        needs: dict[str, Needs] = {manager.manager_id: {} for manager in managers}
        for capability_set in most_specific_first(capability_sets(snapshot)):
            remaining = self._need(snapshot, run_times, capability_set)
            eligible = [manager for manager in managers if covers(manager.capabilities, capability_set.capabilities)]
            for is_keeping_pass in (True, False):
                for manager in eligible:
                    manager_id = manager.manager_id
                    share = bounded(remaining, room[manager_id])
                    if is_keeping_pass:
                        share = min(share, held[manager_id])
                        held[manager_id] -= share
                    if share <= 0:
                        continue
                    remaining -= share
                    manager_room = room[manager_id]
                    room[manager_id] = None if manager_room is None else manager_room - share
                    _, before = needs[manager_id].get(capability_set.names, (capability_set.capabilities, 0))
                    needs[manager_id][capability_set.names] = (capability_set.capabilities, before + share)
        return needs

    def _remembered(self, sent: Levels, followed: Levels) -> Levels:
        """What memory keeps of the levels sent (`followed`: before the busy floor). `work` keeps what it sent: a
        worker kept because it is busy counts as a level, and its cooldown starts again."""
        return sent

    def _cooldown_of(self, manager: ManagerView) -> float:
        """How long a surplus must last before the manager's level comes down."""
        return self.cooldown_seconds

    def _follow(self, snapshot: ScalingSnapshot, needs: Needs, previous: Levels, cooldown: float) -> Levels:
        """Each set's new level: up to the need at once, down after a full cooldown of surplus."""
        levels: Levels = {}
        for names in dict.fromkeys([*needs, *previous]):
            level = previous.get(names)
            capabilities, need = needs.get(names, (level.capabilities if level else (), 0))
            if level is None or need >= level.workers:
                levels[names] = SetLevel(capabilities, need)
                continue
            since = snapshot.now if level.surplus_since is None else level.surplus_since
            peak = max(need, level.surplus_peak if level.surplus_since is not None else 0)
            idle_since = None if need else (snapshot.now if level.idle_since is None else level.idle_since)
            if idle_since is not None and snapshot.now - idle_since >= cooldown:
                levels[names] = SetLevel(capabilities, 0)  # a full cooldown without any work: let all go
                continue
            if snapshot.now - since < cooldown:
                levels[names] = SetLevel(capabilities, level.workers, since, peak, idle_since)
                continue
            lowered = step_down_to(level.workers, peak)
            if lowered < level.workers:  # a new surplus window starts; the idle time keeps counting
                levels[names] = SetLevel(capabilities, lowered, idle_since=idle_since)
            else:  # not worth a step: watch the next cooldown afresh
                levels[names] = SetLevel(capabilities, level.workers, snapshot.now, need, idle_since)
        return levels


def step_down_to(level: int, peak: int) -> int:
    """The level after a full cooldown in which the need never exceeded `peak` (< `level`).

    A random arrival process whose need peaks at `peak` swings by about sqrt(peak) (the spread of a
    Poisson count), so keep that much headroom above the peak, and only step when it saves at least
    sqrt(level) workers. Without this dead band a steady load see-saws: step down to a quiet window's
    peak, launch again at the next busy moment. Scaling to zero is never held back (peak 0 -> 0).
    """
    lowered = peak + isqrt_ceil(peak)
    return lowered if lowered <= level - isqrt_ceil(level) else level


def isqrt_ceil(value: int) -> int:
    root = isqrt(value)
    return root if root * root == value else root + 1


def held_workers(snapshot: ScalingSnapshot, managers: list[ManagerView]) -> dict[str, int]:
    """Per manager, the workers it holds: connected ones, or its last target if larger (launches in flight)."""
    return {
        manager.manager_id: max(len(snapshot.workers_of(manager.manager_id)), target_total(manager.last_target))
        for manager in managers
    }


def bounded(workers: int, limit: WorkerLimit) -> int:
    return workers if limit is None else min(workers, limit)


def _previous_levels(snapshot: ScalingSnapshot, manager: ManagerView, memory: ScalingMemory) -> Levels:
    """The manager's levels from memory, or on first sight from its last target, else its workers.

    First sight is after a scheduler restart, a policy change, or the manager's return after being
    offline: holding what it has for one cooldown is the safe start. Only sets the manager still covers
    are kept (its capabilities may change when it restarts).
    """
    if manager.manager_id in memory.tracked_manager_ids:
        levels = memory.levels_of(manager.manager_id)
    elif manager.last_target is not None:
        levels = {}
        for entry in manager.last_target.entries:
            names = names_of(entry.capabilities)
            known = levels.get(names)
            levels[names] = SetLevel(entry.capabilities, entry.workers + (known.workers if known else 0))
    else:
        connected = len(snapshot.workers_of(manager.manager_id))
        levels = {(): SetLevel((), connected)} if connected else {}
    return {names: level for names, level in levels.items() if covers(manager.capabilities, level.capabilities)}


def _at_least_busy(snapshot: ScalingSnapshot, manager: ManagerView, levels: Levels) -> Levels:
    """Never ask for fewer workers than are busy: the shortfall goes to the generic set."""
    busy = sum(1 for worker in snapshot.workers_of(manager.manager_id) if worker.is_busy)
    shortfall = clamp_workers(busy, manager.max_workers) - sum(level.workers for level in levels.values())
    if shortfall <= 0:
        return levels
    generic = levels.get((), SetLevel((), 0))
    return {**levels, (): replace(generic, workers=generic.workers + shortfall)}


def within_limit(levels: Levels, max_workers: WorkerLimit) -> Levels:
    """Trim the last sets first until the total fits in `max_workers` (it may have been lowered)."""
    if max_workers is None:
        return levels
    excess = sum(level.workers for level in levels.values()) - max_workers
    trimmed = dict(levels)
    for names in reversed(list(levels)):
        if excess <= 0:
            break
        cut = min(excess, trimmed[names].workers)
        trimmed[names] = replace(trimmed[names], workers=trimmed[names].workers - cut)
        excess -= cut
    return trimmed
