"""`StorageChild.watch`: a storage server that exits while its scheduler runs is a death (said, and restarted); one
that exits while the scheduler is stopping, or that exits cleanly just before the scheduler starts to stop (the
same Ctrl-C reached both), is not. Fake child processes; no process is started."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from scaler.config.sections import ObjectStorageServerConfig
from scaler.scheduler import storage_child as module
from scaler.scheduler.storage_child import StorageChild


class FakeChild:
    def __init__(self, returncode: int | None = None, pid: int = 4242) -> None:
        self.returncode = returncode
        self.pid = pid

    def poll(self) -> int | None:
        return self.returncode


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> list[FakeChild]:
    """The children the watch starts (running fakes); the waits are short."""
    children: list[FakeChild] = []

    def start(*_: Any, **__: Any) -> FakeChild:
        children.append(FakeChild())
        return children[-1]

    monkeypatch.setattr(module, "start_python_child", start)
    monkeypatch.setattr(module, "wait_for_object_storage", lambda *_, **__: None)
    monkeypatch.setattr(module, "WATCH_SECONDS", 0.01)
    monkeypatch.setattr(module, "SIGNAL_GRACE_SECONDS", 0.1)
    return children


def watch_for(child: StorageChild, seconds: float, stopping: Any) -> list[str]:
    """Run the watch for `seconds`; the reasons it gave up for."""
    reasons: list[str] = []

    async def scenario() -> None:
        task = asyncio.ensure_future(child.watch(reasons.append, stopping))
        await asyncio.wait([task], timeout=seconds)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    asyncio.run(scenario())
    return reasons


def storage_with(returncode: int) -> StorageChild:
    child = StorageChild(ObjectStorageServerConfig(bind_address="tcp://127.0.0.1:1"))
    child._child = FakeChild(returncode)  # type: ignore[assignment]
    return child


@pytest.mark.timeout(30)
@pytest.mark.parametrize("returncode", [0, -9, 1])
def test_a_server_that_exits_while_the_scheduler_runs_is_a_death(
    returncode: int, started: list[FakeChild], caplog: pytest.LogCaptureFixture
) -> None:
    child = storage_with(returncode)
    with caplog.at_level(logging.WARNING, logger=module.__name__):
        assert watch_for(child, 0.5, stopping=lambda: False) == []
    assert len(started) == 1 and child._child is started[0]
    assert any(f"died: {module.describe_exit(returncode)}" in record.getMessage() for record in caplog.records)
    assert "restarted" in caplog.text


@pytest.mark.timeout(30)
@pytest.mark.parametrize("returncode", [0, -2, -9])
def test_a_server_that_exits_while_the_scheduler_stops_is_not_a_death(
    returncode: int, started: list[FakeChild], caplog: pytest.LogCaptureFixture
) -> None:
    child = storage_with(returncode)
    with caplog.at_level(logging.DEBUG, logger=module.__name__):
        assert watch_for(child, 0.5, stopping=lambda: True) == []
    assert started == [] and caplog.text == ""


@pytest.mark.timeout(30)
def test_a_clean_exit_just_before_the_scheduler_stops_is_not_a_death(
    started: list[FakeChild], caplog: pytest.LogCaptureFixture
) -> None:
    """The server got the group's SIGINT and exited (code 0) before the scheduler handled its own: the watch
    waits a moment for the scheduler's stop before it counts a death."""
    child = storage_with(0)
    loop_time: list[float] = []

    def stopping() -> bool:  # the scheduler handles its signal 50 ms after the watch first sees the exit
        now = asyncio.get_running_loop().time()
        loop_time.append(now)
        return now - loop_time[0] > 0.05

    with caplog.at_level(logging.DEBUG, logger=module.__name__):
        assert watch_for(child, 0.5, stopping) == []
    assert started == [] and caplog.text == ""
