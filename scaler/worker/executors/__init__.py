"""Where the agent's processors run: the `Executor` contract (`contract`) and the zygote executor, whose processors
are processes forked from the worker's zygote (`zygote`)."""
