"""A socket left unread after each burst (`AsyncSocket(pause_after_burst=...)`, the scheduler's while it is idle with
a big cluster: `scheduler.core.pace`): what comes meanwhile is read in one wake-up. Real ZeroMQ sockets over
inproc; the decision of when the scheduler pauses is the core's (tests/unit/scheduler/test_pace.py)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import zmq

from scaler.io.zmq_async import AsyncSocket


@pytest.mark.timeout(60)
def test_what_comes_during_the_pause_is_read_in_one_burst(pair: tuple[zmq.Socket[Any], zmq.Socket[Any]]) -> None:
    """Five messages 50 ms apart: paused 5 s after each burst, the first is read alone and the four others together
    once the pause ends. Fails with no pause (each read as it comes: five bursts)."""
    router, dealer = pair
    got: list[Any] = []
    bursts: list[int] = []

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        all_read = asyncio.Event()

        def read(frames: Any) -> None:
            got.append(frames)
            if len(got) == 5:
                all_read.set()

        sock = AsyncSocket(loop, router, read, on_burst_end=lambda: bursts.append(len(got)),
                           pause_after_burst=lambda: 5.0)  # fmt: skip
        try:
            for _ in range(5):
                dealer.send(b"beat")
                await asyncio.sleep(0.05)
            await all_read.wait()
        finally:
            sock.close()

    asyncio.run(asyncio.wait_for(scenario(), 30))
    assert bursts == [1, 5]
