"""A fake monotonic clock with a schedule: simulations advance it; nothing waits for real time."""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(order=True)
class _Timer:
    at: float
    sequence: int  #: keeps timers due at the same instant in the order they were set
    action: Callable[[], None] = field(compare=False)


class FakeClock:
    def __init__(self, now: float = 0.0) -> None:
        self.now = now
        self._timers: list[_Timer] = []
        self._sequence = 0

    def call_at(self, when: float, action: Callable[[], None]) -> None:
        """Run `action` when the clock reaches `when` (at once on the next run if that is past)."""
        self._sequence += 1
        heapq.heappush(self._timers, _Timer(max(when, self.now), self._sequence, action))

    def call_later(self, delay_seconds: float, action: Callable[[], None]) -> None:
        self.call_at(self.now + delay_seconds, action)

    def next_due(self) -> float | None:
        return self._timers[0].at if self._timers else None

    def run_until(self, when: float) -> None:
        """Run every timer due by `when` in time order (the clock reads each timer's time while it runs,
        and timers may set new ones), then move the clock to `when`."""
        while self._timers and self._timers[0].at <= when:
            timer = heapq.heappop(self._timers)
            self.now = timer.at
            timer.action()
        self.now = max(self.now, when)
