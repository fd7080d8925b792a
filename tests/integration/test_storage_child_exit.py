"""The scheduler's watch of its object storage server waits for the server's exit through its pidfd: nothing wakes the
scheduler's loop while the server lives (issue 58: asking five times a second was a sizeable part of an idle
scheduler's work), and the exit is noticed at once. A real child process (a Python that sleeps), killed at the end."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from typing import Any

import pytest

from scaler.scheduler import storage_child as module

pytestmark = pytest.mark.integration


@pytest.mark.timeout(30)
@pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="pidfds are Linux's (5.3 and later)")
def test_a_living_server_wakes_nothing_and_its_exit_is_noticed_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Half a second of a living child: no poll (asking every WATCH_SECONDS would have asked about 50 times at 10 ms);
    killed, the wait ends. Fails with the wait polling (`os.pidfd_open` taken away)."""
    monkeypatch.setattr(module, "WATCH_SECONDS", 0.01)
    polls: list[float] = []
    sleep = asyncio.sleep

    async def counted(delay: float, *arguments: Any) -> Any:
        if delay == module.WATCH_SECONDS:
            polls.append(delay)
        return await sleep(delay, *arguments)

    monkeypatch.setattr(asyncio, "sleep", counted)
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:

        async def scenario() -> None:
            waiting = asyncio.ensure_future(module._exit_of(child))
            await sleep(0.5)
            assert not waiting.done(), "the child lives"
            assert polls == [], f"{len(polls)} polls while the child lived"
            child.kill()
            await asyncio.wait_for(waiting, 10)

        asyncio.run(scenario())
    finally:
        child.kill()
        child.wait()
    assert child.returncode is not None
