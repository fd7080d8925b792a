"""An idle scheduler gathers its own figures for the status (its CPU and memory, the object storage's objects, the
message counts) only while somebody reads the status (issue 58: each gathering is a wake-up and a round trip to the
object storage server every second); once the status topic has a subscriber they are gathered every second again.
The real scheduler server and object storage server on simulated time. Fails with the figures gathered whatever
the subscribers (asked in the first seconds already)."""

from __future__ import annotations

from typing import Any

import pytest

from scaler.object_storage.async_connection import AsyncObjectStorageConnection
from scaler.protocol.feed import STATUS_TOPIC
from scaler_rehearsal.testing.simulated_stack import SimulatedStack


def test_the_figures_are_gathered_only_while_the_status_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[float] = []
    info = AsyncObjectStorageConnection.info
    stack = SimulatedStack()

    async def counted(self: AsyncObjectStorageConnection, *arguments: Any, **settings: Any) -> Any:
        asked.append(stack.clock.now())
        return await info(self, *arguments, **settings)

    monkeypatch.setattr(AsyncObjectStorageConnection, "info", counted)

    async def scenario() -> None:
        stack.start_storage()
        stack.start_scheduler()
        await stack.clock.sleep(5.0)
        assert asked == [], "nobody reads the status"
        server = stack.scheduler
        assert server is not None
        server._on_subscriptions([b"\x01" + STATUS_TOPIC])
        await stack.until(lambda: len(asked) >= 2, "the figures, gathered each second again", within=5)
        server._on_subscriptions([b"\x00" + STATUS_TOPIC])
        await stack.clock.sleep(1.5)
        before = len(asked)
        await stack.clock.sleep(3.0)
        assert len(asked) == before, "nobody reads the status any more"

    stack.run(scenario())
