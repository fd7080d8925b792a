"""A task's `logging` records, sent to its client (`Client.forward_logging`), batched and bounded.

While a task whose body asks for it runs, a handler on the root logger takes the records emitted on the task's
thread, at the level asked or above and of the logger asked (and its children), and sends them as `TaskLog`
messages of the `records` stream: one JSON object per record and line, many records per message (a batch leaves
at 100 records, when a record comes 0.2 s or more after the last batch left, and when the task ends).

A task may forward at most `MAX_RECORDS_PER_TASK` records and `MAX_BYTES_PER_TASK` bytes of them, each message cut
to `MAX_MESSAGE_CHARS`: a task logging a million lines sends ten thousand and, when it ends, one WARNING record
saying how many were dropped, so a chatty task cannot flood the agent, the scheduler or the client.

The root logger's level is lowered to the level asked when it is higher (else records would be dropped before
any handler sees them); the handlers that were there keep the old level, so the processor's own log does not
grow, and they skip the records forwarded: a record forwarded is the client's and is shown there, once.
Records emitted on other threads (threads the task started, the processor's) are not forwarded.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

from scaler.protocol import messages as m
from scaler.protocol.ids import TaskID

MAX_RECORDS_PER_TASK = 10_000
MAX_BYTES_PER_TASK = 4 << 20
MAX_MESSAGE_CHARS = 8_192
BATCH_RECORDS = 100
BATCH_SECONDS = 0.2
#: the logger of the record that says how many records were dropped
DROP_LOGGER = "scaler.log_forwarding"


class TaskRecords:
    """One task's records on their way to its client."""

    def __init__(
        self, task_id: TaskID, forwarding: m.LogForwarding, send: Callable[[m.TaskLog], None], worker: str
    ) -> None:
        self._task_id, self._forwarding, self._send, self._worker = task_id, forwarding, send, worker
        self._batch: list[str] = []
        self._last_sent = time.monotonic()
        self.forwarded = self.forwarded_bytes = self.dropped = 0

    def wants(self, record: logging.LogRecord) -> bool:
        name = self._forwarding.logger_name
        in_tree = not name or record.name == name or record.name.startswith(name + ".")
        return in_tree and record.levelno >= self._forwarding.level

    def add(self, record: logging.LogRecord) -> None:
        if not self.wants(record):
            return
        if self.forwarded >= MAX_RECORDS_PER_TASK or self.forwarded_bytes >= MAX_BYTES_PER_TASK:
            self.dropped += 1
            return
        line = json.dumps(self._fields(record), ensure_ascii=False)
        self._batch.append(line)
        self.forwarded += 1
        self.forwarded_bytes += len(line)
        if len(self._batch) >= BATCH_RECORDS or time.monotonic() - self._last_sent >= BATCH_SECONDS:
            self.flush()

    def _fields(self, record: logging.LogRecord) -> dict[str, Any]:
        message = record.getMessage()
        if len(message) > MAX_MESSAGE_CHARS:
            message = message[:MAX_MESSAGE_CHARS] + f"... ({len(message) - MAX_MESSAGE_CHARS} characters cut)"
        exc_text = record.exc_text
        if record.exc_info and not exc_text:
            exc_text = "".join(traceback.format_exception(*record.exc_info))[-MAX_MESSAGE_CHARS:]
        return {
            "name": record.name, "levelno": record.levelno, "levelname": record.levelname, "msg": message,
            "created": record.created, "pathname": record.pathname, "lineno": record.lineno,
            "funcName": record.funcName, "threadName": record.threadName, "exc_text": exc_text, "worker": self._worker,
        }  # fmt: skip

    def flush(self) -> None:
        if self._batch:
            self._send(m.TaskLog(self._task_id, m.LogStream.RECORDS, "\n".join(self._batch)))
            self._batch = []
        self._last_sent = time.monotonic()

    def close(self) -> None:
        if self.dropped:
            note = logging.LogRecord(
                DROP_LOGGER, logging.WARNING, __file__, 0,
                f"{self.dropped} logging records of task {self._task_id.hex()} were not forwarded: a task forwards "
                f"at most {MAX_RECORDS_PER_TASK} records and {MAX_BYTES_PER_TASK >> 20} MiB",
                None, None,
            )  # fmt: skip
            self._batch.append(json.dumps(self._fields(note), ensure_ascii=False))
        self.flush()


class _ForwardingHandler(logging.Handler):
    """On the root logger: a record emitted on a forwarding task's thread goes to that task's records."""

    def __init__(self) -> None:
        super().__init__(logging.NOTSET)
        self.by_thread: dict[int, TaskRecords] = {}

    def emit(self, record: logging.LogRecord) -> None:
        records = self.by_thread.get(threading.get_ident())
        if records is not None:
            try:
                records.add(record)
            except Exception:
                self.handleError(record)

    def is_forwarded(self, record: logging.LogRecord) -> bool:
        records = self.by_thread.get(threading.get_ident())
        return records is not None and records.wants(record)


class _NotForwarded(logging.Filter):
    """On the root logger's other handlers: a record the forwarding handler forwards is the client's now, and the
    processor's own log skips it. Written there as well, it showed twice where the worker shares the client's
    terminal (SchedulerClusterCombo), three times with a handler inherited from the program that started the
    cluster."""

    def __init__(self, forwarding: _ForwardingHandler) -> None:
        super().__init__()
        self._forwarding = forwarding

    def filter(self, record: logging.LogRecord) -> bool:
        return not self._forwarding.is_forwarded(record)


_handler: _ForwardingHandler | None = None


def _installed(level: int) -> _ForwardingHandler:
    global _handler
    root = logging.getLogger()
    if _handler is None:
        _handler = _ForwardingHandler()
        root.addHandler(_handler)
    for handler in root.handlers:  # each time: a task may have added handlers since
        if handler is not _handler and not any(isinstance(kept, _NotForwarded) for kept in handler.filters):
            handler.addFilter(_NotForwarded(_handler))
    wanted = max(level, 1)  # NOTSET (0) asks for every record
    if root.level > wanted:
        for handler in root.handlers:
            if handler is not _handler and handler.level < root.level:
                handler.setLevel(root.level)  # the processor's own log stays as it was
        root.setLevel(wanted)
    return _handler


class LogCapture:
    """While active (around a task's call), the task's logging records go to its client, if it asked."""

    def __init__(
        self,
        task_id: TaskID,
        forwarding: m.LogForwarding | None,
        send: Callable[[m.TaskLog], None],
        worker: str,
    ) -> None:
        self._records = TaskRecords(task_id, forwarding, send, worker) if forwarding is not None else None
        self._level = forwarding.level if forwarding is not None else 0

    def __enter__(self) -> None:
        if self._records is not None:
            _installed(self._level).by_thread[threading.get_ident()] = self._records

    def __exit__(self, *exc: object) -> None:
        if self._records is not None and _handler is not None:
            if _handler.by_thread.get(threading.get_ident()) is self._records:
                del _handler.by_thread[threading.get_ident()]
            self._records.close()
