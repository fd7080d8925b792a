"""The worker's execution seam: where its processors run.

The agent core (`worker/agent/core.py`) supervises the worker's *processors*: execution slots named by ids the core
chose (bytes, unique within the worker). It speaks in effects (spawn a processor, configure it, kill it) that the
agent shell (`worker/agent/shell.py`) hands to an `Executor`, and it hears what the executor reports back. Tasks never
pass the agent: each processor has its own link to the scheduler, where its tasks come and everything about them
leaves (docs/protocol.md section 3.7), and what a processor does with them is the processor protocol's
(`scaler.protocol.processor_protocol`: one computes at a time, in priority order; a TaskCancel withdraws a task not
started and stops one computing or parked; a TaskReturn hands back those not started; a parked task goes on once its
futures are done). Nothing in the agent assumes a processor is an OS process: no pid, fork or socket is needed.
`ZygoteExecutor` (`executors/zygote.py`) runs each processor as a process forked from the worker's zygote, which opens
its own link (processor/outlet.py); a proxy worker that offloads tasks (AWS Batch, IBM Symphony) implements the same
methods with one processor per remote job in flight, whose link the agent shell opens for it in the agent's process
(`listener.open_link`: executors/hosted_link.py), and `run_agent(config, worker_id, executor, slots)`
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
3. `send(processor_id, message)`: the agent configures a ready processor with a `HelloReply` (its
   `object_storage_address` is where task payloads live), once the worker is registered and again each time it
   registers again: the processor then says hello on its link (`listener.open_link(processor_id, on_work,
   max_staged_tasks)` gives an in-process processor its link: `configure()` says hello, `on_work` is handed what comes
   on it, `send` says what the processor says). Ignore ids that are gone. Delivery may wait for `flush()`, which the
   agent calls after each batch of the core's effects; an executor that delivers at once does nothing on flush.
4. On its link, a processor answers every task exactly once, as the processor protocol says: a `TaskResult`, a
   `TaskCancelConfirm` for one a `TaskCancel` withdrew or stopped, or a `TaskReturn` naming those handed back;
   `ProcessorBlocked` / `ProcessorResumeRequest` around waits on nested tasks (an executor whose tasks never wait
   on nested futures never sends them), `TaskLog` for streamed output. `scaler.worker.task_execution.TaskExecutor`
   loads a task's function and arguments from object storage, calls it and stores its result: a proxy can reuse it.
5. `kill(processor_id, reason)`: stop the processor now, whatever it runs (the scheduler asked: a task was cancelled
   or timed out, or the processor is not needed; or the worker stops), and what its task started with it (the
   zygote SIGTERMs the processes a killed processor started). A remote executor cancels the remote job. Then
   report `on_processor_exit(processor_id, description)` once. A kill of an unknown or finished processor does
   nothing. Reports of a killed processor are ignored.
6. A processor that ends on its own is reported with `on_processor_exit(processor_id, description)` too
   ("killed by SIGKILL", "exit code 1", "Batch job 42 FAILED: host terminated"); the scheduler fails the task it
   computed with `ProcessorDiedError` carrying that description. Its link is closed.
7. `usage(processor_id)`: (cpu percent, memory bytes as the kernel charges it: PSS, else RSS) for heartbeats and
   the memory watch (worker/memory.py); (0.0, 0) when it cannot tell.
8. `close()`: kill every processor and release everything; no report is expected afterwards.
9. `on_executor_failed(reason)`: the executor cannot go on at all (the zygote died, the remote system
   refuses every call): the worker stops with exit code 1 and its tasks are re-dispatched elsewhere.
10. `max_staged_tasks`: how many tasks a processor may hold beyond the one it computes (its link's hello says so; the
   scheduler stages tiny tasks in processors that take some). A remote executor, whose processors are one job each,
   says 0.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from scaler.protocol import messages as m

if TYPE_CHECKING:
    from scaler.worker.executors.hosted_link import HostedLink


class ExecutorListener(Protocol):
    """What an executor reports to the agent shell (`WorkerAgent`), always on the agent's event loop."""

    def on_processor_messages(self, processor_id: bytes, messages: list[m.Message]) -> None: ...

    def on_processor_exit(self, processor_id: bytes, description: str) -> None: ...

    def on_executor_failed(self, reason: str) -> None: ...

    def open_link(
        self, processor_id: bytes, on_work: Callable[[list[m.Message]], None], max_staged_tasks: int = 0
    ) -> HostedLink:
        """(3) The link to the scheduler of a processor that lives in the agent's process."""


class Executor(Protocol):
    """Runs the agent core's processors; the module docstring is the contract (numbers refer to it)."""

    #: (10) Tasks a processor may be sent beyond the one it computes.
    max_staged_tasks: int

    def start(self, loop: asyncio.AbstractEventLoop, listener: ExecutorListener) -> None:
        """(1) Keep the loop and the listener; called once, first."""

    def spawn(self, processor_id: bytes) -> None:
        """(2) Start a processor; report ProcessorReady, or its exit when it cannot start."""

    def send(self, processor_id: bytes, message: m.Message) -> None:
        """(3) Deliver a HelloReply to a processor (it then says hello on its link); ignore unknown ids."""

    def flush(self) -> None:
        """(3) Deliver what `send` holds."""

    def kill(self, processor_id: bytes, reason: str) -> None:
        """(5) Stop a processor now (cancel its remote job) and report its exit once."""

    def usage(self, processor_id: bytes) -> tuple[float, int]:
        """(7) (cpu percent, charged memory bytes) of a processor; (0.0, 0) when unknown."""

    def close(self) -> None:
        """(8) Kill every processor and release everything."""
