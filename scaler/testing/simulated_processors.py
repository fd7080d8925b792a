"""An `Executor` (worker/executors/contract.py) whose processors are simulated on a clock: each keeps the real
processor core (`scaler.worker.processor.task_line.TaskLine`, which decides what computes, what is staged and what
a TaskCancel withdraws) and "computes" each task for the time its script says, in simulated time.

A task's script travels in its body (`script_body`): how long it computes, and how it ends (a result, an error,
the processor's death, or never). Every start is written to a shared `RunLog`, so that a test can check that each
task ran exactly once across every worker of a simulated stack, and what each processor held while it computed.
Tasks never wait on nested futures here (no parking).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from scaler.io.clock import Clock, Timer
from scaler.protocol import messages as m
from scaler.protocol.ids import TaskID
from scaler.worker.executors.contract import ExecutorListener
from scaler.worker.processor.task_line import Answer, Interrupt, LineTask, TaskLine
from scaler.worker.processor_protocol import Outcome

#: What a script's task does at its end.
SUCCESS, ERROR, CRASH, HANG = "success", "error", "crash", "hang"
#: How long a simulated processor takes to start (a fork from the zygote).
START_SECONDS = 0.002
#: What a processor that crashed is reported as (a task called os._exit(3)).
CRASH_DESCRIPTION = "exit code 3"


@dataclass(frozen=True, slots=True)
class TaskScript:
    seconds: float = 0.0
    ending: str = SUCCESS  #: SUCCESS, ERROR, CRASH (its processor dies) or HANG (it computes until stopped)
    value: bytes = b""


def script_body(seconds: float = 0.0, ending: str = SUCCESS, value: bytes = b"") -> bytes:
    """A task body that a simulated processor reads as a script."""
    if ending not in (SUCCESS, ERROR, CRASH, HANG):
        raise ValueError(f"unknown ending {ending!r}")
    return f"sim|{seconds!r}|{ending}|".encode() + value


def read_script(body: bytes) -> TaskScript:
    tag, seconds, ending, value = body.split(b"|", 3)
    if tag != b"sim":
        raise ValueError(f"not a simulated task's body: {body[:20]!r}")
    return TaskScript(float(seconds), ending.decode(), value)


@dataclass(frozen=True, slots=True)
class Run:
    """A task's start in a processor."""

    task_id: TaskID
    worker: str
    processor_id: bytes
    started_at: float
    was_staged: bool  #: it reached its processor while another task computed there


@dataclass
class RunLog:
    """What every simulated processor of a stack did."""

    runs: list[Run] = field(default_factory=list)
    withdrawn: list[TaskID] = field(default_factory=list)  #: staged tasks a TaskCancel took out of a processor
    staged: list[TaskID] = field(default_factory=list)  #: tasks that reached a processor while another computed

    def runs_of(self, task_id: TaskID) -> list[Run]:
        return [run for run in self.runs if run.task_id == task_id]


@dataclass(eq=False)
class _Processor:
    processor_id: bytes
    line: TaskLine[LineTask]
    inbox: list[m.Message] = field(default_factory=list)  #: sent, delivered at the next flush
    timer: Timer | None = None  #: the end of the computing task


class SimulatedProcessors:
    """Simulated processors for one worker agent (`name` says which, in the run log)."""

    def __init__(self, clock: Clock, log: RunLog, name: str, max_staged_tasks: int = 16) -> None:
        self.max_staged_tasks = max_staged_tasks
        self._clock = clock
        self._log = log
        self._name = name
        self._processors: dict[bytes, _Processor] = {}
        self._listener: ExecutorListener | None = None
        self.closed = False

    # ------------------------------------------------------------ the Executor contract

    def start(self, loop: asyncio.AbstractEventLoop, listener: ExecutorListener) -> None:
        self._listener = listener

    def spawn(self, processor_id: bytes) -> None:
        self._processors[processor_id] = _Processor(processor_id, TaskLine(0, LineTask))
        self._clock.call_later(START_SECONDS, self._ready, processor_id)

    def send(self, processor_id: bytes, message: m.Message) -> None:
        processor = self._processors.get(processor_id)
        if processor is not None:
            processor.inbox.append(message)

    def flush(self) -> None:
        for processor in list(self._processors.values()):
            if processor.inbox:
                messages, processor.inbox = processor.inbox, []
                self._read(processor, messages)

    def kill(self, processor_id: bytes, reason: str) -> None:
        processor = self._processors.pop(processor_id, None)
        if processor is None:
            return
        if processor.timer is not None:
            processor.timer.cancel()
        asyncio.get_running_loop().call_soon(self._exited, processor_id, "killed by SIGKILL")

    def usage(self, processor_id: bytes) -> tuple[float, int]:
        return 0.0, 0

    def close(self) -> None:
        self.closed = True
        for processor in self._processors.values():
            if processor.timer is not None:
                processor.timer.cancel()
        self._processors.clear()

    # ------------------------------------------------------------ a processor's life

    def _ready(self, processor_id: bytes) -> None:
        if processor_id in self._processors and self._listener is not None:
            self._listener.on_processor_messages(processor_id, [m.ProcessorReady(0)])

    def _exited(self, processor_id: bytes, description: str) -> None:
        if self._listener is not None and not self.closed:
            self._listener.on_processor_exit(processor_id, description)

    def _read(self, processor: _Processor, messages: list[m.Message]) -> None:
        """One read of the processor's channel (what the agent sent since the last flush)."""
        line = processor.line
        for message in messages:
            if isinstance(message, m.Task) and line.computing is not None:
                self._log.staged.append(message.task_id)
        record = line.take_turn(messages)
        answers = self._carry_out(processor)
        if record is not None:
            self._start(processor, record)
        self._report(processor, answers)

    def _carry_out(self, processor: _Processor) -> list[m.Message]:
        """The line's instructions: answers for withdrawn tasks; a stopped computing task ends (no parking here,
        so nothing else comes up)."""
        instructions, processor.line.instructions = processor.line.instructions, []
        answers: list[m.Message] = []
        stopped: list[LineTask] = []
        for instruction in instructions:
            if isinstance(instruction, Answer):
                self._log.withdrawn.append(instruction.task_id)
                answers.append(m.TaskResult(instruction.task_id, m.ResultStatus.CANCELED))
            elif isinstance(instruction, Interrupt):
                if processor.timer is not None:
                    processor.timer.cancel()
                    processor.timer = None
                stopped.append(instruction.record)
        for record in stopped:
            answers += self._end(processor, record, TaskScript())
        return answers

    def _start(self, processor: _Processor, record: LineTask) -> None:
        task = record.task
        self._log.runs.append(
            Run(task.task_id, self._name, processor.processor_id, self._clock.now(), task.task_id in self._log.staged)
        )
        script = read_script(task.body)
        if script.ending != HANG:
            processor.timer = self._clock.call_later(script.seconds, self._finish, processor, record, script)

    def _finish(self, processor: _Processor, record: LineTask, script: TaskScript) -> None:
        processor.timer = None
        if script.ending == CRASH:
            del self._processors[processor.processor_id]
            self._exited(processor.processor_id, CRASH_DESCRIPTION)
            return
        self._report(processor, self._end(processor, record, script))

    def _end(self, processor: _Processor, record: LineTask, script: TaskScript) -> list[m.Message]:
        """The task's computing is over: its result, then the next task waiting for the turn starts."""
        line = processor.line
        task_id = record.task.task_id
        if line.ends(record) is Outcome.UNWOUND:
            result = m.TaskResult(task_id, m.ResultStatus.CANCELED)
        elif script.ending == ERROR:
            result = m.TaskResult(task_id, m.ResultStatus.ERROR, m.PayloadKind.NONE, error_message="simulated error")
        else:
            result = m.TaskResult(task_id, m.ResultStatus.SUCCESS, m.PayloadKind.INLINE, script.value)
        messages: list[m.Message] = [result]
        if line.passes_turn(record):
            following = line.take_turn([])
            messages += self._carry_out(processor)
            if following is not None:
                self._start(processor, following)
        return messages

    def _report(self, processor: _Processor, messages: list[m.Message]) -> None:
        if messages and self._listener is not None and processor.processor_id in self._processors:
            self._listener.on_processor_messages(processor.processor_id, messages)
