"""Units that wait in their provider's queue: the reconciler's rules 12 and 13, and what the heartbeat says of them.

A provider with a queue (Slurm, Kubernetes) keeps a unit PENDING until it has room, and says why
(`UnitInfo.wait`). Such a unit is pending capacity like a booting one, but it may wait for hours, so:

12. A unit its provider says can never start as asked (`UnitWait.never_starts`: it asks more than any node of its
    partition has) is terminated and counts as a failed launch; launches then wait `never_starts_hold_seconds`
    (the ask does not change by itself: the settings or the cluster must), with that reason reported.
13. At most `max_waiting_units` units wait at once: units listed PENDING with a wait, plus launches not listed
    yet (whether those will wait is not known). Launches beyond it wait for one to start or go. The pending
    timeout (rule 6) does not apply to a unit that waits: the queue, not a boot, holds it.

Pure: no clock (time comes in as `now`), no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from scaler.protocol.message_extras import describe_waits
from scaler.protocol.messages import UnitWaits
from scaler.worker_manager.backend import UnitInfo, UnitState

__all__ = ["QueueRules", "describe_waits", "is_waiting", "waits_of"]


def is_waiting(unit: UnitInfo) -> bool:
    """PENDING in its provider's queue (not booting)."""
    return unit.state is UnitState.PENDING and unit.wait is not None


def waits_of(units: Sequence[UnitInfo]) -> tuple[UnitWaits, ...]:
    """The waiting units by reason, the most common first; each with the provider's words for one of them."""
    counts: dict[str, int] = {}
    words: dict[str, str] = {}
    for unit in units:
        if unit.wait is None or not is_waiting(unit):
            continue
        reason = unit.wait.reason or "unknown"
        counts[reason] = counts.get(reason, 0) + 1
        words.setdefault(reason, unit.wait.message)
    ordered = sorted(counts, key=lambda reason: (-counts[reason], reason))
    return tuple(UnitWaits(reason, counts[reason], words[reason]) for reason in ordered)


@dataclass
class QueueRules:
    """The bookkeeping of rules 12 and 13 between two plans."""

    max_waiting_units: int | None = None  #: None: no cap
    never_starts_hold_seconds: float = 300.0
    hold_until: float = 0.0  #: no launch before this (rule 12)
    hold_reason: str = ""  #: why, said while the hold lasts
    #: what the latest plan's launches were held back by (the heartbeat's `held`); "" when they were not
    held: str = ""
    waits: tuple[UnitWaits, ...] = ()  #: the latest listing's waiting units (the heartbeat's `waits`)
    _capped_noted: bool = False

    def never_starting(self, alive: Sequence[UnitInfo], now: float, notes: list[str]) -> list[str]:
        """Rule 12: the units to terminate because they can never start; starts the hold."""
        doomed = [unit for unit in alive if unit.state is UnitState.PENDING and unit.wait and unit.wait.never_starts]
        for unit in doomed:
            assert unit.wait is not None
            hold = self.never_starts_hold_seconds
            self.hold_until = max(self.hold_until, now + hold)
            self.hold_reason = f"a unit can never start as asked ({unit.wait.describe()}); launches wait {hold:g} s"
            notes.append(
                f"unit {unit.unit_id} can never start as asked ({unit.wait.describe()}): terminating it, "
                f"counted as a failed launch; no launch for {hold:g} s (change the settings or the cluster)"
            )
        return [unit.unit_id for unit in doomed]

    def allowed(self, missing: int, waiting: int, now: float, notes: list[str]) -> int:
        """Of `missing` launches, those rules 12 and 13 allow now; `waiting`: units waiting and launches unlisted."""
        if now < self.hold_until:
            self.held = self.hold_reason
            return 0
        cap = self.max_waiting_units
        if cap is None or waiting + missing <= cap:
            self._capped_noted = False
            return missing
        allowed = max(0, cap - waiting)
        self.held = (
            f"at most {cap} unit(s) may wait in the provider's queue at once (max_waiting_units): the next launch "
            "waits for one to start or go"
        )
        if not self._capped_noted:
            self._capped_noted = True
            notes.append(f"{waiting} unit(s) wait or are not listed yet: launching {allowed} of the {missing} missing")
        return allowed
