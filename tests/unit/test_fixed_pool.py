"""A fixed pool of local workers (`scaler_cluster`) stopped with Ctrl-C: in a terminal the signal reaches the pool and
its workers alike (one process group), so workers that exit at once are the stop the user asked for, not news.

Walking docs/guide/monitoring_and_security.md, Ctrl-C in the terminal of `scaler_cluster -n 2 tcp://127.0.0.1:8516`
printed `WARNING ... worker pid N exited (exit code 0)` for each worker, then `received SIGINT: stopping 0 workers`.
"""

from __future__ import annotations

import logging
import signal
import subprocess
import time
import types
from collections.abc import Sequence

import pytest

from scaler.config.sections import WorkerConfig
from scaler.protocol.exit_codes import ExitCode
from scaler.worker_manager.baremetal_native import fixed_pool

pytestmark = pytest.mark.timeout(30)


class _Worker:
    """A worker process: running until the terminal's Ctrl-C reaches it, then exited with `code`."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        return self.returncode


def _run_pool_interrupted(monkeypatch: pytest.MonkeyPatch, worker_code: int) -> int:
    workers = [_Worker(1001), _Worker(1002)]
    interrupted: list[bool] = []

    def sleep(seconds: float) -> None:
        if not interrupted:  # the terminal's Ctrl-C: the pool's handler runs, and the workers exit meanwhile
            interrupted.append(True)
            signal.raise_signal(signal.SIGINT)
            for worker in workers:
                worker.returncode = worker_code
        time.sleep(0.01)

    def start_workers(config: WorkerConfig, count: int) -> list[_Worker]:
        return workers[:count]

    def stop_children(children: Sequence[subprocess.Popen[bytes]], grace_seconds: float) -> None:
        pass

    monkeypatch.setattr(fixed_pool, "time", types.SimpleNamespace(sleep=sleep, monotonic=time.monotonic))
    monkeypatch.setattr(fixed_pool, "start_workers", start_workers)
    monkeypatch.setattr(fixed_pool, "stop_children", stop_children)
    return fixed_pool.run_worker_pool(WorkerConfig(scheduler_address="tcp://127.0.0.1:8516"), 2)


def test_ctrl_c_stops_the_pool_without_a_warning_for_each_worker(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=fixed_pool.__name__)
    assert _run_pool_interrupted(monkeypatch, worker_code=ExitCode.OK) == ExitCode.OK
    assert [record.levelno for record in caplog.records if record.levelno >= logging.WARNING] == []
    assert "received SIGINT: stopping 2 workers" in caplog.text


def test_a_worker_that_exits_by_itself_is_reported(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Without a stop, a worker's exit is news: at INFO when it exited cleanly (the scheduler asked it to leave),
    as a warning otherwise."""
    workers = [_Worker(1001), _Worker(1002)]
    workers[0].returncode = ExitCode.OK
    workers[1].returncode = ExitCode.SCHEDULER_LOST
    monkeypatch.setattr(fixed_pool, "time", types.SimpleNamespace(sleep=lambda seconds: None, monotonic=time.monotonic))
    monkeypatch.setattr(fixed_pool, "start_workers", lambda config, count: workers)
    monkeypatch.setattr(fixed_pool, "stop_children", lambda children, grace_seconds: None)
    caplog.set_level(logging.INFO, logger=fixed_pool.__name__)
    config = WorkerConfig(scheduler_address="tcp://127.0.0.1:8516")
    assert fixed_pool.run_worker_pool(config, 2) == ExitCode.SCHEDULER_LOST
    levels = {record.getMessage(): record.levelno for record in caplog.records if "exited (" in record.getMessage()}
    assert levels == {"worker pid 1001 exited (exit code 0)": logging.INFO,
                      "worker pid 1002 exited (exit code 3)": logging.WARNING}  # fmt: skip
