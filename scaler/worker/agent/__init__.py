"""The worker agent: its pure core (`core.AgentCore`, events in and effects out) and its asyncio shell
(`shell.WorkerAgent`: the scheduler socket and an executor)."""
