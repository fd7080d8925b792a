"""Ctrl-C of `scaler_cluster` in a terminal (docs/guide/clusters.md, "Each runs until Ctrl-C"): the terminal sends
SIGINT to the pool and to its workers at once (one process group), so the workers may exit before the pool's loop
sees the signal. Walking the page, every such Ctrl-C printed "WARNING cluster: worker pid N exited (exit code 0)" for
each worker, then "received SIGINT: stopping 0 workers". A worker that exits once the pool is stopping is part of
the stop, not news.

Here the loop's sleep is where both happen (the signal, then the workers' exits), as in the terminal. Checked by
switching the fix off: with the warning before the `stopping` check again, four warnings are logged and this fails.
"""

from __future__ import annotations

import logging
import signal

import pytest

from scaler.config.sections import WorkerConfig
from scaler.protocol.exit_codes import ExitCode
from scaler.worker_manager.baremetal_native import fixed_pool


class _Worker:
    """A worker process as the pool sees it."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        return self.returncode


@pytest.mark.timeout(30)
def test_workers_that_leave_on_the_terminals_ctrl_c_are_no_warning(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    workers = [_Worker(pid) for pid in range(1001, 1005)]

    def ctrl_c_in_the_terminal(seconds: float) -> None:
        signal.raise_signal(signal.SIGINT)  # the pool's handler runs now
        for worker in workers:  # and the workers, which got it too, leave
            worker.returncode = 0

    monkeypatch.setattr(fixed_pool, "check_worker_config", lambda config: None)
    monkeypatch.setattr(fixed_pool, "start_workers", lambda config, count: workers)
    monkeypatch.setattr(fixed_pool, "stop_children", lambda *args, **kwargs: None)
    monkeypatch.setattr(fixed_pool.time, "sleep", ctrl_c_in_the_terminal)
    config = WorkerConfig(scheduler_address="tcp://127.0.0.1:2345")
    with caplog.at_level(logging.INFO, logger=fixed_pool.__name__):
        code = fixed_pool.run_worker_pool(config, len(workers))
    assert code == ExitCode.OK
    warnings = [record.getMessage() for record in caplog.records if record.levelno >= logging.WARNING]
    assert warnings == []
    said = [record.getMessage() for record in caplog.records]
    assert "received SIGINT: stopping 4 workers" in said, said


@pytest.mark.timeout(30)
@pytest.mark.parametrize(("code", "warned"), [(0, False), (3, True)])
def test_workers_that_end_by_themselves_are_a_warning_only_when_they_failed(
    code: int, warned: bool, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """`client.shutdown()` of an unprotected scheduler tells the workers to stop: each exits 0, and the pool logged
    "WARNING worker pid N exited (exit code 0)" for each. A worker that lost its scheduler (3) is still warned of.
    Checked by switching it off (the warning whatever the code): the `0` case fails."""
    workers = [_Worker(pid) for pid in range(1001, 1003)]

    def the_workers_end(seconds: float) -> None:
        for worker in workers:
            worker.returncode = code

    monkeypatch.setattr(fixed_pool, "check_worker_config", lambda config: None)
    monkeypatch.setattr(fixed_pool, "start_workers", lambda config, count: workers)
    monkeypatch.setattr(fixed_pool, "stop_children", lambda *args, **kwargs: None)
    monkeypatch.setattr(fixed_pool.time, "sleep", the_workers_end)
    config = WorkerConfig(scheduler_address="tcp://127.0.0.1:2345")
    with caplog.at_level(logging.INFO, logger=fixed_pool.__name__):
        assert fixed_pool.run_worker_pool(config, len(workers)) == code
    exited = [record for record in caplog.records if "exited (exit code" in record.getMessage()]
    assert len(exited) == 2
    assert all((record.levelno >= logging.WARNING) == warned for record in exited)
