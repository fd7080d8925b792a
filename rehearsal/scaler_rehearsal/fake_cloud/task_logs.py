"""An ECS task's output in CloudWatch Logs, as the `awslogs` log driver puts it there: when the task definition's
container has `logConfiguration` `{"logDriver": "awslogs", "options": {"awslogs-group": G,
"awslogs-stream-prefix": P}}`, each line of the task's log goes to group G, stream `P/<container name>/<task id>`,
so that `logs.get_log_events` shows what a user would see in the console. Without such a configuration, as in
ECS, the output is nowhere but in the fake cloud's log folder.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any


def awslogs_stream(container: dict[str, Any], task_id: str) -> tuple[str, str] | None:
    """(group, stream) of the container's awslogs configuration, or None."""
    configuration = container.get("logConfiguration") or {}
    options = configuration.get("options") or {}
    if configuration.get("logDriver") != "awslogs" or not options.get("awslogs-group"):
        return None
    prefix = options.get("awslogs-stream-prefix")
    name = container.get("name", "container")
    stream = f"{prefix}/{name}/{task_id}" if prefix else task_id
    return str(options["awslogs-group"]), stream


def forward(account: str, region: str, destination: tuple[str, str], log: Path, offset: int) -> int:
    """The lines of `log` after `offset` put in the stream; the new offset (only whole lines are sent)."""
    from moto.logs.models import logs_backends

    try:
        with open(log, "rb") as file:
            file.seek(offset)
            data = file.read()
    except OSError:
        return offset
    complete = data[: data.rfind(b"\n") + 1]
    if not complete:
        return offset
    backend = logs_backends[account][region]
    group, stream = destination
    backend.ensure_log_group(group)
    backend.ensure_log_stream(group, stream)
    now = int(time.time() * 1000)
    events = [{"timestamp": now, "message": line} for line in complete.decode(errors="replace").splitlines() if line]
    if events:
        backend.put_log_events(group, stream, events)
    return offset + len(complete)
