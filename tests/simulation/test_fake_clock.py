"""The fake clock (`scaler_rehearsal.testing.fake_clock`): time moves only when every task waits, straight to the next
deadline, and whatever can still wake the loop (another thread, a readable descriptor) is not skipped."""

from __future__ import annotations

import asyncio
import os
import threading

import pytest

from scaler_rehearsal.testing.fake_clock import WALL_START, FakeClock, SimulationStuck


def test_time_jumps_to_each_deadline_in_order_when_everything_waits() -> None:
    clock = FakeClock()
    seen: list[tuple[str, float]] = []

    async def sleeper(name: str, seconds: float) -> None:
        await clock.sleep(seconds)
        seen.append((name, clock.now()))

    async def main() -> None:
        clock.call_later(50.0, lambda: seen.append(("timer", clock.now())))
        await asyncio.gather(sleeper("b", 30.0), sleeper("a", 10.0))
        with pytest.raises(asyncio.TimeoutError):  # wait_for's timeout is a loop timer too
            await asyncio.wait_for(asyncio.Event().wait(), 100.0)
        seen.append(("timeout", clock.now()))

    clock.run(main())
    assert seen == [("a", 10.0), ("b", 30.0), ("timer", 50.0), ("timeout", 130.0)]
    assert clock.wall() == WALL_START + 130.0


def test_time_does_not_move_while_work_is_ready() -> None:
    """A loop that keeps itself busy (callbacks ready at every turn) never lets time jump."""
    clock = FakeClock()

    async def main() -> float:
        for _ in range(1000):
            await asyncio.sleep(0)
        return clock.now()

    assert clock.run(main()) == 0.0
    assert clock.jumps == 0


def test_another_threads_call_wakes_the_loop_before_any_jump() -> None:
    """A thread's `call_soon_threadsafe` lands at once; time jumps only for what no one can do sooner."""
    clock = FakeClock()

    async def main() -> tuple[str, float]:
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[str] = loop.create_future()
        thread = threading.Thread(target=lambda: loop.call_soon_threadsafe(answer.set_result, "from the thread"))
        thread.start()
        value = await answer
        thread.join()
        return value, clock.now()

    assert clock.run(main()) == ("from the thread", 0.0)


def test_a_readable_descriptor_is_served_before_time_jumps() -> None:
    clock = FakeClock()
    read_end, write_end = os.pipe()

    async def main() -> float:
        loop = asyncio.get_running_loop()
        readable: asyncio.Future[float] = loop.create_future()

        def on_readable() -> None:
            if not readable.done():
                readable.set_result(clock.now())

        loop.add_reader(read_end, on_readable)
        clock.call_later(60.0, lambda: None)  # a far deadline the loop could jump to
        os.write(write_end, b"x")
        try:
            return await readable
        finally:
            loop.remove_reader(read_end)

    try:
        assert clock.run(main()) == 0.0
    finally:
        os.close(read_end)
        os.close(write_end)


def test_a_loop_with_nothing_scheduled_and_nothing_to_read_is_reported_stuck() -> None:
    clock = FakeClock(stuck_seconds=0.05)

    async def main() -> None:
        await asyncio.Event().wait()  # nothing will ever set it

    with pytest.raises(SimulationStuck):
        clock.run(main())


def test_the_clock_waits_only_on_its_own_loop() -> None:
    clock = FakeClock()

    async def main() -> None:
        await clock.sleep(1.0)

    with pytest.raises(RuntimeError, match="only on its own loop"):
        asyncio.run(main())
