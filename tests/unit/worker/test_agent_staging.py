"""The agent core stages tiny tasks in computing processors (agent/placement.py rule 2): what is staged, when a staged
task computes, and what becomes of staged tasks when their processor is stopped, dies, or its task parks."""

from __future__ import annotations

from dataclasses import replace

from scaler.config.sections import NestedParents
from scaler.protocol import messages as m
from scaler.worker.agent import core, placement
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

DEPTH = 4
TINY = 0.0001  #: seconds per task: well inside the staging horizon


def sent_tasks(effects: list[core.Effect]) -> list[int]:
    return [int.from_bytes(message.task_id, "big") for _, message in to_processor(effects, m.Task)]


def tiny_tasks_learned(**settings: object) -> tuple[core.AgentCore, bytes, float]:
    """A one-slot worker that has run a few tiny tasks: it knows its tasks take TINY seconds."""
    agent, effects = make(max_staged_tasks=DEPTH, **settings)
    (processor,) = spawned(effects)
    connect(agent)
    ready(agent, processor)
    now = 0.0
    for number in range(1000, 1005):
        agent.handle(core.FromScheduler(task(number), now))
        now += TINY
        agent.handle(core.FromProcessor(processor, result(number), now))
    assert agent.table.staged == 0 and agent.running == 0
    return agent, processor, now


def test_tiny_tasks_are_sent_ahead_to_the_computing_processor_up_to_the_depth() -> None:
    agent, _, now = tiny_tasks_learned()
    effects = agent.handle_all([core.FromScheduler(task(number), now) for number in range(1, 8)])
    assert sent_tasks(effects) == [1, 2, 3, 4, 5], "one computes, four are staged"
    assert agent.running == 1 and agent.table.staged == DEPTH
    assert agent.status().queued == 6, "the staged tasks count as queued for the monitor"


def test_a_staged_task_computes_when_the_one_before_it_ends_and_the_next_is_staged_then() -> None:
    agent, processor, now = tiny_tasks_learned()
    agent.handle_all([core.FromScheduler(task(number), now) for number in range(1, 8)])
    effects = agent.handle(core.FromProcessor(processor, result(1), now + TINY))
    assert sent_tasks(effects) == [6], "task 2 is in the processor already; 6 refills its stage"
    assert agent.table.processors[processor].task_id == tid(2)
    assert agent.table.tasks[tid(2)].started_at == now + TINY, "it computes from the end of task 1"
    assert [r.task_id for r in to_scheduler(effects, m.TaskResult)] == [tid(1)]


def test_long_tasks_are_not_staged() -> None:
    agent, effects = make(max_staged_tasks=DEPTH)
    (processor,) = spawned(effects)
    connect(agent)
    ready(agent, processor)
    agent.handle(core.FromScheduler(task(1), 0.0))
    agent.handle(core.FromProcessor(processor, result(1), 0.5))  # half a second a task
    effects = agent.handle_all([core.FromScheduler(task(number), 0.5) for number in range(2, 5)])
    assert sent_tasks(effects) == [2] and agent.table.staged == 0


def test_a_function_not_seen_finishing_here_is_not_staged_after_tiny_tasks_of_another() -> None:
    """A quick check with tiny tasks, then the real work: long tasks of another function. None of them waits in a
    processor where the scheduler could not give it to a worker that joins meanwhile."""
    agent, processor, now = tiny_tasks_learned()

    def long_task(number: int) -> m.Task:
        return replace(task(number), function_name="simulate")

    effects = agent.handle_all([core.FromScheduler(long_task(number), now) for number in range(1, 5)])
    assert sent_tasks(effects) == [1] and agent.table.staged == 0
    effects = agent.handle(core.FromScheduler(task(5), now))
    assert not sent_tasks(effects), "the tiny task waits its turn behind the long ones: order is kept"
    effects = agent.handle(core.FromProcessor(processor, result(1), now + 0.5))  # simulate: half a second
    assert sent_tasks(effects) == [2] and agent.table.staged == 0, "a slow function is not staged"
    agent.handle(core.FromProcessor(processor, result(2), now + 1.0))
    effects = agent.handle(core.FromProcessor(processor, result(3), now + 1.5))
    assert sent_tasks(effects) == [4], "nothing is staged behind a slow task: 5 may yet go to another worker"
    effects = agent.handle(core.FromProcessor(processor, result(4), now + 2.0))
    assert sent_tasks(effects) == [5]
    effects = agent.handle_all([core.FromScheduler(task(number), now + 2.0) for number in range(6, 9)])
    assert sent_tasks(effects) == [6, 7, 8], "the tiny function is staged again behind its own kind"


def test_an_executor_that_takes_no_staged_task_gets_none() -> None:
    plain, effects = make()  # max_staged_tasks=0, as a remote executor says
    (plain_processor,) = spawned(effects)
    connect(plain)
    ready(plain, plain_processor)
    for number in range(1000, 1005):
        plain.handle(core.FromScheduler(task(number), 0.0))
        plain.handle(core.FromProcessor(plain_processor, result(number), TINY))
    effects = plain.handle_all([core.FromScheduler(task(number), TINY) for number in range(1, 5)])
    assert sent_tasks(effects) == [1] and plain.table.staged == 0


def test_in_process_mode_nothing_is_staged() -> None:
    agent, _, now = tiny_tasks_learned(nested_parents=NestedParents.PROCESS)
    effects = agent.handle_all([core.FromScheduler(task(number), now) for number in range(1, 5)])
    assert sent_tasks(effects) == [1] and agent.table.staged == 0


def test_a_cancelled_staged_task_is_withdrawn_from_its_processor_which_is_not_killed() -> None:
    agent, processor, now = tiny_tasks_learned()
    agent.handle_all([core.FromScheduler(task(number), now) for number in range(1, 4)])  # 1 computes; 2, 3 staged
    effects = agent.handle(core.FromScheduler(m.TaskCancel((tid(2),)), now))
    assert to_processor(effects, m.TaskCancel) == [(processor, m.TaskCancel((tid(2),)))]
    assert not any(isinstance(e, core.KillProcessor) for e in effects)
    assert [(c.task_id, c.outcome) for c in to_scheduler(effects, m.TaskCancelConfirm)] == [
        (tid(2), m.CancelOutcome.CANCELED)
    ]
    agent.handle(core.FromProcessor(processor, result(1), now + TINY))
    assert agent.table.processors[processor].task_id == tid(3), "the processor runs 3 next: 2 never runs"
    late = agent.handle(core.FromProcessor(processor, m.TaskResult(tid(2), m.ResultStatus.CANCELED), now + TINY))
    assert not to_scheduler(late, m.TaskResult), "a word about the withdrawn task is not passed on"


def test_cancelling_the_computing_task_kills_its_processor_and_its_staged_tasks_run_on_the_next() -> None:
    agent, processor, now = tiny_tasks_learned()
    agent.handle_all([core.FromScheduler(task(number), now) for number in range(1, 4)])
    effects = agent.handle(core.FromScheduler(m.TaskCancel((tid(1),)), now))
    assert [e.processor_id for e in effects if isinstance(e, core.KillProcessor)] == [processor]
    assert not to_scheduler(effects, m.TaskResult), "the staged tasks are not failed: they never started"
    assert agent.table.staged == 0 and agent.status().queued == 2
    (replacement,) = spawned(effects)
    effects = ready(agent, replacement, now + TINY)
    assert sent_tasks(effects)[:1] == [2], "the staged tasks start again in their order"
    assert set(sent_tasks(effects)) == {2, 3}


def test_a_timed_out_computing_task_is_reported_and_its_staged_tasks_run_again() -> None:
    agent, _, now = tiny_tasks_learned(task_timeout_seconds=1.0)
    agent.handle_all([core.FromScheduler(task(number), now) for number in range(1, 4)])
    effects = agent.handle(core.AgentTick(now + 1.5))
    assert [(r.task_id, r.status) for r in to_scheduler(effects, m.TaskResult)] == [(tid(1), m.ResultStatus.TIMED_OUT)]
    (replacement,) = spawned(effects)
    effects = ready(agent, replacement, now + 1.6)
    assert sorted(sent_tasks(effects)) == [2, 3]


def test_staged_tasks_do_not_time_out_while_they_wait() -> None:
    agent, _, _ = tiny_tasks_learned(task_timeout_seconds=1.0)
    agent.handle_all([core.FromScheduler(task(number), 10.0) for number in range(1, 4)])  # 1 computes from 10 s
    assert agent.table.staged == 2
    effects = agent.handle(core.AgentTick(10.5))
    assert not to_scheduler(effects, m.TaskResult) and not any(isinstance(e, core.KillProcessor) for e in effects)


def test_a_staged_task_is_timed_from_when_it_starts_computing() -> None:
    agent, processor, now = tiny_tasks_learned(task_timeout_seconds=1.0)
    agent.handle_all([core.FromScheduler(task(number), now) for number in range(1, 3)])
    agent.handle(core.FromProcessor(processor, result(1), now + 0.9))  # task 2 waited 0.9 s, staged
    effects = agent.handle(core.AgentTick(now + 1.5))
    assert not to_scheduler(effects, m.TaskResult), "task 2 has computed for 0.6 s only"


def test_a_processor_that_dies_fails_its_computing_task_only_and_its_staged_tasks_run_again() -> None:
    agent, processor, now = tiny_tasks_learned()
    agent.handle_all([core.FromScheduler(task(number), now) for number in range(1, 4)])
    agent.handle(core.FromProcessor(processor, result(1), now + TINY))  # 2 computes, 3 staged
    effects = agent.handle(core.ProcessorDied(processor, "killed by SIGSEGV", now + 2 * TINY))
    assert [(r.task_id, r.status) for r in to_scheduler(effects, m.TaskResult)] == [
        (tid(2), m.ResultStatus.PROCESSOR_DIED)
    ]
    (replacement,) = spawned(effects)
    effects = ready(agent, replacement, now + 3 * TINY)
    assert sent_tasks(effects) == [3]


def test_when_the_computing_task_parks_the_first_staged_one_computes_and_no_more_are_staged_there() -> None:
    agent, processor, now = tiny_tasks_learned()
    agent.handle_all([core.FromScheduler(task(number), now) for number in range(1, 4)])  # 1 computes; 2, 3 staged
    effects = agent.handle(core.FromProcessor(processor, m.ProcessorBlocked(tid(1)), now + TINY))
    assert agent.table.processors[processor].task_id == tid(2) and agent.parked == 1
    assert not sent_tasks(effects)
    effects = agent.handle(core.FromScheduler(task(4), now + TINY))
    assert not sent_tasks(effects), "a processor holding a parked parent takes no staged task"
    effects = agent.handle(core.FromProcessor(processor, m.ProcessorResumeRequest(tid(1)), now + TINY))
    assert not to_processor(effects, m.ProcessorResume), "the processor computes task 2, then 3"
    agent.handle(core.FromProcessor(processor, result(2), now + 2 * TINY))
    effects = agent.handle(core.FromProcessor(processor, result(3), now + 3 * TINY))
    assert to_processor(effects, m.ProcessorResume) == [(processor, m.ProcessorResume(tid(1)))]
    assert sent_tasks(effects) == [4], "the parent computes again: task 4 is staged behind it"
    assert agent.table.processors[processor].task_id == tid(1) and agent.table.staged == 1


def test_the_worker_expects_more_results_while_only_staged_tasks_remain() -> None:
    agent, processor, now = tiny_tasks_learned()
    agent.handle_all([core.FromScheduler(task(number), now) for number in range(1, 3)])
    assert agent.table.staged == 1 and agent.has_queued_work()
    agent.handle(core.FromProcessor(processor, result(1), now + TINY))
    agent.handle(core.FromProcessor(processor, result(2), now + 2 * TINY))
    assert not agent.has_queued_work()


LONG = placement.STAGED_WAIT_SECONDS


def test_tasks_staged_behind_a_task_that_computes_long_are_withdrawn_and_queued_again() -> None:
    """agent/core.py rule 7: a call of a function that was tiny here may be long (every joblib batch runs one
    function: joblib's test_parallel_unordered_generator_returns_fastest_first got a fast call staged behind its
    30 s one, on a worker that had learned the function from earlier tests). Checked to fail without the withdrawal:
    no TaskCancel, and tasks 2 and 3 stay staged in the processor until task 1 ends."""
    agent, processor, now = tiny_tasks_learned()
    agent.handle_all([core.FromScheduler(task(number), now) for number in range(1, 4)])  # 1 computes; 2, 3 staged
    effects = agent.handle(core.AgentTick(now + LONG / 2))
    assert not to_processor(effects, m.TaskCancel) and agent.table.staged == 2
    effects = agent.handle(core.AgentTick(now + LONG))
    assert to_processor(effects, m.TaskCancel) == [(processor, m.TaskCancel((tid(2), tid(3))))]
    assert agent.table.staged == 0 and agent.status().queued == 2
    assert not sent_tasks(effects), "they are not staged again behind the long task"
    effects = agent.handle(core.FromScheduler(task(4), now + LONG))
    assert not sent_tasks(effects), "nor is a task that comes now"
    effects = agent.handle(core.FromScheduler(m.TaskReturn((tid(2),)), now + LONG))
    assert to_scheduler(effects, m.TaskReturn) == [m.TaskReturn((tid(2),))], "the scheduler may take them back"
    late = agent.handle_all(
        [core.FromProcessor(processor, m.TaskResult(t, m.ResultStatus.CANCELED), now + LONG) for t in (tid(2), tid(3))]
    )
    assert not to_scheduler(late, m.TaskResult), "the withdrawn copies' answers are not passed on"
    effects = agent.handle(core.FromProcessor(processor, result(1), now + 2 * LONG))
    assert sent_tasks(effects) == [3], "task 3 computes next here (4 is not staged: the function proved slow)"
    effects = agent.handle(core.FromProcessor(processor, result(3), now + 2 * LONG + TINY))
    assert [r.task_id for r in to_scheduler(effects, m.TaskResult)] == [tid(3)]


def test_a_withdrawn_task_sent_again_to_its_processor_is_answered_by_its_second_answer() -> None:
    """The processor answers every task it was sent once (processor_protocol rule 5): when the withdrawn task is sent
    to it again, its first answer is the withdrawn copy's (here its result: the turn had passed to it before the
    TaskCancel came), dropped; the second ends the task."""
    agent, processor, now = tiny_tasks_learned()
    agent.handle_all([core.FromScheduler(task(number), now) for number in range(1, 3)])  # 1 computes; 2 staged
    agent.handle(core.AgentTick(now + LONG))
    effects = agent.handle(core.FromProcessor(processor, result(1), now + LONG))
    assert sent_tasks(effects) == [2], "task 2 is sent to the processor again"
    first = agent.handle(core.FromProcessor(processor, m.ResultSent(tid(2), b"frame"), now + LONG))
    assert not to_scheduler(first, m.TaskResult) and agent.running == 1, "task 2 still computes here"
    second = agent.handle(core.FromProcessor(processor, result(2), now + LONG + TINY))
    assert [r.task_id for r in to_scheduler(second, m.TaskResult)] == [tid(2)] and agent.running == 0


def test_a_withdrawn_task_computes_on_another_processor_of_the_worker() -> None:
    agent, effects = make(max_staged_tasks=DEPTH, slots=2)
    (first,) = spawned(effects)
    connect(agent)
    ready(agent, first)
    now = 0.0
    for number in range(1000, 1005):  # the function is tiny here
        agent.handle(core.FromScheduler(task(number), now))
        now += TINY
        agent.handle(core.FromProcessor(first, result(number), now))
    (second,) = [p for p in agent.processors if p != first]  # the pool keeps one ready for the free slot
    effects = agent.handle_all([core.FromScheduler(task(number), now) for number in range(1, 5)])
    assert sent_tasks(effects) == [1, 2, 3, 4] and agent.table.staged == 3, "1 computes, 2 to 4 staged behind it"
    effects = ready(agent, second, now + LONG / 2)
    assert sent_tasks(effects) == [], "the staged tasks wait in the first processor"
    effects = agent.handle(core.AgentTick(now + LONG))
    assert to_processor(effects, m.TaskCancel) == [(first, m.TaskCancel((tid(2), tid(3), tid(4))))]
    assert [(p, int.from_bytes(t.task_id, "big")) for p, t in to_processor(effects, m.Task)][:1] == [(second, 2)]
