"""Time as the shells see it: the clock they read and the waits they make, behind one small seam.

The cores take `now` as an input; the shells read it here (`now()`, monotonic seconds, stamped on every event;
`wall()`, seconds since the epoch, where a message carries a date) and wait here (`sleep`, `call_later`). The
scheduler server, the worker agent, the manager runner and the offload executor take a `Clock`, `REAL_CLOCK` by
default. `scaler_rehearsal.testing.fake_clock.FakeClock` is simulated time for tests: it runs the shells on an event
loop whose time is its own and which jumps to the next deadline whenever every task is blocked (trio's autojump clock),
so a 50 s outage costs no real time and never depends on how busy the machine is.

Rule for the shells: every wait goes through the running loop's timers (this seam's `sleep` and `call_later`, or
`asyncio.wait_for` and `asyncio.wait` with a timeout, which use the same timers): a fake clock fakes the loop's
time, so they all follow it. A shell never reads `time.monotonic()` or `time.time()` itself.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any, Protocol


class Timer(Protocol):
    """A call made later; `cancel()` stops it (asyncio.TimerHandle is one)."""

    def cancel(self) -> None: ...


class Clock(Protocol):
    def now(self) -> float:
        """Monotonic seconds: what events are stamped with and deadlines are measured in."""
        ...

    def wall(self) -> float:
        """Seconds since the epoch (dates that travel: a Tick's wall time, UnitInfo.created_at)."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Wait `seconds` on the running loop."""
        ...

    def call_later(self, seconds: float, callback: Callable[..., Any], *args: Any) -> Timer:
        """Call `callback(*args)` on the running loop in `seconds`."""
        ...


class RealClock:
    """The machine's clocks and the running loop's timers. Its methods are the standard functions themselves, so a
    shell that binds `clock.now` once pays nothing more per event than a call of `time.monotonic`."""

    now = staticmethod(time.monotonic)
    wall = staticmethod(time.time)
    sleep = staticmethod(asyncio.sleep)

    @staticmethod
    def call_later(seconds: float, callback: Callable[..., Any], *args: Any) -> Timer:
        return asyncio.get_running_loop().call_later(seconds, callback, *args)


REAL_CLOCK: Clock = RealClock()
