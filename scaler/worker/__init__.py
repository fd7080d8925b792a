"""Workers, in three rooms around one processor protocol (`scaler.protocol.processor_protocol`: a task's states
within a processor and the table of their transitions):

- `agent/`: the worker agent process: its pure core (which task runs in which processor, what the scheduler is
  told) and its asyncio shell;
- `processor/`: a processor process, which runs user functions: its pure task line and the threads that carry it
  out;
- `executors/`: the seam between the agent and where its tasks run (the `Executor` contract) and the zygote
  executor, whose processors are processes forked from a pre-imported zygote.

`process.py` runs one worker process from its settings (`python -m scaler.worker.process`).
"""
