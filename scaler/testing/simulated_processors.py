"""An `Executor` (worker/executors/contract.py) whose processors are simulated on a clock: each keeps the real
processor core (`scaler.worker.processor.task_line.TaskLine`, which decides what computes, what is staged and what
a TaskCancel withdraws) and "computes" each task for the time its script says, in simulated time.

A task's script travels in its body (`script_body`): how long it computes, and how it ends (a result, an error,
the processor's death, or never). Every start is written to a shared `RunLog`, so that a test can check that each
task ran exactly once across every worker of a simulated stack, and what each processor held while it computed.
Tasks never wait on nested futures here (no parking).

Given `sockets` and a worker id, each processor has its own link to the scheduler, as a real one does
(`processor/outlet.py`, under the real route core `processor/result_route.py`): once the agent configures it, it
says hello on a DEALER of the memory network, and while the route is open the results of its tasks go on it, the
agent getting a ResultSent. The ending CRASH_AFTER_SEND sends the result on the link and dies before the agent
hears of it; CRASH_BEFORE_LEAVING tells the agent and dies before the message left.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, TypeGuard

from scaler.io.clock import Clock, Timer
from scaler.io.sockets import Sockets
from scaler.io.zmq_async import AsyncSocket
from scaler.protocol import codec
from scaler.protocol import messages as m
from scaler.protocol.handshake import local_python_version
from scaler.protocol.ids import TaskID
from scaler.protocol.processor_protocol import ProcessorOutcome
from scaler.worker.executors.contract import ExecutorListener
from scaler.worker.processor.outlet import processor_identity
from scaler.worker.processor.result_route import ResultRoute
from scaler.worker.processor.task_line import Answer, Interrupt, LineTask, TaskLine

#: What a script's task does at its end.
SUCCESS, ERROR, CRASH, HANG = "success", "error", "crash", "hang"
#: Its result leaves on the processor's link, then the processor dies before the agent hears of it.
CRASH_AFTER_SEND = "crash-after-send"
#: The agent hears the result was sent on the link (ResultSent), and the processor dies before the message left.
CRASH_BEFORE_LEAVING = "crash-before-leaving"
ENDINGS = (SUCCESS, ERROR, CRASH, HANG, CRASH_AFTER_SEND, CRASH_BEFORE_LEAVING)
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
    staged: list[TaskID] = field(default_factory=list)  #: tasks that reached a processor while another computed

    def runs_of(self, task_id: TaskID) -> list[SimulatedRun]:
        return [run for run in self.runs if run.task_id == task_id]


@dataclass(eq=False)
class _Processor:
    processor_id: bytes
    line: TaskLine[LineTask]
    inbox: list[m.Message] = field(default_factory=list)  #: sent, delivered at the next flush
    timer: Timer | None = None  #: the end of the computing task
    route: ResultRoute = field(default_factory=ResultRoute)
    link: AsyncSocket | None = None  #: its own DEALER to the scheduler, once configured


class SimulatedProcessors:
    """Simulated processors for one worker agent (`name` says which, in the run log)."""

    def __init__(
        self,
        clock: Clock,
        log: RunLog,
        name: str,
        max_staged_tasks: int = 16,
        sockets: Sockets | None = None,
        worker_id: bytes = b"",
        scheduler_address: str = "",
    ) -> None:
        """With `sockets` (the worker's), `worker_id` and `scheduler_address`, each processor has its own link to the
        scheduler for its results (the module docstring)."""
        self.max_staged_tasks = max_staged_tasks
        self._clock = clock
        self._log = log
        self._name = name
        self._processors: dict[bytes, _Processor] = {}
        self._listener: ExecutorListener | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._sockets = sockets
        self._worker_id = worker_id
        self._scheduler_address = scheduler_address
        self.closed = False
        self.sent_on_links = 0  #: results the processors sent on their own links

    # ------------------------------------------------------------ the Executor contract

    def start(self, loop: asyncio.AbstractEventLoop, listener: ExecutorListener) -> None:
        self._loop = loop
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
        """One read of the processor's channel (what the agent sent since the last flush)."""
        line = processor.line
        for message in messages:
            if isinstance(message, m.Task) and line.computing is not None:
                self._log.staged.append(message.task_id)
            elif isinstance(message, m.HelloReply):
                self._configure(processor)
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
            SimulatedRun(
                task.task_id, self._name, processor.processor_id, self._clock.now(), task.task_id in self._log.staged
            )
        )
        script = read_script(task.body)
        if script.ending != HANG:
            processor.timer = self._clock.call_later(script.seconds, self._finish, processor, record, script)

    def _finish(self, processor: _Processor, record: LineTask, script: TaskScript) -> None:
        processor.timer = None
        result = self._result(record.task.task_id, SUCCESS, script.value)
        if script.ending == CRASH_AFTER_SEND and processor.route.is_open:
            self._send_on_link(processor, [result])
        elif script.ending == CRASH_BEFORE_LEAVING and processor.route.is_open and self._listener is not None:
            notice = m.ResultSent(result.task_id, codec.encode(result))
            self._listener.on_processor_messages(processor.processor_id, [notice])
        if script.ending in (CRASH, CRASH_AFTER_SEND, CRASH_BEFORE_LEAVING):
            del self._processors[processor.processor_id]
            self._close_link(processor)
            self._exited(processor.processor_id, CRASH_DESCRIPTION)
            return
        self._report(processor, self._end(processor, record, script))

    def _end(self, processor: _Processor, record: LineTask, script: TaskScript) -> list[m.Message]:
        """The task's computing is over: its result, then the next task waiting for the turn starts."""
        line = processor.line
        task_id = record.task.task_id
        if line.ends(record) is ProcessorOutcome.UNWOUND:
            result = m.TaskResult(task_id, m.ResultStatus.CANCELED)
        else:
            result = self._result(task_id, script.ending, script.value)
        messages: list[m.Message] = [result]
        if line.passes_turn(record):
            following = line.take_turn([])
            messages += self._carry_out(processor)
            if following is not None:
                self._start(processor, following)
        return messages

    @staticmethod
    def _result(task_id: TaskID, ending: str, value: bytes) -> m.TaskResult:
        if ending == ERROR:
            return m.TaskResult(task_id, m.ResultStatus.ERROR, m.PayloadKind.NONE, error_message="simulated error")
        return m.TaskResult(task_id, m.ResultStatus.SUCCESS, m.PayloadKind.INLINE, value)

    def _report(self, processor: _Processor, messages: list[m.Message]) -> None:
        if not messages or self._listener is None or processor.processor_id not in self._processors:
            return
        if processor.route.is_open:  # the results of tasks that ran go on the link; the agent hears ResultSent
            frames = iter(self._send_on_link(processor, [message for message in messages if _ran(message)]))
            messages = [m.ResultSent(message.task_id, next(frames)) if _ran(message) else message
                        for message in messages]  # fmt: skip
        self._listener.on_processor_messages(processor.processor_id, messages)

    # ------------------------------------------------------------ the processor's own link

    def _configure(self, processor: _Processor) -> None:
        """The agent configured the processor: it opens its link (once) and says hello on it, as outlet.py does."""
        if self._sockets is None or self._loop is None:
            return
        if processor.link is None:
            identity = processor_identity(self._worker_id, processor.processor_id)
            sock = self._sockets.dealer(self._scheduler_address, identity=identity)
            processor.link = AsyncSocket(self._loop, sock, lambda frames: self._heard(processor, frames))
        if processor.route.configured():
            self._say_hello(processor)

    def _heard(self, processor: _Processor, frames: list[Any]) -> None:
        for frame in frames:
            for part in codec.split(bytes(frame)):
                if processor.route.heard(codec.decode(part)):
                    self._say_hello(processor)

    def _say_hello(self, processor: _Processor) -> None:
        info = m.ProcessorInfo(processor.processor_id, self._worker_id)
        hello = m.Hello(m.PROTOCOL_VERSION, local_python_version(), 0, "sim", info)
        assert processor.link is not None
        processor.link.send([codec.encode(hello)])

    def _send_on_link(self, processor: _Processor, results: list[m.Message]) -> list[bytes]:
        frames = [codec.encode(result) for result in results]
        if frames and processor.link is not None:
            processor.link.send(frames)
            self.sent_on_links += len(frames)
        return frames

    @staticmethod
    def _close_link(processor: _Processor) -> None:
        if processor.link is not None:
            processor.link.close()
            processor.link = None


def _ran(message: m.Message) -> TypeGuard[m.TaskResult]:
    """A result of a task that ran (a CANCELED answer goes to the agent only)."""
    return isinstance(message, m.TaskResult) and message.status is not m.ResultStatus.CANCELED
