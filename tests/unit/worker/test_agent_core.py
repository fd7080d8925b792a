"""The worker agent's pure core, the processors' supervisor (worker/agent/core.py): its link to the scheduler, the
processors it keeps, configures, kills on request and reports when they end. It sees no task: they come on each
processor's own link."""

from __future__ import annotations

import logging

import pytest

from scaler.protocol import messages as m
from scaler.protocol.ids import TaskID
from scaler.worker.agent import core

FORGOTTEN = m.ProtocolError("unknown peer", m.ProtocolErrorKind.UNKNOWN_PEER)


def make(**settings: object) -> tuple[core.AgentCore, list[core.Effect]]:
    agent = core.AgentCore(core.AgentSettings(**settings), started_at=0.0)  # type: ignore[arg-type]
    effects = agent.start()
    return agent, effects


def spawned(effects: list[core.Effect]) -> list[bytes]:
    return [e.processor_id for e in effects if isinstance(e, core.SpawnProcessor)]


def killed(effects: list[core.Effect]) -> list[bytes]:
    return [e.processor_id for e in effects if isinstance(e, core.KillProcessor)]


def to_scheduler(effects: list[core.Effect], kind: type) -> list:  # type: ignore[type-arg]
    return [e.message for e in effects if isinstance(e, core.ToScheduler) and isinstance(e.message, kind)]


def configured(effects: list[core.Effect]) -> list[bytes]:
    return [e.processor_id for e in effects if isinstance(e, core.ToProcessor) and isinstance(e.message, m.HelloReply)]


def connect(agent: core.AgentCore, now: float = 0.0, instance: bytes = b"") -> list[core.Effect]:
    reply = m.HelloReply(True, object_storage_address="tcp://s:2", instance_id=instance)
    return agent.handle(core.FromScheduler(reply, now))


def ready(agent: core.AgentCore, processor: bytes, now: float = 0.0) -> list[core.Effect]:
    return agent.handle(core.FromProcessor(processor, m.ProcessorReady(100), now))


def test_it_starts_a_processor_per_slot_before_the_scheduler_answers_and_configures_each_once_registered() -> None:
    agent, effects = make(slots=2)
    first, second = spawned(effects)
    assert configured(ready(agent, first)) == [], "not before the worker is registered"
    assert configured(connect(agent)) == [first]
    assert configured(ready(agent, second)) == [second]
    assert [e for e in effects if isinstance(e, core.SayHello)]
    assert agent.capacity == 2, "one task per slot (its processors stage none: no prefetch)"
    assert core.AgentCore(core.AgentSettings(slots=2, max_staged_tasks=64), 0.0).capacity == 3, "and one prefetched"


def test_a_processor_is_killed_on_request_and_reported_stopped_and_replaced() -> None:
    agent, effects = make()
    (first,) = spawned(effects)
    connect(agent)
    ready(agent, first)
    effects = agent.handle(core.FromScheduler(m.ProcessorKill(first, "its task timed out"), 1.0))
    assert killed(effects) == [first] and len(spawned(effects)) == 1, "replaced at once, while it dies"
    effects = agent.handle(core.ProcessorDied(first, "killed by SIGKILL", 1.1, "out of memory: ...", b"t"))
    (exited,) = to_scheduler(effects, m.ProcessorExited)
    assert exited == m.ProcessorExited(first, "stopped: its task timed out", "", b"t", True), "killed: no OOM verdict"
    assert not spawned(effects)


def test_a_processor_that_dies_is_reported_with_its_mark_and_memory_verdict() -> None:
    agent, effects = make()
    (first,) = spawned(effects)
    connect(agent)
    ready(agent, first)
    effects = agent.handle(core.ProcessorDied(first, "killed by SIGKILL", 1.0, "out of memory: peak 2 GiB", b"t"))
    assert to_scheduler(effects, m.ProcessorExited) == [
        m.ProcessorExited(first, "killed by SIGKILL", "out of memory: peak 2 GiB", b"t", True)
    ]
    effects = agent.handle(core.ProcessorDied(spawned(effects)[0], "exit code 3", 2.0, "", None))
    assert to_scheduler(effects, m.ProcessorExited)[0].computing_task_known is False, "no mark: not known"


def test_it_keeps_the_processors_the_scheduler_wants_beyond_its_slots() -> None:
    agent, effects = make(slots=1)
    (first,) = spawned(effects)
    connect(agent)
    ready(agent, first)
    effects = agent.handle(core.FromScheduler(m.ProcessorsWanted(2), 1.0))
    extra = spawned(effects)
    assert len(extra) == 2
    effects = agent.handle(core.FromScheduler(m.ProcessorsWanted(0), 2.0))
    assert not killed(effects), "the scheduler names the ones it retires"
    effects = agent.handle(core.FromScheduler(m.ProcessorKill(extra[0], "not needed any more"), 2.0))
    assert killed(effects) == [extra[0]]
    assert not spawned(agent.handle(core.ProcessorDied(extra[0], "killed by SIGKILL", 2.1))), "not replaced"


def test_a_failing_preload_stops_the_worker_and_so_do_repeated_start_failures() -> None:
    agent, effects = make(has_preload=True)
    (first,) = spawned(effects)
    effects = agent.handle(core.ProcessorDied(first, "exit code 1", 0.1))
    (exit_effect,) = [e for e in effects if isinstance(e, core.Exit)]
    assert exit_effect.code == core.EXIT_ERROR and "preload" in exit_effect.reason
    agent, effects = make()
    for attempt in range(3):
        (processor,) = spawned(effects)
        effects = agent.handle(core.ProcessorDied(processor, "exit code 1", 0.1 * attempt))
    assert [e.code for e in effects if isinstance(e, core.Exit)] == [core.EXIT_ERROR]


def test_death_timeout_tells_never_connected_from_lost() -> None:
    agent, _ = make(death_timeout_seconds=5)
    effects = agent.handle(core.AgentTick(6.0))
    assert [e.code for e in effects if isinstance(e, core.Exit)] == [core.EXIT_NEVER_CONNECTED]
    agent, _ = make(death_timeout_seconds=5)
    connect(agent, now=1.0)
    effects = agent.handle(core.AgentTick(7.0))
    assert [e.code for e in effects if isinstance(e, core.Exit)] == [core.EXIT_SCHEDULER_LOST]


def test_refused_hello_and_shutdown_stop_the_worker_and_its_processors() -> None:
    agent, _ = make()
    effects = agent.handle(core.FromScheduler(m.HelloReply(False, "Python 2.7"), 0.0))
    (exit_effect,) = [e for e in effects if isinstance(e, core.Exit)]
    assert exit_effect.code == core.EXIT_ERROR and "Python 2.7" in exit_effect.reason
    agent, effects = make(slots=2)
    connect(agent)
    effects = agent.handle(core.FromScheduler(m.Shutdown("bye"), 0.0))
    assert [e.code for e in effects if isinstance(e, core.Exit)] == [core.EXIT_OK]
    assert len(killed(effects)) == 2


def test_the_hello_goes_at_start_and_heartbeats_follow_the_interval_once_registered() -> None:
    agent, effects = make(heartbeat_interval_seconds=2.0)
    assert [e for e in effects if isinstance(e, core.SayHello)]
    assert not [e for e in effects if isinstance(e, core.SendWorkerHeartbeat)]
    assert [e for e in connect(agent, 0.5) if isinstance(e, core.SendWorkerHeartbeat)]
    assert not [e for e in agent.handle(core.AgentTick(1.5)) if isinstance(e, core.SendWorkerHeartbeat)]
    (heartbeat,) = [e for e in agent.handle(core.AgentTick(2.6)) if isinstance(e, core.SendWorkerHeartbeat)]
    assert heartbeat.status == m.WorkerStatus(), "it counts no task: the scheduler adds those on its links"


def test_a_scheduler_that_forgot_the_worker_gets_a_new_hello_and_the_processors_are_configured_again() -> None:
    """After a restart the processors say hello again on their links (each naming the tasks it holds): their agent
    configures them again once it is registered again. A leaving worker does not register again."""
    agent, effects = make()
    (first,) = spawned(effects)
    connect(agent, instance=b"old")
    ready(agent, first)
    effects = agent.handle(core.FromScheduler(FORGOTTEN, 1.0))
    (say,) = [e for e in effects if isinstance(e, core.SayHello)]
    assert say.known_instance == b"old" and not killed(effects), "its processors go on"
    assert configured(connect(agent, 1.1, instance=b"new")) == [first]
    agent, _ = make()
    connect(agent)
    agent.handle(core.LeaveRequested("sigterm", 1.0))
    effects = agent.handle(core.FromScheduler(FORGOTTEN, 1.1))
    assert not [e for e in effects if isinstance(e, core.SayHello)]


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
    agent.handle(core.FromScheduler(FORGOTTEN, 5.0))
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


def test_what_a_processor_says_of_its_tasks_is_no_business_of_its_agent() -> None:
    """Everything about a task goes on the processor's link: the agent ignores it (and sends nothing of it on)."""
    agent, effects = make()
    (first,) = spawned(effects)
    connect(agent)
    ready(agent, first)
    result = m.TaskResult(TaskID(b"t"), m.ResultStatus.SUCCESS)
    effects = agent.handle(core.FromProcessor(first, result, 1.0))
    assert not [e for e in effects if isinstance(e, core.ToScheduler)]


# ---------------------------------------------------------------- rule 6: a lifetime (a batch job's time limit)


def test_a_worker_with_a_lifetime_drains_before_it_ends_then_leaves_and_exits() -> None:
    """Checked by switching it off: with lifetime_seconds 0 no WorkerLeaving is ever sent."""
    agent, _ = make(lifetime_seconds=100.0, lifetime_drain_seconds=30.0, lifetime_started_at=-10.0)
    assert not to_scheduler(agent.handle(core.AgentTick(59.0)), m.WorkerLeaving)  # not registered, not due
    connect(agent, 59.0)
    assert not to_scheduler(agent.handle(core.AgentTick(59.9)), m.WorkerLeaving)  # 30.1 s left
    (drain,) = to_scheduler(agent.handle(core.AgentTick(60.0)), m.WorkerLeaving)  # its process started at -10
    assert drain.drain_seconds == pytest.approx(30.0)
    assert drain.reason == "its lifetime of 100 s ends in 30 s"
    assert not to_scheduler(agent.handle(core.AgentTick(61.0)), m.WorkerLeaving)  # said once
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


def test_processors_are_configured_with_the_route_to_storage_once_it_is_found() -> None:
    """Rule 7: with `route_storage`, the storage's address is routed once (the host's cache off its host); processors
    are configured with the route, and a new registration reuses it. Off (no route_storage): the scheduler's address."""
    agent, effects = make(slots=2, route_storage=True)
    first, second = spawned(effects)
    ready(agent, first)
    effects = connect(agent)
    assert [e for e in effects if isinstance(e, core.RouteStorage)] == [core.RouteStorage("tcp://s:2")]
    assert configured(effects) == [], "not before the route is known"
    effects = agent.handle(core.StorageRouted("tcp://cache:9", "KEY", 0.1))
    assert [(e.processor_id, e.message.object_storage_address, e.message.object_storage_server_key)
            for e in effects if isinstance(e, core.ToProcessor)] == [(first, "tcp://cache:9", "KEY")]  # fmt: skip
    assert configured(ready(agent, second)) == [second]
    agent.handle(core.FromScheduler(FORGOTTEN, 1.0))
    effects = connect(agent, 1.1)
    assert not [e for e in effects if isinstance(e, core.RouteStorage)], "routed once"
    assert sorted(configured(effects)) == sorted([first, second])
    agent, effects = make(slots=1)
    (only,) = spawned(effects)
    ready(agent, only)
    effects = connect(agent)
    (reply,) = [e.message for e in effects if isinstance(e, core.ToProcessor)]
    assert isinstance(reply, m.HelloReply) and reply.object_storage_address == "tcp://s:2"
    assert not [e for e in effects if isinstance(e, core.RouteStorage)]
