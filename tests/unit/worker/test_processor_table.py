"""The agent core's processor table under random histories: its counts always equal a recount, and its
invariants (processor_table's docstring) hold after every step, in both nested-parent modes, with tasks long
enough that none is staged and tiny enough that many are; processors that still write results they announced
(ProcessorWriting, agent/core.py rule 8) are WRITING once their task ended, take no task, and are killed only when a
task stopped in them does not end in time."""

from __future__ import annotations

import random

import pytest

from scaler.config.sections import NestedParents
from scaler.protocol import messages as m
from scaler.protocol.ids import ClientID, TaskID
from scaler.protocol.processor_protocol import ProcessorTaskState
from scaler.worker.agent import core
from scaler.worker.agent.processor_table import ProcessorState

DONE = m.ProcessorWriting(False)


def tid(number: int) -> TaskID:
    return TaskID(number.to_bytes(16, "big"))


def check(agent: core.AgentCore) -> None:
    table = agent.table
    processors = list(table.processors.values())
    for state in ProcessorState:
        assert table.count(state) == sum(1 for p in processors if p.state is state), state
    assert table.parked == sum(len(p.parked) for p in processors)
    assert table.staged == sum(len(p.staged) for p in processors)
    assert table.running <= agent.settings.slots
    for processor in processors:
        assert (processor.task_id is not None) == (processor.state is ProcessorState.RUNNING), processor
        if processor.state is ProcessorState.RUNNING:
            held = table.tasks[processor.task_id]  # type: ignore[index]
            assert (
                held.state in (ProcessorTaskState.COMPUTING, ProcessorTaskState.STOPPING)
                and held.processor == processor.processor_id
            )
        if processor.state is ProcessorState.PARKED:
            assert processor.parked and not table.parents_share_processors
        if processor.state is ProcessorState.WRITING:
            assert processor.writing and not processor.staged
        for task_id in processor.parked:
            held = table.tasks[task_id]
            assert held.state in (ProcessorTaskState.PARKED, ProcessorTaskState.RESUMING)
            assert held.processor == processor.processor_id
        if processor.staged:
            assert processor.state is ProcessorState.RUNNING and table.parents_share_processors
        for task_id in processor.staged:
            held = table.tasks[task_id]
            assert held.state is ProcessorTaskState.STAGED and held.processor == processor.processor_id
    for task_id in table.resuming:
        assert table.tasks[task_id].state is ProcessorTaskState.RESUMING
    queued = {task_id for _, _, task_id in agent.placement._queue}
    for task_id, held in table.tasks.items():  # a task no processor holds waits in the queue, to start one day
        assert (held.processor is None) == (held.state is ProcessorTaskState.QUEUED), held
        if held.state is ProcessorTaskState.QUEUED:
            assert task_id in queued


def random_event(
    rng: random.Random, agent: core.AgentCore, now: float, next_task: list[int], park_weight: float
) -> tuple[core.Event, ...]:
    """A plausible next event (or two read together): tasks arrive, processors start, running tasks finish (now and
    then with writes going on: ProcessorWriting before the result) or park (with `park_weight` against 1.5 for a
    result: high, so that parents pile up, or low, so that tiny tasks get staged), writes settle, parked ones ask to
    resume, and now and then a cancel, a crash or a tick."""
    return _one_or_two(rng, agent, now, next_task, park_weight)


def _one_or_two(
    rng: random.Random, agent: core.AgentCore, now: float, next_task: list[int], park_weight: float
) -> tuple[core.Event, ...]:
    writing = [p for p in agent.table.processors.values() if p.writing]
    if writing and rng.random() < 0.15:
        return (core.FromProcessor(rng.choice(writing).processor_id, DONE, now),)
    event = _random_event(rng, agent, now, next_task, park_weight)
    if isinstance(event, core.FromProcessor) and isinstance(event.message, m.TaskResult) and rng.random() < 0.3:
        return core.FromProcessor(event.processor_id, m.ProcessorWriting(True), now), event
    return (event,)


def _random_event(
    rng: random.Random, agent: core.AgentCore, now: float, next_task: list[int], park_weight: float
) -> core.Event:
    table = agent.table
    processors = list(table.processors.values())
    running = [p for p in processors if p.state is ProcessorState.RUNNING]
    parked = [(p, t) for p in processors for t in p.parked if table.tasks[t].state is ProcessorTaskState.PARKED]
    starting = [p for p in processors if p.state is ProcessorState.STARTING]
    choices: list[tuple[float, object]] = [(2.0, "task"), (0.3, "cancel"), (0.05, "crash"), (0.3, "tick")]
    if starting:
        choices.append((3.0, "ready"))
    if running:
        choices += [(1.5, "result"), (park_weight, "block")]
    if parked:
        choices.append((1.5 if len(parked) > 3 else 0.5, "resume"))
    kind = rng.choices([c for _, c in choices], weights=[w for w, _ in choices])[0]
    if kind == "task":
        next_task[0] += 1
        task = m.Task(tid(next_task[0]), ClientID(b"Client|c"), b"body", priority=rng.randint(0, 3))
        return core.FromScheduler(task, now)
    if kind == "ready":
        return core.FromProcessor(rng.choice(starting).processor_id, m.ProcessorReady(7), now)
    if kind in ("result", "block"):
        processor = rng.choice(running)
        assert processor.task_id is not None
        stopped = table.tasks[processor.task_id].state is ProcessorTaskState.STOPPING
        if kind == "block" and not stopped:
            return core.FromProcessor(processor.processor_id, m.ProcessorBlocked(processor.task_id), now)
        status = m.ResultStatus.CANCELED if stopped else m.ResultStatus.SUCCESS
        return core.FromProcessor(processor.processor_id, m.TaskResult(processor.task_id, status), now)
    if kind == "resume":
        processor, task_id = rng.choice(parked)
        return core.FromProcessor(processor.processor_id, m.ProcessorResumeRequest(task_id), now)
    if kind == "cancel" and table.tasks:
        return core.FromScheduler(m.TaskCancel((rng.choice(list(table.tasks)),)), now)
    if kind == "crash" and processors:
        return core.ProcessorDied(rng.choice(processors).processor_id, "killed by SIGSEGV", now)
    return core.AgentTick(now)


@pytest.mark.parametrize("mode", list(NestedParents))
@pytest.mark.parametrize("step_seconds", [0.2, 0.0002])
@pytest.mark.parametrize("seed", range(20))
def test_counts_and_invariants_hold_through_random_histories(
    mode: NestedParents, step_seconds: float, seed: int
) -> None:
    rng = random.Random(seed)
    settings = core.AgentSettings(nested_parents=mode, task_timeout_seconds=3.0, slots=2, max_staged_tasks=4)
    agent = core.AgentCore(settings, started_at=0.0)
    agent.start()
    agent.handle(core.FromScheduler(m.HelloReply(True, object_storage_address="tcp://s:2"), 0.0))
    next_task = [0]
    now = 0.0
    staged_seen = 0
    for _ in range(400):
        now += rng.random() * step_seconds
        processors = agent.table.processors.values()
        writing = {p.processor_id for p in processors if p.writing}
        resting = {p.processor_id for p in processors if p.state is ProcessorState.WRITING}
        events = random_event(rng, agent, now, next_task, 2.0 if step_seconds > 0.001 else 0.3)
        effects = agent.handle_all(events)
        check(agent)
        settled = {e.processor_id for e in events if isinstance(e, core.FromProcessor) and e.message == DONE}
        for effect in effects:
            if isinstance(effect, core.KillProcessor) and effect.processor_id in writing - settled:
                assert "did not end within" in effect.reason, effect  # only a stopped task's grace ends a write
            if isinstance(effect, core.ToProcessor) and isinstance(effect.message, (m.Task, m.ProcessorResume)):
                assert effect.processor_id not in resting - settled, effect
        staged_seen = max(staged_seen, agent.table.staged)
    if mode == "thread" and step_seconds < 0.001:
        assert staged_seen, "tiny tasks were staged in this history"
