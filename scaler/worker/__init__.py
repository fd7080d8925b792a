"""Workers, in three rooms around one processor protocol (`scaler.protocol.processor_protocol`: a task's states
within a processor and the table of their transitions):

- `agent/`: the worker agent process, the supervisor of its processors (it starts, configures, kills on the
  scheduler's request and reports them; it sees no task): its pure core and its asyncio shell;
- `processor/`: a processor process, which runs user functions: its tasks come on its own link to the scheduler
  and everything about them leaves there; its pure task line and the threads that carry it out;
- `executors/`: the seam between the agent and where its processors run (the `Executor` contract) and the zygote
  executor, whose processors are processes forked from a pre-imported zygote.

`process.py` runs one worker process from its settings (`python -m scaler.worker.process`).
"""
