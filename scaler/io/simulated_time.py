"""Simulated time, the one model every simulator of the package shares: seconds that stand still while anything
can happen and jump to the next due timer when nothing can.

`SimulatedTime` holds the current simulated second and the timers due later, in order (timers due at the same
second run in the order they were set). It reads no real clock and starts no thread, so a run on it is a pure
function of its inputs. Its users:
- `scaler_rehearsal.testing.fake_clock.FakeClock` runs asyncio shells on it: its event loop's time is
  `SimulatedTime.now`, and a loop with nothing ready jumps it to the loop's next timer;
- `scaler_rehearsal.testing.simulation.SimulatedCluster` drives the scheduler core by hand (`advance`, then a Tick);
- `scaler.policy_simulator.cluster_simulation` replays a trace as timers (`call_at`, `run_next`).
One instance can be handed to several of them, so that they share one clock.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass(eq=False, slots=True)
class SimulatedTimer:
    """A call set for a simulated second; `cancel()` stops it."""

    when: float
    callback: Callable[..., Any]
    args: tuple[Any, ...] = field(default_factory=tuple)
    cancelled: bool = False

    def cancel(self) -> None:
        self.cancelled = True


class SimulatedTime:
    def __init__(self, start: float = 0.0) -> None:
        self._now = start
        self._timers: list[tuple[float, int, SimulatedTimer]] = []
        self._sequence = 0  #: orders timers due at the same second by when they were set

    @property
    def now(self) -> float:
        return self._now

    def call_at(self, when: float, callback: Callable[..., Any], *args: Any) -> SimulatedTimer:
        """Call `callback(*args)` when time reaches `when` (at once, at the next run, if that has passed)."""
        timer = SimulatedTimer(max(when, self._now), callback, args)
        self._sequence += 1
        heapq.heappush(self._timers, (timer.when, self._sequence, timer))
        return timer

    def call_later(self, seconds: float, callback: Callable[..., Any], *args: Any) -> SimulatedTimer:
        return self.call_at(self._now + seconds, callback, *args)

    def next_due(self) -> float | None:
        """When the next timer that was not cancelled is due; None: no timer is left."""
        while self._timers and self._timers[0][2].cancelled:
            heapq.heappop(self._timers)
        return self._timers[0][0] if self._timers else None

    def run_next(self) -> bool:
        """Jump to the next timer and run it; False when no timer is left."""
        if self.next_due() is None:
            return False
        when, _sequence, timer = heapq.heappop(self._timers)
        self._now = max(self._now, when)
        timer.callback(*timer.args)
        return True

    def advance(self, seconds: float) -> None:
        """Move time on by `seconds`, running every timer due by then, in order."""
        if seconds < 0:
            raise ValueError(f"time does not go back: advance({seconds})")
        self.advance_to(self._now + seconds)

    def advance_to(self, when: float) -> None:
        """Move time on to `when`, running every timer due by then, in order."""
        if when < self._now:
            raise ValueError(f"time does not go back: it is {self._now:g}, not {when:g}")
        while (due := self.next_due()) is not None and due <= when:
            self.run_next()
        self._now = when
