"""What a worker says once as it starts (scaler/worker/process.py, `run_worker`).

Found walking seed 001's `scaler_cluster --config example_config.toml` (a `[cluster]` with `task_timeout_seconds`):
each of its 8 workers said "lend_processors is ignored: task_timeout_seconds is set ..." twice, 16 lines for one
setting, because `run_worker` asked `_lends` once for the processors' setting and again for their marks folder.
Checked by switching the fix off: with the two calls back, the note is counted twice and this test fails.
"""

from __future__ import annotations

import logging
from typing import Any, cast

import pytest

from scaler.config.sections import WorkerConfig
from scaler.io.sockets import TransportSecurity
from scaler.worker import process
from scaler.worker.executors import zygote


class _StoppedAtTheZygote(Exception):
    """Raised where the worker would fork its zygote: everything it says before that has been said."""


def _no_zygote(*args: Any, **kwargs: Any) -> None:
    raise _StoppedAtTheZygote()


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    ("settings", "note"),
    [
        ({"task_timeout_seconds": 5}, "does not lend its processors (lend_processors): task_timeout_seconds is set"),
        ({"nested_parents": "process"}, "does not lend its processors (lend_processors) with nested_parents 'process'"),
    ],
)
def test_a_worker_that_does_not_lend_says_why_once(
    settings: dict[str, Any], note: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(zygote.Zygote, "start", _no_zygote)
    config = WorkerConfig(scheduler_address="tcp://127.0.0.1:2345", **settings)
    with caplog.at_level(logging.INFO, logger=process.__name__), pytest.raises(_StoppedAtTheZygote):
        process.run_worker(config, security=cast(TransportSecurity, object()))
    said = [record.getMessage() for record in caplog.records if note in record.getMessage()]
    assert len(said) == 1, said
