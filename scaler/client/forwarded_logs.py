"""Logging records a client's tasks emitted (`Client.forward_logging`, which asks for them with `forwarding`), handed
to the client's own `logging`.

Each line of a `records` TaskLog is one record as the worker sent it (scaler/worker/log_forwarding.py); it is
made a `LogRecord` again and handled by the logger of the same name here, with `task_id` (hex) and `worker` as
record attributes, so the client's handlers, filters and formatters see it as if the task had run locally. The
logger's level is not consulted again (the worker applied the level asked), but its handlers' levels are. A line
that is not a record is logged as a warning of this module, not raised: a bad line must not stop the client."""

from __future__ import annotations

import json
import logging

from scaler.protocol import messages as m

logger = logging.getLogger(__name__)

#: the attributes taken from the worker's line; anything else in it is ignored
_FIELDS = ("name", "levelno", "levelname", "msg", "created", "pathname", "lineno", "funcName", "threadName",
           "exc_text")  # fmt: skip


def forwarding(logger_name: str | None, level: int | str) -> m.LogForwarding:
    """What `Client.forward_logging(logger_name, level)` asks the workers for: the records of that logger and its
    children (every logger for None) at `level` or above (a number or a name: `logging.INFO` or "INFO")."""
    if isinstance(level, str):
        level = logging.getLevelName(level.upper())
    if not isinstance(level, int):
        raise ValueError(f"level must be a logging level (logging.INFO or 'INFO'), not {level!r}")
    return m.LogForwarding(level, logger_name or "")


def emit_records(log: m.TaskLog) -> None:
    task_id = log.task_id.hex()
    for line in log.text.splitlines():
        try:
            fields = json.loads(line)
            attributes = {name: fields[name] for name in _FIELDS if name in fields}
            attributes.update(args=None, exc_info=None, task_id=task_id, worker=fields.get("worker", ""))
            record = logging.makeLogRecord(attributes)
            record.msecs = (record.created - int(record.created)) * 1000
        except (ValueError, TypeError, KeyError) as error:
            logger.warning("task %s sent a logging record that cannot be read (%s): %.200r", task_id, error, line)
            continue
        logging.getLogger(record.name).handle(record)
