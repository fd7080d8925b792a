"""How the agent tells the scheduler of tasks that ended here without a result of their own (pure): the failures
it makes when a processor dies or is killed, and when a task times out. Each is logged as it is made."""

from __future__ import annotations

import logging

from scaler.protocol import messages as m
from scaler.protocol.ids import TaskID

logger = logging.getLogger(__name__)


def where(pid: int) -> str:
    """How a processor is named in a report: by its pid, or not at all for a slot that is not a local process."""
    return f" (pid {pid})" if pid else ""


def processor_died(
    pid: int,
    computing: TaskID | None,
    parked: list[TaskID],
    description: str,
    answered: bool,
    out_of_memory: str = "",
) -> list[m.TaskResult]:
    """A processor died on its own (`description`: "killed by SIGSEGV", ...). The task it computed fails with it
    (unless it was stopped and answered for already) and is to blame: the parents waiting there are lost and run
    again. With nothing computing there, the parents fail as if their own processor had died. A death for memory
    (`out_of_memory` says so, with the peak and the limit) fails the task with OUT_OF_MEMORY, which the scheduler
    does not retry: the same task on a worker of the same size would die the same way."""
    reports = []
    if computing is not None and not answered:
        if out_of_memory:
            text = f"{out_of_memory}{where(pid)}"
            status = m.ResultStatus.OUT_OF_MEMORY
        else:
            text, status = (
                f"the processor{where(pid)} running the task died: {description}",
                m.ResultStatus.PROCESSOR_DIED,
            )
        logger.warning("task %s: %s", computing.hex(), text)
        reports.append(m.TaskResult(computing, status, error_message=text))
    if computing is not None:
        why = f"the processor{where(pid)} it waited in died while running another task: {description}"
        return reports + lost(parked, why)
    for task_id in parked:
        text = f"the processor{where(pid)} the task waited in for its nested tasks died: {description}"
        logger.warning("task %s: %s", task_id.hex(), text)
        reports.append(m.TaskResult(task_id, m.ResultStatus.PROCESSOR_DIED, error_message=text))
    return reports


def lost(task_ids: list[TaskID], why: str) -> list[m.TaskResult]:
    """Parked tasks taken down with their processor by another task: the scheduler runs them again (HOST_LOST)."""
    reports = []
    for task_id in task_ids:
        text = f"this task was waiting for its nested tasks, and {why}"
        logger.warning("task %s: %s", task_id.hex(), text)
        reports.append(m.TaskResult(task_id, m.ResultStatus.HOST_LOST, error_message=text))
    return reports


def timed_out(task_id: TaskID, task_timeout_seconds: float) -> m.TaskResult:
    text = f"the task ran longer than the task timeout of {task_timeout_seconds:g} s and was stopped"
    return m.TaskResult(task_id, m.ResultStatus.TIMED_OUT, error_message=text)
