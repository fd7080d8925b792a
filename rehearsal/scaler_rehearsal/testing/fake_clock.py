"""Simulated time for the shells (`scaler.io.clock.Clock`), in the spirit of trio's MockClock with autojump.

`FakeClock.run(main())` runs a coroutine on an event loop whose time is the clock's. The loop works as usual
(callbacks, tasks, sockets, other threads' `call_soon_threadsafe`), except when it would wait: if nothing is ready
and a timer is due later, time jumps to that timer at once, since nothing in the simulated world can happen before
it. So every `asyncio.sleep`, `call_later` and `wait_for` timeout of the shells fires in order, in no real time,
whatever the machine's load; a test waits for a condition, never for the clock.

What can wake the loop besides its timers is still watched: before a jump, the real file descriptors are polled
(the memory network's, `scaler_rehearsal.testing.memory_network`, signal that messages wait);
`autojump_threshold_seconds` > 0 waits that long in real time first, for a world that includes real threads. A loop with
nothing scheduled and nothing to read is stuck for good: after `stuck_seconds` of real time it raises `SimulationStuck`.
"""

from __future__ import annotations

import asyncio
import selectors
from collections.abc import Callable, Coroutine, Mapping
from typing import Any, TypeVar

from scaler.io.clock import Timer
from scaler.io.simulated_time import SimulatedTime

T = TypeVar("T")

#: Where the fake wall clock starts (2024-01-01), so that dates look like dates.
WALL_START = 1_704_067_200.0


class SimulationStuck(RuntimeError):
    """Nothing is scheduled, nothing can be read: no event will ever come."""


class FakeClock:
    """A monotonic clock that starts at `start` and moves only when its loop has nothing to do (or `advance`).

    Its time is a `SimulatedTime` (`scaler.io.simulated_time`, the package's one model of simulated time): its own,
    or one handed in as `time` to share with another simulator (then `start` is that time's present)."""

    def __init__(
        self,
        start: float = 0.0,
        autojump_threshold_seconds: float = 0.0,
        stuck_seconds: float = 10.0,
        time: SimulatedTime | None = None,
    ):
        self.time = time if time is not None else SimulatedTime(start)
        self._start = self.time.now
        self.autojump_threshold_seconds = autojump_threshold_seconds
        self.stuck_seconds = stuck_seconds
        self.jumps = 0  #: how often time jumped because the loop was idle
        self._loop: AutojumpLoop | None = None

    # ------------------------------------------------------------ the Clock protocol

    def now(self) -> float:
        return self.time.now

    def wall(self) -> float:
        return WALL_START + self.time.now

    async def sleep(self, seconds: float) -> None:
        self._check_loop()
        await asyncio.sleep(seconds)

    def call_later(self, seconds: float, callback: Callable[..., Any], *args: Any) -> Timer:
        return self._check_loop().call_later(seconds, callback, *args)

    # ------------------------------------------------------------ driving it

    @property
    def elapsed(self) -> float:
        """Simulated seconds since the clock started."""
        return self.time.now - self._start

    def advance(self, seconds: float) -> None:
        """Move time on by hand (the loop's due timers run at its next turn)."""
        self.time.advance(seconds)

    def new_loop(self) -> AutojumpLoop:
        """An event loop on this clock's time (one at a time per clock)."""
        if self._loop is not None and not self._loop.is_closed():
            raise RuntimeError("this clock's loop is still open")
        self._loop = AutojumpLoop(self)
        return self._loop

    def run(self, main: Coroutine[Any, Any, T]) -> T:
        """Run `main` to its end on a new loop on this clock, then close the loop."""
        loop = self.new_loop()
        try:
            return loop.run_until_complete(main)
        finally:
            try:
                _cancel_leftovers(loop)
                loop.run_until_complete(loop.shutdown_asyncgens())
            finally:
                loop.close()

    def _jump(self, seconds: float) -> None:
        self.time.advance(seconds)
        self.jumps += 1

    def _check_loop(self) -> AutojumpLoop:
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            raise RuntimeError("a FakeClock waits only on its own loop: run the code with FakeClock.run")
        return self._loop


class AutojumpLoop(asyncio.SelectorEventLoop):
    """A selector loop whose time is a FakeClock's and whose selector jumps that clock instead of sleeping."""

    def __init__(self, clock: FakeClock) -> None:
        self._fake_clock = clock
        super().__init__(_JumpingSelector(clock))

    def time(self) -> float:
        return self._fake_clock.now()


class _JumpingSelector(selectors.BaseSelector):
    """The system's selector, polled without waiting; a wait for a timer becomes a jump of the clock."""

    def __init__(self, clock: FakeClock) -> None:
        self._clock = clock
        self._real = selectors.DefaultSelector()

    def register(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        return self._real.register(fileobj, events, data)

    def unregister(self, fileobj: Any) -> selectors.SelectorKey:
        return self._real.unregister(fileobj)

    def modify(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        return self._real.modify(fileobj, events, data)

    def get_map(self) -> Mapping[Any, selectors.SelectorKey]:
        return self._real.get_map()

    def close(self) -> None:
        self._real.close()

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        ready = self._real.select(0)
        if ready or timeout == 0:
            return ready  # callbacks are ready, or descriptors: no waiting, no jump
        threshold = self._clock.autojump_threshold_seconds
        if threshold > 0:
            ready = self._real.select(threshold if timeout is None else min(threshold, timeout))
            if ready:
                return ready
        if timeout is None:  # no timer at all: only another thread could still wake the loop
            ready = self._real.select(self._clock.stuck_seconds)
            if not ready:
                raise SimulationStuck(
                    f"nothing is scheduled and nothing was readable for {self._clock.stuck_seconds:g} s of real time"
                )
            return ready
        self._clock._jump(timeout)
        return []


def _cancel_leftovers(loop: asyncio.AbstractEventLoop) -> None:
    tasks = [task for task in asyncio.all_tasks(loop) if not task.done()]
    for task in tasks:
        task.cancel()
    if tasks:
        loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
