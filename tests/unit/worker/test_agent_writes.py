"""The worker agent's core and a processor that still writes results it announced (issue 42, agent/core.py rule 8):
the result goes on to the scheduler at once, and the processor, WRITING, takes no task, is not retired however many
processors idle, and is not killed to stop a task computing in it, until it says its writes are done. A real
process's side: tests/integration/test_followed_writes.py.

Checked by hand with the mechanism off (`ProcessorTable.set_writing` only setting the flag, and `_stop` without its
`processor.writing` cases): the first two tests fail (the writing processor is IDLE to its agent, which gives it
the next task and retires it), and so does the third (the processor is killed mid-write).
"""

from __future__ import annotations

from scaler.protocol import messages as m
from scaler.worker.agent import core
from tests.unit.worker.test_agent_core import (
    connect,
    make,
    ready,
    result,
    spawned,
    task,
    tid,
    to_processor,
    to_scheduler,
)

WRITING, DONE = m.ProcessorWriting(True), m.ProcessorWriting(False)


def kills(effects: list[core.Effect]) -> list[bytes]:
    return [e.processor_id for e in effects if isinstance(e, core.KillProcessor)]


def test_a_writing_processor_passes_its_result_on_at_once_and_takes_no_task_nor_retires_until_its_writes_end() -> None:
    agent, effects = make(slots=4)
    (writer,) = spawned(effects)
    connect(agent)
    ready(agent, writer)
    agent.handle(core.FromScheduler(task(1), 0.0))
    effects = agent.handle_all([core.FromProcessor(writer, WRITING, 1.0), core.FromProcessor(writer, result(1), 1.0)])
    assert to_scheduler(effects, m.TaskResult) == [result(1)], "the result goes on while it is written"
    assert agent.processors[writer].state is core.ProcessorState.WRITING
    assert agent.running == 0, "a writing processor takes no slot"
    # a burst of tasks: other processors take them; then they idle, and the surplus retires
    effects = agent.handle_all([core.FromScheduler(task(number), 1.1) for number in range(2, 6)])
    assert writer not in [processor for processor, _ in to_processor(effects, m.Task)]
    others = spawned(effects)
    assert others
    for processor in others:
        effects = ready(agent, processor, 1.2)
        assert writer not in [p for p, _ in to_processor(effects, m.Task)]
    retired: list[bytes] = []
    now = 1.3
    while running := [p for p in agent.processors.values() if p.task_id is not None]:
        busy = running[0]
        assert busy.task_id is not None
        effects = agent.handle(core.FromProcessor(busy.processor_id, result(int.from_bytes(busy.task_id, "big")), now))
        retired += kills(effects)
        now += 0.1
    retired += kills(agent.handle(core.AgentTick(now)))
    assert retired, "idle processors beyond the pool's need retire"
    assert writer not in retired, "a processor is never retired mid-write"
    assert agent.processors[writer].state is core.ProcessorState.WRITING
    effects = agent.handle(core.FromProcessor(writer, DONE, now))
    assert kills(effects) == [writer], "once its writes are done it is idle, one too many: it retires now"
    effects = agent.handle(core.FromScheduler(task(9), now))
    assert to_processor(effects, m.Task), "task 9 is sent to an idle processor"


def test_a_result_sent_on_the_processors_link_leaves_it_writing_too() -> None:
    agent, effects = make()
    (writer,) = spawned(effects)
    connect(agent)
    ready(agent, writer)
    agent.handle(core.FromScheduler(task(1), 0.0))
    sent = m.ResultSent(tid(1), b"the frame", 0.5)
    effects = agent.handle_all([core.FromProcessor(writer, WRITING, 1.0), core.FromProcessor(writer, sent, 1.0)])
    assert agent.processors[writer].state is core.ProcessorState.WRITING
    assert len(spawned(effects)) == 1, "a processor starts beside it for the next task"


def test_a_task_computing_beside_writes_is_stopped_in_its_processor_not_by_killing_it() -> None:
    agent, effects = make()
    (writer,) = spawned(effects)
    connect(agent)
    ready(agent, writer)
    agent.handle(core.FromScheduler(task(1), 0.0))
    agent.handle(core.FromProcessor(writer, WRITING, 0.5))  # a task before it wrote a result (a staged task computes)
    effects = agent.handle(core.FromScheduler(m.TaskCancel((tid(1),)), 0.6))
    assert not kills(effects)
    assert to_processor(effects, m.TaskCancel) == [(writer, m.TaskCancel((tid(1),)))]
    effects = agent.handle(core.FromProcessor(writer, m.TaskResult(tid(1), m.ResultStatus.CANCELED), 0.7))
    assert not to_scheduler(effects, m.TaskResult), "answered already"
    assert agent.processors[writer].state is core.ProcessorState.WRITING


def test_a_writing_processor_that_dies_fails_no_task() -> None:
    agent, effects = make()
    (writer,) = spawned(effects)
    connect(agent)
    ready(agent, writer)
    agent.handle(core.FromScheduler(task(1), 0.0))
    agent.handle_all([core.FromProcessor(writer, WRITING, 1.0), core.FromProcessor(writer, result(1), 1.0)])
    effects = agent.handle(core.ProcessorDied(writer, "killed by SIGKILL", 1.5))
    assert not to_scheduler(effects, m.TaskResult), "its result went on already; its readers are told by the storage"
    assert writer not in agent.processors
