"""A socket left unread after each burst (`AsyncSocket(pause_after_burst=...)`, the scheduler's while it is idle with
a big cluster: `scheduler.core.pace`): what comes meanwhile is read in one wake-up. Real ZeroMQ sockets over
inproc; the decision of when the scheduler pauses is the core's (tests/unit/scheduler/test_pace.py)."""

from __future__ import annotations

import asyncio
import gc
from typing import Any

import pytest
import zmq

from scaler.io.zmq_async import BURST, AsyncSocket


@pytest.mark.timeout(60)
def test_what_comes_during_the_pause_is_read_in_one_burst(pair: tuple[zmq.Socket[Any], zmq.Socket[Any]]) -> None:
    """Five messages 50 ms apart: paused 20 s after each burst, the first is read alone and the four others together
    once the pause ends. The pause ends on the loop's clock, which the test moves on by 20 s once the five are sent
    (the loop's timers run on `loop.time()`), so the test lasts a quarter of a second. Fails with no pause (each read
    as it comes: five bursts)."""
    router, dealer = pair
    got: list[Any] = []
    bursts: list[int] = []

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        real_time, skipped = loop.time, [0.0]
        loop.time = lambda: real_time() + skipped[0]  # type: ignore[method-assign]
        all_read = asyncio.Event()

        def read(frames: Any) -> None:
            got.append(frames)
            if len(got) == 5:
                all_read.set()

        sock = AsyncSocket(loop, router, read, on_burst_end=lambda: bursts.append(len(got)),
                           pause_after_burst=lambda: 20.0)  # fmt: skip
        try:
            for _ in range(5):
                dealer.send(b"beat")
                await asyncio.sleep(0.05)
            skipped[0] += 20.0  # the pause is over
            await all_read.wait()
        finally:
            sock.close()

    asyncio.run(asyncio.wait_for(scenario(), 30))
    assert bursts == [1, 5]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("paused", [True, False])
def test_the_collector_does_not_run_inside_a_burst(pair: tuple[zmq.Socket[Any], zmq.Socket[Any]], paused: bool) -> None:
    """`collector_paused` (the scheduler's router): a burst whose messages make many objects that live until its end
    sees no collection while it is read and handled, and the collector runs again after it. Without the pause the same
    burst sees collections (the control)."""
    router, dealer = pair
    kept: list[list[int]] = []
    collections_in_burst: list[int] = []
    collected = [0]
    enabled_after: list[bool] = []

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            collected[0] += 1

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        done = asyncio.Event()

        def read(frames: Any) -> None:
            if not kept:  # the burst's first message: collections before it are not counted
                collected[0] = 0
            kept.extend([index] for index in range(500))  # tracked objects, alive until the burst ends

        def burst_end() -> None:
            collections_in_burst.append(collected[0])
            kept.clear()
            collected[0] = 0
            loop.call_soon(lambda: (enabled_after.append(gc.isenabled()), done.set()))

        for _ in range(50):
            dealer.send(b"task")
        await asyncio.sleep(0.1)  # all queued before the socket is read: one burst
        sock = AsyncSocket(loop, router, read, on_burst_end=burst_end, collector_paused=paused)
        try:
            await done.wait()
        finally:
            sock.close()

    threshold = gc.get_threshold()
    gc.set_threshold(100, *threshold[1:])
    gc.callbacks.append(count)
    try:
        asyncio.run(asyncio.wait_for(scenario(), 30))
    finally:
        gc.callbacks.remove(count)
        gc.set_threshold(*threshold)
    assert enabled_after == [True]
    assert (collections_in_burst[0] == 0) is paused, collections_in_burst


@pytest.mark.timeout(60)
def test_a_socket_is_behind_while_a_burst_stopped_at_its_limit(pair: tuple[zmq.Socket[Any], zmq.Socket[Any]]) -> None:
    """`behind` (the scheduler's beats say it: events.Tick) is True after a burst that read BURST messages with more
    waiting, and False once a burst read all there was. Fails with `behind` always False."""
    router, dealer = pair
    behind_at_ends: list[bool] = []
    count = BURST + 10
    for _ in range(count):
        dealer.send(b"result")

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        done = asyncio.Event()
        got = [0]

        def read(frames: Any) -> None:
            got[0] += 1

        def burst_end() -> None:
            behind_at_ends.append(sock.behind)
            if got[0] == count:
                done.set()

        await asyncio.sleep(0.2)  # every message queued at the router
        sock = AsyncSocket(loop, router, read, on_burst_end=burst_end)
        try:
            await done.wait()
        finally:
            sock.close()

    asyncio.run(asyncio.wait_for(scenario(), 30))
    assert behind_at_ends == [True, False]
