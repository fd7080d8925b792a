"""An `Executor` (worker/executors/contract.py) whose processors are simulated on a clock: each keeps the real
processor core (`scaler.worker.processor.task_line.TaskLine`, which decides what computes, what is staged and what
a TaskCancel withdraws) and "computes" each task for the time its script says, in simulated time.

A task's script travels in its body (`script_body`): how long it computes, and how it ends (a result, an error,
the processor's death, or never). Every start is written to a shared `RunLog`, so that a test can check that each
task ran exactly once across every worker of a simulated stack, and what each processor held while it computed.
Tasks never wait on nested futures here (no parking).

Each processor has its own link to the scheduler, as a real one does: once the agent configures it, it says hello
on a DEALER the agent's shell opens for it (`listener.open_link`, worker/executors/hosted_link.py), over the memory
network; its tasks come there and everything about them leaves there. The ending CRASH_AFTER_SEND sends the result on
the link and dies at once.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from scaler.io.clock import Clock, Timer
from scaler.protocol import messages as m
from scaler.protocol.ids import TaskID
from scaler.protocol.processor_protocol import ProcessorOutcome
from scaler.worker.executors.contract import ExecutorListener
from scaler.worker.executors.hosted_link import HostedLink
from scaler.worker.processor.task_line import Answer, GiveBack, Interrupt, LineTask, TaskLine

#: What a script's task does at its end.
SUCCESS, ERROR, CRASH, HANG = "success", "error", "crash", "hang"
#: Its result leaves on the processor's link, then the processor dies.
CRASH_AFTER_SEND = "crash-after-send"
ENDINGS = (SUCCESS, ERROR, CRASH, HANG, CRASH_AFTER_SEND)
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
    if ending not in ENDINGS:
        raise ValueError(f"unknown ending {ending!r}")
    return f"sim|{seconds!r}|{ending}|".encode() + value


def read_script(body: bytes) -> TaskScript:
    tag, seconds, ending, value = body.split(b"|", 3)
    if tag != b"sim":
        raise ValueError(f"not a simulated task's body: {body[:20]!r}")
    return TaskScript(float(seconds), ending.decode(), value)


@dataclass(frozen=True, slots=True)
class SimulatedRun:
    """A task's start in a processor."""

    task_id: TaskID
    worker: str
    processor_id: bytes
    started_at: float
    was_staged: bool  #: it reached its processor while another task computed there


@dataclass
class RunLog:
    """What every simulated processor of a stack did."""

    runs: list[SimulatedRun] = field(default_factory=list)
    withdrawn: list[TaskID] = field(default_factory=list)  #: staged tasks a TaskCancel took out of a processor
    handed_back: list[TaskID] = field(default_factory=list)  #: staged tasks a TaskReturn took back from a processor
    staged: list[TaskID] = field(default_factory=list)  #: tasks that reached a processor while another computed

    def runs_of(self, task_id: TaskID) -> list[SimulatedRun]:
        return [run for run in self.runs if run.task_id == task_id]


@dataclass(eq=False)
class _Processor:
    processor_id: bytes
    line: TaskLine[LineTask]
    timer: Timer | None = None  #: the end of the computing task
    link: HostedLink | None = None  #: its own link to the scheduler, once configured
    started_at: float = 0.0  #: when its computing task started (the run stamps of its result)


class SimulatedProcessors:
    """Simulated processors for one worker agent (`name` says which, in the run log)."""

    def __init__(self, clock: Clock, log: RunLog, name: str, max_staged_tasks: int = 64) -> None:
        self.max_staged_tasks = max_staged_tasks
        self._clock = clock
        self._log = log
        self._name = name
        self._processors: dict[bytes, _Processor] = {}
        self._listener: ExecutorListener | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.closed = False

    # ------------------------------------------------------------ the Executor contract

    def start(self, loop: asyncio.AbstractEventLoop, listener: ExecutorListener) -> None:
        self._loop = loop
        self._listener = listener

    def spawn(self, processor_id: bytes) -> None:
        self._processors[processor_id] = _Processor(processor_id, TaskLine(0, LineTask))
        self._clock.call_later(START_SECONDS, self._ready, processor_id)

    def send(self, processor_id: bytes, message: m.Message) -> None:
        processor = self._processors.get(processor_id)
        if processor is not None and isinstance(message, m.HelloReply) and self._listener is not None:
            if processor.link is None:
                processor.link = self._listener.open_link(
                    processor_id, lambda work: self._read(processor, work), self.max_staged_tasks
                )
            processor.link.configure()

    def flush(self) -> None:
        pass  # configuration is delivered at once

    def kill(self, processor_id: bytes, reason: str) -> None:
        processor = self._processors.pop(processor_id, None)
        if processor is None:
            return
        if processor.timer is not None:
            processor.timer.cancel()
        self._close_link(processor)
        asyncio.get_running_loop().call_soon(self._exited, processor_id, "killed by SIGKILL")

    def usage(self, processor_id: bytes) -> tuple[float, int]:
        return 0.0, 0

    def close(self) -> None:
        self.closed = True
        for processor in self._processors.values():
            if processor.timer is not None:
                processor.timer.cancel()
            self._close_link(processor)
        self._processors.clear()

    # ------------------------------------------------------------ a processor's life

    def _ready(self, processor_id: bytes) -> None:
        if processor_id in self._processors and self._listener is not None:
            self._listener.on_processor_messages(processor_id, [m.ProcessorReady(0)])

    def _exited(self, processor_id: bytes, description: str) -> None:
        if self._listener is not None and not self.closed:
            self._listener.on_processor_exit(processor_id, description)

    def _read(self, processor: _Processor, messages: list[m.Message]) -> None:
        """What came on the processor's link."""
        if processor.processor_id not in self._processors:
            return
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
        """The line's instructions: answers for withdrawn tasks, tasks handed back; a stopped computing task ends (no
        parking here, so nothing else comes up)."""
        instructions, processor.line.instructions = processor.line.instructions, []
        answers: list[m.Message] = []
        stopped: list[LineTask] = []
        for instruction in instructions:
            if isinstance(instruction, Answer):
                self._log.withdrawn.append(instruction.task_id)
                answers.append(m.TaskCancelConfirm(instruction.task_id, m.CancelOutcome.CANCELED))
            elif isinstance(instruction, GiveBack):
                self._log.handed_back += instruction.task_ids
                answers.append(m.TaskReturn(instruction.task_ids))
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
            SimulatedRun(
                task.task_id, self._name, processor.processor_id, self._clock.now(), task.task_id in self._log.staged
            )
        )
        processor.started_at = self._clock.now()
        script = read_script(task.body)
        if script.ending != HANG:
            processor.timer = self._clock.call_later(script.seconds, self._finish, processor, record, script)

    def _finish(self, processor: _Processor, record: LineTask, script: TaskScript) -> None:
        processor.timer = None
        if script.ending == CRASH_AFTER_SEND:
            self._report(processor, [self._result(processor, record.task.task_id, SUCCESS, script.value)])
        if script.ending in (CRASH, CRASH_AFTER_SEND):
            del self._processors[processor.processor_id]
            self._close_link(processor)
            self._exited(processor.processor_id, CRASH_DESCRIPTION)
            return
        self._report(processor, self._end(processor, record, script))

    def _end(self, processor: _Processor, record: LineTask, script: TaskScript) -> list[m.Message]:
        """The task's computing is over: its result, then the next task waiting for the turn starts."""
        line = processor.line
        task_id = record.task.task_id
        messages: list[m.Message]
        if line.ends(record) is ProcessorOutcome.UNWOUND:
            messages = [m.TaskCancelConfirm(task_id, m.CancelOutcome.CANCELED)]
        else:
            messages = [self._result(processor, task_id, script.ending, script.value)]
        if line.passes_turn(record):
            following = line.take_turn([])
            messages += self._carry_out(processor)
            if following is not None:
                self._start(processor, following)
        return messages

    def _result(self, processor: _Processor, task_id: TaskID, ending: str, value: bytes) -> m.TaskResult:
        """Stamped with when it ran, as a real processor's (the scheduler learns run times from them)."""
        ran = m.RunStamps(processor.started_at, self._clock.now())
        if ending == ERROR:
            error = "simulated error"
            return m.TaskResult(task_id, m.ResultStatus.ERROR, m.PayloadKind.NONE, error_message=error, ran=ran)
        return m.TaskResult(task_id, m.ResultStatus.SUCCESS, m.PayloadKind.INLINE, value, ran=ran)

    def _report(self, processor: _Processor, messages: list[m.Message]) -> None:
        if messages and processor.link is not None and processor.processor_id in self._processors:
            processor.link.send(messages)

    @staticmethod
    def _close_link(processor: _Processor) -> None:
        if processor.link is not None:
            processor.link.close()
            processor.link = None
