"""A task that streams no output and forwards no logs runs without the capture contexts around its call
(`TaskExecutor.run`): a processor's every task paid for making, entering and leaving two of them.

Checked by hand with the mechanism off (the contexts entered for every task, as before): the first test fails (the
contexts were made). The second guards a task that asks for its output: it still gets it.
"""

from __future__ import annotations

import pickle
from typing import Any

import pytest

from scaler.protocol import codec
from scaler.protocol import messages as m
from scaler.worker import task_execution
from scaler.worker.task_execution import TaskExecutor
from tests.unit.test_remote_bundle import CLIENT, add, chatty, make_task

pytestmark = pytest.mark.timeout(60)


def test_a_plain_task_runs_without_capture_contexts(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any) -> None:
        raise AssertionError("a capture context was made for a task that asked for none")

    monkeypatch.setattr(task_execution, "_OutputCapture", refuse)
    monkeypatch.setattr(task_execution, "LogCapture", refuse)
    task, storage = make_task(add, 2, 40)
    result = TaskExecutor(lambda: storage, lambda log: None).run(task)  # type: ignore[arg-type, return-value]
    assert result.status is m.ResultStatus.SUCCESS and pickle.loads(result.payload) == 42


def test_a_task_that_streams_its_output_gets_it() -> None:
    task, storage = make_task(chatty)
    body = codec.decode_body(task.body)
    task = m.Task(task.task_id, CLIENT, codec.encode_body(m.TaskBody(body.function_id, stream_output=True)), "chatty")
    logs: list[m.TaskLog] = []
    result = TaskExecutor(lambda: storage, logs.append).run(task)  # type: ignore[arg-type, return-value]
    assert result.status is m.ResultStatus.SUCCESS
    assert "hello from far away" in "".join(log.text for log in logs)
