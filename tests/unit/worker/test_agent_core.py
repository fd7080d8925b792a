"""The worker agent's pure core: processors, credit, nested parents, timeouts, deaths."""

from __future__ import annotations

import logging

import pytest

from scaler.config.sections import NestedParents
from scaler.protocol import messages as m
from scaler.protocol.ids import ClientID, TaskID
from scaler.worker.agent import core


def make(**settings: object) -> tuple[core.AgentCore, list[core.Effect]]:
    agent = core.AgentCore(core.AgentSettings(**settings), started_at=0.0)  # type: ignore[arg-type]
    effects = agent.start()
    return agent, effects


def spawned(effects: list[core.Effect]) -> list[bytes]:
    return [e.processor_id for e in effects if isinstance(e, core.SpawnProcessor)]


def to_scheduler(effects: list[core.Effect], kind: type) -> list:  # type: ignore[type-arg]
    return [e.message for e in effects if isinstance(e, core.ToScheduler) and isinstance(e.message, kind)]


def to_processor(effects: list[core.Effect], kind: type) -> list[tuple[bytes, m.Message]]:
    return [
        (e.processor_id, e.message) for e in effects if isinstance(e, core.ToProcessor) and isinstance(e.message, kind)
    ]


def task(number: int, priority: int = 0) -> m.Task:
    return m.Task(TaskID(number.to_bytes(16, "big")), ClientID(b"Client|c"), b"body", priority=priority)


def tid(number: int) -> TaskID:
    return TaskID(number.to_bytes(16, "big"))


def connect(agent: core.AgentCore, now: float = 0.0) -> list[core.Effect]:
    return agent.handle(core.FromScheduler(m.HelloReply(True, object_storage_address="tcp://s:2"), now))


def ready(agent: core.AgentCore, processor: bytes, now: float = 0.0) -> list[core.Effect]:
    return agent.handle(core.FromProcessor(processor, m.ProcessorReady(100), now))


def result(number: int) -> m.TaskResult:
    return m.TaskResult(tid(number), m.ResultStatus.SUCCESS, m.PayloadKind.INLINE, b"v")


def test_the_first_processor_starts_before_the_scheduler_answers() -> None:
    _, effects = make()
    assert len(spawned(effects)) == 1


def test_tasks_run_one_at_a_time_and_results_go_upstream() -> None:
    agent, effects = make()
    (first,) = spawned(effects)
    connect(agent)
    effects = ready(agent, first)
    assert to_processor(effects, m.HelloReply)
    agent.handle(core.FromScheduler(task(1), 0.0))
    effects = agent.handle(core.FromScheduler(task(2), 0.0))
    assert [message.task_id for _, message in to_processor(effects, m.Task)] == []  # 1 was sent before
    effects = agent.handle(core.FromProcessor(first, result(1), 0.5))
    assert to_scheduler(effects, m.TaskResult)[0].task_id == tid(1)
    assert [message.task_id for _, message in to_processor(effects, m.Task)] == [tid(2)]


def test_prefetch_grows_for_tiny_tasks_and_is_announced() -> None:
    agent, effects = make()
    (first,) = spawned(effects)
    connect(agent)
    ready(agent, first)
    announced = []
    now = 0.0
    for number in range(20):
        agent.handle(core.FromScheduler(task(number), now))
        now += 0.0001
        effects = agent.handle(core.FromProcessor(first, result(number), now))
        announced += [message.capacity for message in to_scheduler(effects, m.WorkerCapacity)]
    assert announced and announced[-1] > 2


def test_long_tasks_keep_a_single_task_ahead() -> None:
    agent, effects = make()
    (first,) = spawned(effects)
    connect(agent)
    ready(agent, first)
    agent.handle(core.FromScheduler(task(1), 0.0))
    agent.handle(core.FromProcessor(first, result(1), 2.0))
    assert agent.capacity == 2


def test_in_process_mode_a_blocked_parent_keeps_its_processor_and_the_child_gets_another() -> None:
    agent, effects = make(nested_parents=NestedParents.PROCESS)
    (parent_processor,) = spawned(effects)
    connect(agent)
    ready(agent, parent_processor)
    agent.handle(core.FromScheduler(task(1), 0.0))
    effects = agent.handle(core.FromProcessor(parent_processor, m.ProcessorBlocked(tid(1)), 0.1))
    assert agent.parked == 1 and agent.capacity >= 3
    (child_processor, *_) = spawned(effects)
    ready(agent, child_processor)
    effects = agent.handle(core.FromScheduler(task(2, priority=1), 0.2))
    assert to_processor(effects, m.Task) == [(child_processor, task(2, priority=1))]
    agent.handle(core.FromScheduler(task(3), 0.2))
    effects = agent.handle(core.FromProcessor(parent_processor, m.ProcessorResumeRequest(tid(1)), 0.3))
    assert not to_processor(effects, m.ProcessorResume), "the slot is taken by the child"
    effects = agent.handle(core.FromProcessor(child_processor, result(2), 0.4))
    assert to_processor(effects, m.ProcessorResume) == [(parent_processor, m.ProcessorResume(tid(1)))]
    assert not to_processor(effects, m.Task), "task 3 waits for the parent to finish"


def parked_parent(**settings: object) -> tuple[core.AgentCore, bytes]:
    """A worker whose one processor runs task 1, which then waits on nested futures."""
    agent, effects = make(**settings)
    (processor,) = spawned(effects)
    connect(agent)
    ready(agent, processor)
    agent.handle(core.FromScheduler(task(1), 0.0))
    effects = agent.handle(core.FromProcessor(processor, m.ProcessorBlocked(tid(1)), 0.1))
    assert not spawned(effects), "no process per blocked parent"
    return agent, processor


def test_a_blocked_parent_yields_its_slot_to_its_child_in_the_same_processor() -> None:
    agent, processor = parked_parent()
    assert agent.parked == 1 and agent.running == 0 and agent.capacity >= 3
    effects = agent.handle(core.FromScheduler(task(2, priority=1), 0.2))
    assert to_processor(effects, m.Task) == [(processor, task(2, priority=1))]
    assert not spawned(effects)
    agent.handle(core.FromScheduler(task(3), 0.2))
    effects = agent.handle(core.FromProcessor(processor, m.ProcessorResumeRequest(tid(1)), 0.3))
    assert not to_processor(effects, m.ProcessorResume), "the slot (and the processor) is taken by the child"
    effects = agent.handle(core.FromProcessor(processor, result(2), 0.4))
    assert to_scheduler(effects, m.TaskResult) == [result(2)]
    assert to_processor(effects, m.ProcessorResume) == [(processor, m.ProcessorResume(tid(1)))]
    assert not to_processor(effects, m.Task), "task 3 waits for the parent to finish"
    effects = agent.handle(core.FromProcessor(processor, result(1), 0.5))
    assert to_processor(effects, m.Task) == [(processor, task(3))]
    assert [p.state for p in agent.processors.values()] == [core.ProcessorState.RUNNING]


def test_a_deep_nesting_stays_in_one_processor() -> None:
    agent, processor = parked_parent()
    for level in range(2, 12):  # each child waits on its own child in turn
        effects = agent.handle(core.FromScheduler(task(level, priority=level), 0.1 * level))
        assert to_processor(effects, m.Task) == [(processor, task(level, priority=level))]
        effects = agent.handle(core.FromProcessor(processor, m.ProcessorBlocked(tid(level)), 0.1 * level))
        assert not spawned(effects)
    assert agent.parked == 11 and len(agent.processors) == 1
    for level in range(11, 0, -1):  # they finish innermost first
        agent.handle(core.FromProcessor(processor, m.ProcessorResumeRequest(tid(level)), 2.0))
        assert agent.running == 1 and agent.processors[processor].task_id == tid(level)
        agent.handle(core.FromProcessor(processor, result(level), 2.0))
    assert agent.parked == 0 and not agent.tasks


def test_a_cancelled_parked_parent_is_stopped_in_its_processor_without_taking_its_child_down() -> None:
    agent, processor = parked_parent()
    agent.handle(core.FromScheduler(task(2, priority=1), 0.2))
    effects = agent.handle(core.FromScheduler(m.TaskCancel((tid(1),)), 0.3))
    assert [(c.task_id, c.outcome) for c in to_scheduler(effects, m.TaskCancelConfirm)] == [
        (tid(1), m.CancelOutcome.CANCELED)
    ]
    assert to_processor(effects, m.TaskCancel) == [(processor, m.TaskCancel((tid(1),)))]
    assert not [e for e in effects if isinstance(e, core.KillProcessor)]
    assert agent.parked == 0 and agent.running == 1
    effects = agent.handle(core.FromProcessor(processor, result(2), 0.4))
    assert to_scheduler(effects, m.TaskResult) == [result(2)]


def test_a_cancelled_parked_parent_alone_in_its_processor_has_it_killed() -> None:
    agent, processor = parked_parent()
    effects = agent.handle(core.FromScheduler(m.TaskCancel((tid(1),)), 0.3))
    assert [e.processor_id for e in effects if isinstance(e, core.KillProcessor)] == [processor]
    assert not to_scheduler(effects, m.TaskResult)
    assert [c.outcome for c in to_scheduler(effects, m.TaskCancelConfirm)] == [m.CancelOutcome.CANCELED]


def test_a_timed_out_parked_parent_is_stopped_in_its_processor_and_reported() -> None:
    agent, processor = parked_parent(task_timeout_seconds=5.0)
    agent.handle(core.FromScheduler(task(2, priority=1), 4.0))
    effects = agent.handle(core.AgentTick(5.5))
    (timed_out,) = to_scheduler(effects, m.TaskResult)
    assert timed_out.task_id == tid(1) and timed_out.status is m.ResultStatus.TIMED_OUT
    assert to_processor(effects, m.TaskCancel) == [(processor, m.TaskCancel((tid(1),)))]
    assert agent.running == 1, "the child runs on"


def test_a_task_cancelled_while_computing_among_parked_parents_is_stopped_in_their_processor() -> None:
    agent, processor = parked_parent()
    agent.handle(core.FromScheduler(task(2, priority=1), 0.2))
    effects = agent.handle(core.FromScheduler(m.TaskCancel((tid(2),)), 0.3))
    assert [c.task_id for c in to_scheduler(effects, m.TaskCancelConfirm)] == [tid(2)]
    assert to_processor(effects, m.TaskCancel) == [(processor, m.TaskCancel((tid(2),)))]
    assert not [e for e in effects if isinstance(e, core.KillProcessor)], "the parked parent is not taken down"
    assert agent.running == 1, "its slot is taken until the processor says it stopped"
    effects = agent.handle(core.FromProcessor(processor, m.TaskResult(tid(2), m.ResultStatus.CANCELED), 0.4))
    assert not to_scheduler(effects, m.TaskResult), "the scheduler was answered already"
    assert agent.running == 0 and agent.parked == 1
    effects = agent.handle(core.FromProcessor(processor, m.ProcessorResumeRequest(tid(1)), 0.5))
    assert to_processor(effects, m.ProcessorResume) == [(processor, m.ProcessorResume(tid(1)))]


def test_a_stopped_task_that_does_not_end_has_its_processor_killed_and_its_parked_parents_reported_lost() -> None:
    agent, processor = parked_parent()
    agent.handle(core.FromScheduler(task(2, priority=1), 0.2))
    agent.handle(core.FromScheduler(m.TaskCancel((tid(2),)), 0.3))
    effects = agent.handle(core.AgentTick(0.3 + core.STOP_GRACE_SECONDS / 2))
    assert not [e for e in effects if isinstance(e, core.KillProcessor)]
    effects = agent.handle(core.AgentTick(0.4 + core.STOP_GRACE_SECONDS))
    assert [e.processor_id for e in effects if isinstance(e, core.KillProcessor)] == [processor]
    (lost,) = to_scheduler(effects, m.TaskResult)
    assert lost.task_id == tid(1) and lost.status is m.ResultStatus.HOST_LOST
    assert "waiting for its nested tasks" in lost.error_message and "did not end" in lost.error_message
    assert not agent.tasks and spawned(effects)
    effects = agent.handle(core.ProcessorDied(processor, "killed by SIGKILL", 5.6))
    assert not to_scheduler(effects, m.TaskResult), "each task was reported once"


def test_timeouts_stop_tasks_in_their_processor_while_others_wait_there_and_kill_it_once_none_does() -> None:
    agent, processor = parked_parent(task_timeout_seconds=5.0)
    agent.handle(core.FromProcessor(processor, m.ProcessorResumeRequest(tid(1)), 0.2))
    agent.handle(core.FromScheduler(task(2), 0.2))
    effects = agent.handle(core.FromProcessor(processor, result(1), 0.3))
    assert to_processor(effects, m.Task) == [(processor, task(2))]
    agent.handle(core.FromScheduler(task(3, priority=1), 0.3))
    effects = agent.handle(core.FromProcessor(processor, m.ProcessorBlocked(tid(2)), 2.0))
    assert to_processor(effects, m.Task) == [(processor, task(3, priority=1))], "computes where task 2 waits"
    effects = agent.handle(core.AgentTick(5.5))
    timed_out = {r.task_id: r.status for r in to_scheduler(effects, m.TaskResult)}
    assert timed_out == {tid(2): m.ResultStatus.TIMED_OUT}, "task 3 started at 2.0: not yet"
    assert to_processor(effects, m.TaskCancel) == [(processor, m.TaskCancel((tid(2),)))]
    effects = agent.handle(core.AgentTick(7.1))
    assert {r.task_id for r in to_scheduler(effects, m.TaskResult)} == {tid(3)}
    assert [e.processor_id for e in effects if isinstance(e, core.KillProcessor)] == [processor], "none parked now"


def test_a_processor_that_dies_fails_its_task_and_reports_its_parked_parents_lost() -> None:
    agent, processor = parked_parent()
    agent.handle(core.FromScheduler(task(2, priority=1), 0.2))
    effects = agent.handle(core.ProcessorDied(processor, "killed by SIGSEGV", 0.3))
    outcomes = {r.task_id: r.status for r in to_scheduler(effects, m.TaskResult)}
    assert outcomes == {tid(2): m.ResultStatus.PROCESSOR_DIED, tid(1): m.ResultStatus.HOST_LOST}
    assert spawned(effects)


def test_a_processor_that_dies_while_its_parents_only_wait_fails_them_as_their_own_processor() -> None:
    agent, processor = parked_parent()
    effects = agent.handle(core.ProcessorDied(processor, "killed by SIGKILL", 0.3))
    (died,) = to_scheduler(effects, m.TaskResult)
    assert died.task_id == tid(1) and died.status is m.ResultStatus.PROCESSOR_DIED
    assert "waited in for its nested tasks died" in died.error_message


def test_a_processor_holding_parked_parents_is_never_retired() -> None:
    agent, processor = parked_parent()
    effects = agent.handle(core.AgentTick(1.0))
    assert not [e for e in effects if isinstance(e, core.KillProcessor)]
    assert agent.processors[processor].shown_state == "blocked"


def test_a_leaving_worker_does_not_report_its_parked_parents_lost() -> None:
    agent, _ = parked_parent()
    effects = agent.handle(core.FromScheduler(m.Shutdown("bye"), 0.3))
    assert any(isinstance(e, core.Exit) for e in effects)
    assert not to_scheduler(effects, m.TaskResult)


def test_a_result_or_log_from_a_processor_that_does_not_hold_the_task_is_ignored() -> None:
    agent, processor = parked_parent()
    other = b"p-other"
    agent.table.set_state(agent.table.add(other), core.ProcessorState.IDLE)
    log = m.TaskLog(tid(1), m.LogStream.STDOUT, "hello\n")
    assert not to_scheduler(agent.handle(core.FromProcessor(other, result(1), 0.2)), m.TaskResult)
    assert not to_scheduler(agent.handle(core.FromProcessor(other, log, 0.2)), m.TaskLog)
    assert to_scheduler(agent.handle(core.FromProcessor(processor, log, 0.2)), m.TaskLog) == [log]
    effects = agent.handle(core.FromProcessor(processor, result(1), 0.3))
    assert to_scheduler(effects, m.TaskResult) == [result(1)], "its own processor's word is taken, parked or not"
    assert agent.parked == 0


def test_cancel_of_a_queued_running_or_unknown_task() -> None:
    agent, effects = make()
    (first,) = spawned(effects)
    connect(agent)
    ready(agent, first)
    agent.handle(core.FromScheduler(task(1), 0.0))
    agent.handle(core.FromScheduler(task(2), 0.0))
    effects = agent.handle(core.FromScheduler(m.TaskCancel((tid(2), tid(1), tid(9))), 0.1))
    outcomes = [(c.task_id, c.outcome) for c in to_scheduler(effects, m.TaskCancelConfirm)]
    assert outcomes == [
        (tid(2), m.CancelOutcome.CANCELED),
        (tid(1), m.CancelOutcome.CANCELED),
        (tid(9), m.CancelOutcome.NOT_FOUND),
    ]
    assert [e.processor_id for e in effects if isinstance(e, core.KillProcessor)] == [first]
    assert spawned(effects), "a fresh processor replaces the killed one"


def test_a_task_past_its_timeout_is_killed_and_reported() -> None:
    agent, effects = make(task_timeout_seconds=1.0)
    (first,) = spawned(effects)
    connect(agent)
    ready(agent, first)
    agent.handle(core.FromScheduler(task(1), 0.0))
    effects = agent.handle(core.AgentTick(1.5))
    (failure,) = to_scheduler(effects, m.TaskResult)
    assert failure.status is m.ResultStatus.TIMED_OUT and "timeout" in failure.error_message
    assert any(isinstance(e, core.KillProcessor) for e in effects)


def test_a_processor_that_dies_fails_only_its_task() -> None:
    agent, effects = make()
    (first,) = spawned(effects)
    connect(agent)
    ready(agent, first)
    agent.handle(core.FromScheduler(task(1), 0.0))
    agent.handle(core.FromScheduler(task(2), 0.0))
    effects = agent.handle(core.ProcessorDied(first, "killed by SIGSEGV", 0.2))
    (failure,) = to_scheduler(effects, m.TaskResult)
    assert failure.task_id == tid(1) and failure.status is m.ResultStatus.PROCESSOR_DIED
    assert "SIGSEGV" in failure.error_message
    (replacement,) = spawned(effects)
    effects = ready(agent, replacement)
    assert [message.task_id for _, message in to_processor(effects, m.Task)] == [tid(2)]


def test_a_failing_preload_stops_the_worker() -> None:
    agent, effects = make(has_preload=True)
    (first,) = spawned(effects)
    effects = agent.handle(core.ProcessorDied(first, "exit code 1", 0.1))
    (exit_effect,) = [e for e in effects if isinstance(e, core.Exit)]
    assert exit_effect.code == core.EXIT_ERROR and "preload" in exit_effect.reason


def test_death_timeout_tells_never_connected_from_lost() -> None:
    agent, _ = make(death_timeout_seconds=5)
    effects = agent.handle(core.AgentTick(6.0))
    assert [e.code for e in effects if isinstance(e, core.Exit)] == [core.EXIT_NEVER_CONNECTED]
    agent, _ = make(death_timeout_seconds=5)
    connect(agent, now=1.0)
    effects = agent.handle(core.AgentTick(7.0))
    assert [e.code for e in effects if isinstance(e, core.Exit)] == [core.EXIT_SCHEDULER_LOST]


def test_refused_hello_and_shutdown_stop_the_worker() -> None:
    agent, _ = make()
    effects = agent.handle(core.FromScheduler(m.HelloReply(False, "Python 2.7"), 0.0))
    (exit_effect,) = [e for e in effects if isinstance(e, core.Exit)]
    assert exit_effect.code == core.EXIT_ERROR and "Python 2.7" in exit_effect.reason
    agent, _ = make()
    connect(agent)
    effects = agent.handle(core.FromScheduler(m.Shutdown("bye"), 0.0))
    assert [e.code for e in effects if isinstance(e, core.Exit)] == [core.EXIT_OK]


def test_the_hello_goes_at_start_and_heartbeats_follow_the_interval_once_registered() -> None:
    agent, effects = make(heartbeat_interval_seconds=2.0)
    assert [e for e in effects if isinstance(e, core.SayHello)]
    assert not [e for e in effects if isinstance(e, core.SendWorkerHeartbeat)]
    assert [e for e in connect(agent, 0.5) if isinstance(e, core.SendWorkerHeartbeat)]
    assert not [e for e in agent.handle(core.AgentTick(1.5)) if isinstance(e, core.SendWorkerHeartbeat)]
    assert [e for e in agent.handle(core.AgentTick(2.6)) if isinstance(e, core.SendWorkerHeartbeat)]


def test_heartbeats_carry_the_round_trip_of_the_previous_one() -> None:
    agent, _ = make(heartbeat_interval_seconds=2.0)
    connect(agent, 0.0)  # a heartbeat goes at once
    agent.handle(core.FromScheduler(m.HeartbeatEcho(), 0.25))
    (heartbeat,) = [e for e in agent.handle(core.AgentTick(2.0)) if isinstance(e, core.SendWorkerHeartbeat)]
    assert heartbeat.round_trip_seconds == 0.25


def test_queued_tasks_are_given_back_on_request_but_running_ones_are_not() -> None:
    agent, effects = make()
    (first,) = spawned(effects)
    connect(agent)
    ready(agent, first)
    agent.handle(core.FromScheduler(task(1), 0.0))
    agent.handle(core.FromScheduler(task(2), 0.0))
    effects = agent.handle(core.FromScheduler(m.TaskReturn((tid(1), tid(2))), 0.1))
    assert to_scheduler(effects, m.TaskReturn) == [m.TaskReturn((tid(2),))]


def test_a_scheduler_that_forgot_the_worker_gets_a_new_hello_unless_the_worker_is_leaving() -> None:
    forgotten = m.ProtocolError("unknown peer", m.ProtocolErrorKind.UNKNOWN_PEER)
    agent, _ = make()
    connect(agent)
    effects = agent.handle(core.FromScheduler(forgotten, 1.0))
    assert [e for e in effects if isinstance(e, core.SayHello)]
    agent, _ = make()
    connect(agent)
    agent.handle(core.LeaveRequested("sigterm", 1.0))
    effects = agent.handle(core.FromScheduler(forgotten, 1.1))
    assert not [e for e in effects if isinstance(e, core.SayHello)]


def test_a_restarted_scheduler_hears_of_the_held_tasks_and_gets_unacknowledged_results_again() -> None:
    forgotten = m.ProtocolError("unknown peer", m.ProtocolErrorKind.UNKNOWN_PEER)
    agent, effects = make(slots=1)
    (first,) = spawned(effects)
    agent.handle(core.FromScheduler(m.HelloReply(True, object_storage_address="tcp://s:2", instance_id=b"old"), 0.0))
    ready(agent, first)
    agent.handle(core.FromScheduler(task(1), 0.0))
    agent.handle(core.FromScheduler(task(2), 0.0))
    agent.handle(core.FromProcessor(first, result(1), 0.1))  # result 1 goes up, then a heartbeat is echoed
    for now in (3.0, 5.0):  # heartbeats, each echoed: the echo of one sent after result 1 acknowledges it
        agent.handle(core.AgentTick(now))
        agent.handle(core.FromScheduler(m.HeartbeatEcho(), now + 0.1))
    effects = agent.handle(core.FromProcessor(first, result(2), 5.2))  # result 2: the scheduler dies unread
    agent.handle(core.FromScheduler(task(3), 5.2))
    effects = agent.handle(core.FromScheduler(forgotten, 6.0))
    assert not [e for e in effects if isinstance(e, core.KillProcessor)], "the running task goes on"
    (say,) = [e for e in effects if isinstance(e, core.SayHello)]
    assert say.known_instance == b"old" and say.held_tasks == (tid(3), tid(2)), "held, and finished unacknowledged"
    effects = agent.handle(core.FromScheduler(m.HelloReply(True, instance_id=b"new"), 6.1))
    assert [r.task_id for r in to_scheduler(effects, m.TaskResult)] == [tid(2)], "only the unacknowledged result"
    effects = agent.handle(core.FromProcessor(first, result(3), 6.5))
    assert [r.task_id for r in to_scheduler(effects, m.TaskResult)] == [tid(3)]


def test_a_worker_whose_scheduler_is_gone_for_the_grace_period_exits_and_one_that_comes_back_keeps_it() -> None:
    agent, _ = make(scheduler_lost_grace_seconds=10.0)
    connect(agent)
    agent.handle(core.SchedulerDisconnected(1.0))
    assert not [e for e in agent.handle(core.AgentTick(10.0)) if isinstance(e, core.Exit)], "still within the grace"
    (exit_effect,) = [e for e in agent.handle(core.AgentTick(11.5)) if isinstance(e, core.Exit)]
    assert exit_effect.code == core.EXIT_SCHEDULER_LOST and "within 10 s" in exit_effect.reason
    agent, _ = make(scheduler_lost_grace_seconds=10.0)
    connect(agent)
    agent.handle(core.SchedulerDisconnected(1.0))
    agent.handle(core.FromScheduler(m.ProtocolError("unknown peer", m.ProtocolErrorKind.UNKNOWN_PEER), 5.0))
    assert not [e for e in agent.handle(core.AgentTick(30.0)) if isinstance(e, core.Exit)], "a scheduler answered"


def test_a_death_timeout_shorter_than_the_grace_is_the_wait_the_worker_announces(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Walking docs/guide/clusters.md's exit codes with `scaler_cluster ... --death-timeout-seconds 5` and the
    scheduler stopped: each worker said "the connection to the scheduler ... closed: waiting up to 60 s for a
    scheduler to answer there again", then exited 4 s later, its death timeout over. Checked by switching it off
    (the grace alone in the link's settings): the notice says 60 s and this test fails."""
    agent, _ = make(death_timeout_seconds=5, scheduler_lost_grace_seconds=60.0)
    connect(agent)
    with caplog.at_level(logging.WARNING, logger=core.__name__):
        agent.handle(core.SchedulerDisconnected(1.0))
    (notice,) = [record.getMessage() for record in caplog.records if "waiting up to" in record.getMessage()]
    assert "closed: waiting up to 5 s for a scheduler" in notice, notice
    (exit_effect,) = [e for e in agent.handle(core.AgentTick(6.5)) if isinstance(e, core.Exit)]
    assert exit_effect.code == core.EXIT_SCHEDULER_LOST
    agent, _ = make(death_timeout_seconds=300, scheduler_lost_grace_seconds=60.0)  # the defaults: the grace
    connect(agent)
    with caplog.at_level(logging.WARNING, logger=core.__name__):
        agent.handle(core.SchedulerDisconnected(1.0))
    assert any("closed: waiting up to 60 s" in record.getMessage() for record in caplog.records)


# ---------------------------------------------------------------- actors (rule 5)


def actor_start(number: int) -> m.Task:
    return m.Task(tid(number), ClientID(b"Client|c"), b"body", "Pricer", actor=m.ActorSpec())


def actor_call(number: int, actor: int) -> m.Task:
    return m.Task(tid(number), ClientID(b"Client|c"), b"body", "Pricer.price", actor_id=tid(actor))


def test_a_built_actor_takes_no_slot_and_its_calls_go_straight_to_its_processor() -> None:
    """Checked to fail with ProcessorTable.host doing nothing: the plain task got no processor."""
    agent, effects = make(slots=1, task_timeout_seconds=1.0)
    (first,) = spawned(effects)
    connect(agent)
    ready(agent, first)
    agent.handle(core.FromScheduler(actor_start(1), 0.0))
    effects = agent.handle(core.FromProcessor(first, m.ActorReady(tid(1)), 0.1))
    assert to_scheduler(effects, m.ActorReady) == [m.ActorReady(tid(1))]
    assert agent.table.count(core.ProcessorState.HOSTING) == 1 and agent.running == 0
    (second,) = spawned(effects)  # a processor for tasks beside the actor
    ready(agent, second, 0.15)
    effects = agent.handle(core.FromScheduler(task(2), 0.2))
    assert to_processor(effects, m.Task) == [(second, task(2))]
    effects = agent.handle(core.FromScheduler(actor_call(3, 1), 0.3))
    assert to_processor(effects, m.Task) == [(first, actor_call(3, 1))]
    effects = agent.handle(core.FromProcessor(first, result(3), 0.4))
    assert [r.task_id for r in to_scheduler(effects, m.TaskResult)] == [tid(3)]
    effects = agent.handle(core.AgentTick(5.0))  # past the task timeout: the plain task times out, the actor never does
    assert [r.task_id for r in to_scheduler(effects, m.TaskResult)] == [tid(2)]
    assert agent.tasks[tid(1)].processor == first
    effects = agent.handle(core.FromScheduler(m.ActorStop(tid(1)), 5.1))
    assert to_processor(effects, m.ActorStop) == [(first, m.ActorStop(tid(1)))]
    effects = agent.handle(core.FromProcessor(first, result(1), 5.2))
    assert [r.task_id for r in to_scheduler(effects, m.TaskResult)] == [tid(1)]
    assert agent.table.count(core.ProcessorState.HOSTING) == 0


def test_a_call_for_an_actor_not_held_here_is_answered_actor_died() -> None:
    agent, effects = make()
    connect(agent)
    effects = agent.handle(core.FromScheduler(actor_call(3, 1), 0.0))
    (answer,) = to_scheduler(effects, m.TaskResult)
    assert answer.task_id == tid(3) and answer.status is m.ResultStatus.ACTOR_DIED


def test_a_linked_actors_end_comes_as_a_result_sent_frees_its_processor_and_teaches_no_run_time() -> None:
    """An actor whose calls came on its processor's link (docs/protocol.md section 3.8): its ActorReady goes on
    naming the link, and its start task's end comes as a ResultSent, which frees the processor and is kept in the
    journal, but is no run time of the class. Checked to fail with `_on_result_sent` learning from it (the class
    became one to stage behind)."""
    agent, effects = make(slots=1)
    (first,) = spawned(effects)
    connect(agent)
    ready(agent, first)
    agent.handle(core.FromScheduler(actor_start(1), 0.0))
    effects = agent.handle(core.FromProcessor(first, m.ActorReady(tid(1), b"W/p1"), 0.1))
    assert to_scheduler(effects, m.ActorReady) == [m.ActorReady(tid(1), b"W/p1")]
    sent = m.ResultSent(tid(1), b"its frame", 0.00001)
    effects = agent.handle(core.FromProcessor(first, sent, 0.2))
    assert not to_scheduler(effects, m.TaskResult), "the processor sent it on its link"
    assert agent.table.count(core.ProcessorState.HOSTING) == 0 and agent.running == 0
    assert agent.estimates.staging_depth("Pricer", 8) == 0
    assert agent.journal.processor_gone(first) == [sent], "kept until the scheduler names it"


def killed(effects: list[core.Effect]) -> list[bytes]:
    return [e.processor_id for e in effects if isinstance(e, core.KillProcessor)]


def test_a_processor_whose_linked_actor_ended_is_not_retired_until_the_scheduler_read_the_end() -> None:
    """The calls' results of an actor on its processor's link went there before its end, and only the link has them:
    the processor is not killed as not needed until the scheduler names the end read (the link was read up to
    there), or the journal sends the end again itself. Checked to fail with `_keep_processors` not passing the
    processors kept (the first actors' processors were killed at their ends, and the churn of actors made and
    dropped with a call each got ACTOR_DIED "it was stopped" for calls whose results died in a killed processor)."""
    agent, effects = make(slots=1)
    (first,) = spawned(effects)
    connect(agent)
    ready(agent, first)
    hosts = [first]
    for number in (1, 2, 3):  # three actors, each in a processor of its own, and a processor beside them
        agent.handle(core.FromScheduler(actor_start(number), 0.1 * number))
        effects = agent.handle(core.FromProcessor(hosts[-1], m.ActorReady(tid(number), b"W/link"), 0.1 * number))
        (beside,) = spawned(effects)
        ready(agent, beside, 0.1 * number)
        hosts.append(beside)
    retired: list[bytes] = []
    for number in (1, 2, 3):
        sent = m.ResultSent(tid(number), b"its frame")
        retired += killed(agent.handle(core.FromProcessor(hosts[number - 1], sent, 1.0 + number)))
    assert retired == [hosts[3]], "the idle one beyond the slack retires; not those whose actors' ends are not read"
    effects = agent.handle(core.FromScheduler(m.HeartbeatEcho(results_read=(tid(1),)), 4.0))
    assert killed(effects) == [hosts[0]], "read: it may retire"
    effects = agent.handle(core.FromScheduler(m.HeartbeatEcho(), 4.5))
    assert killed(effects) == [], "one echo without naming the others: they may still be on their way"


def test_a_lending_worker_replaces_the_processors_that_hosted_actors() -> None:
    """Its scheduler lends a processor that hosted an actor no more: once idle it is not counted ready and retires
    (after the scheduler read its actor's end), and the processor that is lent stays. Checked to fail with the pool
    counting such processors ready: the lent one was retired instead (the others were kept, their ends unread), the
    worker was left with no lent processor, and its scheduler sent it no task again."""
    agent, effects = make(slots=1, lend_processors=True)
    hosts = spawned(effects)
    connect(agent)
    ready(agent, hosts[0])
    for number in (1, 2):  # two actors, each in a processor of its own, and a processor beside them
        agent.handle(core.FromScheduler(actor_start(number), 0.1 * number))
        effects = agent.handle(core.FromProcessor(hosts[-1], m.ActorReady(tid(number), b"W/link"), 0.1 * number))
        (beside,) = spawned(effects)
        ready(agent, beside, 0.1 * number)
        hosts.append(beside)
    effects = []
    for number in (1, 2):
        sent = m.ResultSent(tid(number), b"its frame")
        effects += agent.handle(core.FromProcessor(hosts[number - 1], sent, 1.0 + number))
    assert killed(effects) == [] and spawned(effects) == [], "the lent one is ready; the others wait for the echo"
    effects = agent.handle(core.FromScheduler(m.HeartbeatEcho(results_read=(tid(1), tid(2))), 4.0))
    assert killed(effects) == hosts[:2] and spawned(effects) == []
    assert agent.processors[hosts[2]].state is core.ProcessorState.IDLE


# ---------------------------------------------------------------- rule 9: a lifetime (a batch job's time limit)


def test_a_worker_with_a_lifetime_drains_before_it_ends_then_leaves_and_exits() -> None:
    """Checked by switching it off: with lifetime_seconds 0 no WorkerLeaving is ever sent."""
    agent, effects = make(lifetime_seconds=100.0, lifetime_drain_seconds=30.0, lifetime_started_at=-10.0)
    (first,) = spawned(effects)
    assert not to_scheduler(agent.handle(core.AgentTick(59.0)), m.WorkerLeaving)  # not registered, not due
    connect(agent, 59.0)
    ready(agent, first, 59.0)
    agent.handle(core.FromScheduler(task(1), 59.5))
    assert not to_scheduler(agent.handle(core.AgentTick(59.9)), m.WorkerLeaving)  # 30.1 s left
    (drain,) = to_scheduler(agent.handle(core.AgentTick(60.0)), m.WorkerLeaving)  # its process started at -10
    assert drain.drain_seconds == pytest.approx(30.0)
    assert drain.reason == "its lifetime of 100 s ends in 30 s"
    assert not to_scheduler(agent.handle(core.AgentTick(61.0)), m.WorkerLeaving)  # said once
    effects = agent.handle(core.FromProcessor(first, result(1), 70.0))  # what it runs finishes meanwhile
    assert to_scheduler(effects, m.TaskResult)
    (leave,) = to_scheduler(agent.handle(core.AgentTick(90.0)), m.WorkerLeaving)  # the lifetime is over
    assert (leave.reason, leave.drain_seconds) == ("its lifetime of 100 s is over", 0.0)
    assert not [e for e in agent.handle(core.AgentTick(92.0)) if isinstance(e, core.Exit)]
    (exit_,) = [e for e in agent.handle(core.AgentTick(93.0)) if isinstance(e, core.Exit)]  # not acknowledged
    assert exit_.code == core.EXIT_OK


def test_a_drained_worker_exits_when_the_scheduler_lets_it_go() -> None:
    agent, _ = make(lifetime_seconds=100.0, lifetime_drain_seconds=30.0)
    connect(agent)
    assert to_scheduler(agent.handle(core.AgentTick(75.0)), m.WorkerLeaving)
    (exit_,) = [e for e in agent.handle(core.FromScheduler(m.Shutdown("drained"), 76.0)) if isinstance(e, core.Exit)]
    assert exit_.code == core.EXIT_OK


def test_a_draining_worker_tells_a_scheduler_that_forgot_it_again() -> None:
    agent, _ = make(lifetime_seconds=100.0, lifetime_drain_seconds=30.0)
    connect(agent)
    assert to_scheduler(agent.handle(core.AgentTick(75.0)), m.WorkerLeaving)
    agent.handle(core.FromScheduler(m.ProtocolError("unknown peer", m.ProtocolErrorKind.UNKNOWN_PEER), 76.0))
    connect(agent, 77.0)  # registered again with a restarted scheduler
    (drain,) = to_scheduler(agent.handle(core.AgentTick(78.0)), m.WorkerLeaving)
    assert drain.drain_seconds == pytest.approx(22.0)
