"""The worker's execution seam: where the tasks the agent core places actually run.

The agent core (`worker/agent/core.py`) decides which task runs on which *processor*: an execution slot
named by an id the core chose (bytes, unique within the worker). It speaks in effects (spawn a processor,
send it a message, kill it) that the agent shell (`worker/agent/shell.py`) hands to an `Executor`, and it hears
what the executor reports back. Nothing in the agent shell or core assumes a processor is an OS process:
no pid, fork or socket is needed. `ZygoteExecutor` (`executors/zygote.py`) runs each processor as a process
forked from the worker's zygote; a proxy worker that offloads tasks (AWS Batch, IBM Symphony) implements the same
six methods with one processor per remote job in flight, and `run_agent(config, worker_id, executor, slots)`
(`worker/process.py`) runs an agent around it.

The contract, from the executor's side. Every call comes from the agent's event loop; every report must
be made on that loop too (from another thread: `loop.call_soon_threadsafe`). No method may block the loop
or raise: a failure becomes a report.

1. `start(loop, listener)`: called once, before anything else. Keep `listener` for the reports.
2. `spawn(processor_id)`: start a processor. When it can take work, report
   `on_processor_messages(processor_id, [ProcessorReady(pid)])`, where `pid` is its OS process id or 0 when
   it is not a local process (a remote executor reports ready at once). A processor that cannot start
   reports `on_processor_exit(processor_id, why)` instead; after 3 start failures in a row (or 1 with a
   preload) the worker stops with exit code 1.
3. `send(processor_id, message)`: deliver a message from the core; ignore ids that are gone. Delivery may wait
   for `flush()`, which the agent calls after each batch of the core's effects (so that a task and those staged
   behind it leave together); an executor that delivers at once does nothing on flush. A processor receives
   `HelloReply` (its `object_storage_address` is where task payloads live: keep it for the next tasks), `Task`,
   `TaskCancel` and `ProcessorResume`, and does with them what the processor protocol says
   (`scaler.protocol.processor_protocol`: the one statement of what a processor does with its tasks: one computes
   at a time, in the order received; a TaskCancel withdraws a task not started and stops one computing or
   parked; a parked task goes on when given the turn back).
4. Reports while running, through `on_processor_messages(processor_id, messages)`, as the processor protocol
   says: exactly one `TaskResult` per task, in order (CANCELED for a task a `TaskCancel` withdrew or stopped);
   `ProcessorBlocked` / `ProcessorResumeRequest` around waits on nested tasks (an executor whose tasks never wait
   on nested futures never sends them); and `TaskLog` for streamed output.
   `scaler.worker.task_execution.TaskExecutor` loads a task's function and arguments from object storage, calls
   it and stores its result: a proxy can reuse it to build results.
5. `kill(processor_id, reason)`: stop the processor now, whatever it runs (the task was cancelled, timed out,
   the processor is not needed, the worker stops), parked parents included (the core reports those lost).
   A remote executor cancels the remote job. Then report
   `on_processor_exit(processor_id, description)` once: the core keeps the slot counted until it hears it.
   A kill of an unknown or finished processor does nothing. Reports of a killed processor are ignored.
6. A processor that ends on its own is reported with `on_processor_exit(processor_id, description)` too
   ("killed by SIGKILL", "exit code 1", "Batch job 42 FAILED: host terminated"); the core fails the task it
   ran with `ProcessorDiedError` carrying that description.
7. `usage(processor_id)`: (cpu percent, memory bytes as the kernel charges it: PSS, else RSS) for heartbeats and
   the memory watch (worker/memory.py); (0.0, 0) when it cannot tell.
8. `close()`: kill every processor and release everything; no report is expected afterwards.
9. `on_executor_failed(reason)`: the executor cannot go on at all (the zygote died, the remote system
   refuses every call): the worker stops with exit code 1 and its tasks are re-dispatched elsewhere.
10. `max_staged_tasks`: how many Tasks a processor may be sent beyond the one it computes. With more than 0, the
   core stages tiny tasks in computing processors (agent/placement.py), which then hold STAGED tasks (processor
   protocol rules 1, 2 and 4). A remote executor, whose processors are one job each, says 0.
"""

from __future__ import annotations

import asyncio
from typing import Protocol

from scaler.protocol import messages as m


class ExecutorListener(Protocol):
    """What an executor reports to the agent shell (`WorkerAgent`), always on the agent's event loop."""

    def on_processor_messages(self, processor_id: bytes, messages: list[m.Message]) -> None: ...

    def on_processor_exit(self, processor_id: bytes, description: str) -> None: ...

    def on_executor_failed(self, reason: str) -> None: ...


class Executor(Protocol):
    """Runs the agent core's processors; the module docstring is the contract (numbers refer to it)."""

    #: (10) Tasks a processor may be sent beyond the one it computes.
    max_staged_tasks: int

    def start(self, loop: asyncio.AbstractEventLoop, listener: ExecutorListener) -> None:
        """(1) Keep the loop and the listener; called once, first."""

    def spawn(self, processor_id: bytes) -> None:
        """(2) Start a processor; report ProcessorReady, or its exit when it cannot start."""

    def send(self, processor_id: bytes, message: m.Message) -> None:
        """(3) Deliver HelloReply, Task or ProcessorResume to a processor; ignore unknown ids."""

    def flush(self) -> None:
        """(3) Deliver what `send` holds."""

    def kill(self, processor_id: bytes, reason: str) -> None:
        """(5) Stop a processor now (cancel its remote job) and report its exit once."""

    def usage(self, processor_id: bytes) -> tuple[float, int]:
        """(7) (cpu percent, charged memory bytes) of a processor; (0.0, 0) when unknown."""

    def close(self) -> None:
        """(8) Kill every processor and release everything."""
