"""A socket left unread after each burst (`AsyncSocket(pause_after_burst=...)`, the scheduler's while it is idle with
a big cluster: `scheduler.server.read_pause`): what comes meanwhile is read in one wake-up. Real ZeroMQ sockets over
inproc; the decision of when the scheduler pauses is pure and tested below on the simulated core."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import zmq

from scaler.io.zmq_async import AsyncSocket
from scaler.scheduler.core.scheduler_core import CoreSettings
from scaler.scheduler.server import IDLE_READ_PAUSE_SECONDS, read_pause
from scaler.testing.simulation import PYTHON, SimulatedCluster, task


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


def test_an_idle_scheduler_of_a_big_cluster_pauses_its_reads_and_one_that_holds_a_task_does_not() -> None:
    """More than 100 workers at the default 2 s (they are given a heartbeat period): paused while no task is held;
    with a task, or with 100 workers (each heartbeats at its own period), not."""
    sim = SimulatedCluster(CoreSettings("s", "o", PYTHON))
    client = sim.add_client()
    for number in range(100):
        sim.add_worker(f"w{number}")
    assert read_pause(sim.core) == 0.0
    sim.add_worker("w100")
    assert read_pause(sim.core) == IDLE_READ_PAUSE_SECONDS
    sim.submit(client, [task(client.peer, 1)])
    assert read_pause(sim.core) == 0.0
