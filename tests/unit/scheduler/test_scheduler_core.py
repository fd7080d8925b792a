"""The scheduler core, events in and effects out: registration, dispatch, results, cancel, deaths."""

from __future__ import annotations

import typing

import pytest

from scaler.policy.content import Allocation
from scaler.protocol import messages as m
from scaler.protocol.ids import PeerID, TaskID
from scaler.scheduler.core.client_sessions import ANSWERS_WAIT_AT_LIVE
from scaler.scheduler.core.effects import DeleteOwnerObjects, Publish, Send, StopScheduler
from scaler.scheduler.core.events import Beats, PeerLost, Received, Tick, Undecodable
from scaler.scheduler.core.follow_ups import FollowUp
from scaler.scheduler.core.scheduler_core import CoreSettings, SchedulerCore
from scaler.scheduler.core.task_state import TRANSITIONS, Outcome, TaskEvent, TaskState
from scaler.scheduler.core.task_table import TRANSITIONS_PER_PUBLICATION
from scaler_rehearsal.testing.simulation import PYTHON, SimulatedCluster, hello, task


def sent_to(effects: list, peer: bytes, kind: type) -> list:  # type: ignore[type-arg]
    """What went to `peer` (a worker's: to its agent or on its processors' links)."""
    return [
        e.message
        for e in effects
        if isinstance(e, Send) and (e.peer == peer or e.peer.startswith(peer + b"/")) and isinstance(e.message, kind)
    ]


def tid(number: int) -> TaskID:
    return TaskID(number.to_bytes(16, "big"))


def test_transition_table_is_total() -> None:
    assert {(s, e) for s in TaskState for e in TaskEvent} == set(TRANSITIONS)


def test_every_outcome_the_table_names_is_carried_out_by_the_lifecycle() -> None:
    core = SchedulerCore(CoreSettings("a", "b", PYTHON), strict=True)
    named = set(TRANSITIONS.values()) - {Outcome.IGNORE}
    assert named == set(Outcome) - {Outcome.IGNORE}  # no outcome is dead
    assert set(core.lifecycle._outcomes) == named


def test_every_message_a_peer_may_send_has_a_handler() -> None:
    core = SchedulerCore(CoreSettings("a", "b", PYTHON), strict=True)
    client_sends = {
        m.Heartbeat, m.Task, m.GraphTask, m.TaskCancel, m.ClientDisconnect, m.TaskStoryRequest, m.JobOpen, m.JobAttach,
        m.StreamCredit, m.ActorStop, m.ActorLookup, m.ClientResume,
    }  # fmt: skip
    worker_sends = {m.Heartbeat, m.WorkerCapacity, m.WorkerLeaving, m.ProcessorExited}
    processor_sends = {m.TaskResult, m.TaskCancelConfirm, m.TaskLog, m.StreamItem, m.TaskReturn, m.ProcessorBlocked,
                       m.ProcessorResumeRequest, m.ProcessorWriting, m.ActorReady}  # fmt: skip
    routing = core.routing
    assert set(routing.client_handlers) == client_sends
    assert set(routing.worker_handlers) == worker_sends, "a task's messages come on its processor's link only"
    assert set(routing.processor_handlers) == processor_sends
    assert set(routing.manager_handlers) == {m.Heartbeat, m.UnitsReclaimed}


def test_every_follow_up_a_registry_may_emit_has_one_route() -> None:
    core = SchedulerCore(CoreSettings("a", "b", PYTHON), strict=True)
    assert set(core.routing._follow_ups) == set(typing.get_args(FollowUp))


# ---------------------------------------------------------------- hello


def test_hello_is_answered_with_the_object_storage_address() -> None:
    sim = SimulatedCluster()
    effects = sim.send(b"Client|x", hello(m.ClientInfo()))
    (reply,) = sent_to(effects, b"Client|x", m.HelloReply)
    assert reply.accepted and reply.object_storage_address == "tcp://sim:2"


@pytest.mark.parametrize(
    "protocol, python, words",
    [(99, PYTHON, "protocol version 99"), (m.PROTOCOL_VERSION, "3.9.1", "Python 3.9.1")],
)
def test_incompatible_peer_is_refused_with_a_readable_reason(protocol: int, python: str, words: str) -> None:
    sim = SimulatedCluster()
    effects = sim.send(b"Worker|x", hello(m.WorkerInfo(), python, protocol))
    (reply,) = sent_to(effects, b"Worker|x", m.HelloReply)
    assert not reply.accepted and words in reply.reason
    assert not sim.core.workers


def test_message_from_an_unknown_peer_gets_a_protocol_error() -> None:
    sim = SimulatedCluster()
    effects = sim.send(b"Client|ghost", task(b"Client|ghost", 1))
    (error,) = sent_to(effects, b"Client|ghost", m.ProtocolError)
    assert "Hello" in error.reason


def test_undecodable_frame_is_answered_and_the_core_carries_on() -> None:
    sim = SimulatedCluster()
    effects = sim.feed(Undecodable(PeerID(b"x"), "garbage", 0.0))
    assert sent_to(effects, b"x", m.ProtocolError)
    client = sim.add_client()
    sim.add_worker()
    sim.submit(client, [task(client.peer, 1)])
    assert sim.workers[PeerID(b"Worker|SIM|w")].held


def test_duplicate_manager_id_is_refused() -> None:
    sim = SimulatedCluster()
    sim.send(b"m1", hello(m.ManagerInfo("tier1")))
    effects = sim.send(b"m2", hello(m.ManagerInfo("tier1")))
    (reply,) = sent_to(effects, b"m2", m.HelloReply)
    assert not reply.accepted and "tier1" in reply.reason and "already connected" in reply.reason


# ---------------------------------------------------------------- dispatch


def test_tasks_wait_for_a_worker_then_run() -> None:
    sim = SimulatedCluster()
    client = sim.add_client()
    sim.submit(client, [task(client.peer, 1)])
    worker = sim.add_worker()
    assert worker.held == [TaskID((1).to_bytes(16, "big"))]
    sim.finish(worker)
    assert client.answers[TaskID((1).to_bytes(16, "big"))] == [("result", "success")]
    sim.check_invariants()


def test_dispatch_respects_credit_and_spreads_load_evenly() -> None:
    sim = SimulatedCluster()
    client = sim.add_client()
    a, b = sim.add_worker("a", capacity=2), sim.add_worker("b", capacity=2)
    sim.submit(client, [task(client.peer, n) for n in range(10)])
    assert len(a.held) == 2 and len(b.held) == 2
    assert len(sim.core.tasks.queue) == 6
    sim.finish(a)
    assert len(a.held) == 2 and len(sim.core.tasks.queue) == 5
    sim.check_invariants()


def test_capacity_updates_change_the_credit() -> None:
    sim = SimulatedCluster()
    client = sim.add_client()
    worker = sim.add_worker(capacity=1)
    sim.submit(client, [task(client.peer, n) for n in range(5)])
    assert len(worker.held) == 1
    sim.send(worker.peer, m.WorkerCapacity(4))
    assert len(worker.held) == 4


def test_tasks_go_to_the_least_loaded_worker_as_loads_change_among_many_workers() -> None:
    """Dispatch keeps its choice (least loaded, then join order) while it no longer scans every worker: loads
    that change by results, returns, capacity updates and departures are all seen."""
    sim = SimulatedCluster()
    client = sim.add_client()
    workers = [sim.add_worker(f"w{n}", capacity=3) for n in range(50)]
    sim.submit(client, [task(client.peer, n) for n in range(100)])
    assert [len(w.held) for w in workers] == [2] * 50  # spread evenly, not piled on the first ones
    for worker in workers[10:20]:
        sim.finish(worker)
        sim.finish(worker)
    sim.submit(client, [task(client.peer, n) for n in range(100, 110)])
    assert [len(w.held) for w in workers[10:20]] == [1] * 10  # the emptied ones first
    sim.kill(workers[0])
    sim.send(workers[1].peer, m.WorkerCapacity(8))
    sim.submit(client, [task(client.peer, n) for n in range(110, 200)])
    assert len(workers[1].held) == 8 and workers[0].held == []
    sim.check_invariants()


def test_clients_take_turns_so_a_second_client_does_not_wait_for_the_first_ones_backlog() -> None:
    sim = SimulatedCluster()
    a, b = sim.add_client("a"), sim.add_client("b")
    worker = sim.add_worker(capacity=1)
    sim.submit(a, [task(a.peer, n) for n in range(100)])
    for _ in range(10):
        sim.finish(worker)
    sim.submit(b, [task(b.peer, n) for n in range(1000, 1010)])
    ran = []
    for _ in range(20):
        ran.append(int.from_bytes(worker.held[0], "big"))
        sim.finish(worker)
    of_b = [number for number in ran if number >= 1000]
    assert len(of_b) == 10 and ran.index(of_b[0]) <= 1  # b's ten ran among a's next ones, from the start
    of_a = [number for number in ran if number < 1000]
    assert of_a == list(range(10, 20)) and of_b == list(range(1000, 1010))  # each client's order is kept
    sim.check_invariants()


def test_higher_priority_runs_first_then_submission_order() -> None:
    sim = SimulatedCluster()
    client = sim.add_client()
    sim.submit(client, [task(client.peer, 1), task(client.peer, 2, priority=3), task(client.peer, 3)])
    worker = sim.add_worker(capacity=3)
    assert worker.held == [TaskID(n.to_bytes(16, "big")) for n in (2, 1, 3)]


def test_capability_tasks_wait_for_a_capable_worker_without_blocking_others() -> None:
    sim = SimulatedCluster(CoreSettings("s", "o", PYTHON, allocate=Allocation.CAPABILITY))
    client = sim.add_client()
    plain = sim.add_worker("plain", capacity=5)
    sim.submit(client, [task(client.peer, 1, capabilities=(("gpu", 1),)), task(client.peer, 2)])
    assert plain.held == [TaskID((2).to_bytes(16, "big"))]
    waiting = [group for group in sim.core.view().pending if group.count]
    (group,) = waiting
    assert group.count == 1 and "gpu" in group.reason
    gpu = sim.add_worker("gpu", capabilities=(("gpu", -1),))
    assert gpu.held == [TaskID((1).to_bytes(16, "big"))]


def test_admission_control_refuses_tasks_beyond_the_waiting_limit() -> None:
    sim = SimulatedCluster(CoreSettings("s", "o", PYTHON, max_tasks_waiting=2))
    client = sim.add_client()
    sim.submit(client, [task(client.peer, n) for n in range(3)])
    assert client.answers[TaskID((2).to_bytes(16, "big"))] == [("result", "noWorker")]


# ---------------------------------------------------------------- results and cancel


def test_a_result_from_another_worker_is_stale_and_dropped() -> None:
    sim = SimulatedCluster()
    client = sim.add_client()
    a, b = sim.add_worker("a"), sim.add_worker("b")
    sim.submit(client, [task(client.peer, 1)])
    holder, other = (a, b) if a.held else (b, a)
    task_id = holder.held[0]
    sim.send(other.link, m.TaskResult(task_id, m.ResultStatus.SUCCESS, m.PayloadKind.INLINE, b"x"))
    assert client.answers[task_id] == []
    sim.finish(holder)
    assert client.answers[task_id] == [("result", "success")]


def test_cancel_of_a_queued_task_confirms_at_once() -> None:
    sim = SimulatedCluster()
    client = sim.add_client()
    sim.submit(client, [task(client.peer, 1)])
    sim.cancel(client, [TaskID((1).to_bytes(16, "big"))])
    assert client.answers[TaskID((1).to_bytes(16, "big"))] == [("cancelled", "canceled")]
    assert not sim.core.tasks.records


def test_cancel_of_a_running_task_goes_through_its_worker() -> None:
    sim = SimulatedCluster()
    client, worker = sim.add_client(), sim.add_worker()
    sim.submit(client, [task(client.peer, 1), task(client.peer, 2)])
    first = worker.held[0]
    sim.cancel(client, [first])
    assert client.answers[first] == [("cancelled", "canceled")]
    assert worker.held == [TaskID((2).to_bytes(16, "big"))], "the freed slot took the next task"
    sim.check_invariants()


def test_a_queued_only_cancel_cancels_the_queued_tasks_and_leaves_the_running_ones() -> None:
    """An Executor's shutdown(cancel_futures=True): what no worker holds is cancelled, the rest finishes unanswered by
    the cancel. Checked by switching the mechanism off: with `queued_only` ignored in cancel_by_client, the running
    task is cancelled at its worker and its answer is ("cancelled", "canceled")."""
    sim = SimulatedCluster()
    client, worker = sim.add_client(), sim.add_worker()
    sim.submit(client, [task(client.peer, n) for n in range(1, 20)])
    running = list(worker.held)
    queued = [TaskID(n.to_bytes(16, "big")) for n in range(1, 20) if TaskID(n.to_bytes(16, "big")) not in running]
    assert running and queued, "the worker holds some of the tasks and the scheduler queues the others"
    sim.send(client.peer, m.TaskCancel(tuple(running + queued), True))
    assert all(client.answers[task_id] == [("cancelled", "canceled")] for task_id in queued)
    assert all(client.answers[task_id] == [] for task_id in running)
    assert worker.held == running, "no cancel went to the worker, and no queued task took a slot"
    for _ in running:
        sim.finish(worker)
    assert all(client.answers[task_id] == [("result", "success")] for task_id in running)
    assert not sim.core.tasks.records
    sim.check_invariants()


def test_a_queued_only_cancel_in_the_burst_of_its_tasks_leaves_what_a_free_worker_takes_running() -> None:
    """Submissions and the shutdown's cancel read in one burst (one step of the core): the tasks a free worker would
    have taken run and finish; only the rest is cancelled. Checked by switching the mechanism off: without the
    dispatch before the cancel, every task is cancelled (CPython's ExecutorShutdownTest.test_cancel_futures failed)."""
    sim = SimulatedCluster()
    client, worker = sim.add_client(), sim.add_worker()
    tasks = [task(client.peer, n) for n in range(1, 11)]
    for item in tasks:
        client.answers.setdefault(item.task_id, [])
    sim.send_burst(client.peer, [*tasks, m.TaskCancel(tuple(item.task_id for item in tasks), True)])
    running = list(worker.held)
    assert running, "the free worker took a task before the cancel"
    assert all(
        client.answers[item.task_id] == [("cancelled", "canceled")] for item in tasks if item.task_id not in running
    )
    for _ in running:
        sim.finish(worker)
    assert all(client.answers[task_id] == [("result", "success")] for task_id in running)
    sim.check_invariants()


def test_a_result_that_wins_the_race_with_cancel_is_delivered_once() -> None:
    sim = SimulatedCluster()
    client, worker = sim.add_client(), sim.add_worker()
    sim.submit(client, [task(client.peer, 1)])
    task_id = worker.held[0]
    worker.alive = False  # the cancel is lost in flight: the worker finishes first
    sim.cancel(client, [task_id])
    worker.alive = True
    sim.send(worker.link, m.TaskResult(task_id, m.ResultStatus.SUCCESS, m.PayloadKind.INLINE, b"v"))
    sim.send(worker.link, m.TaskCancelConfirm(task_id, m.CancelOutcome.NOT_FOUND))
    assert client.answers[task_id] == [("result", "success")]
    assert not sim.core.workers[worker.peer].assigned


def test_cancel_of_an_unknown_task_says_not_found() -> None:
    sim = SimulatedCluster()
    client = sim.add_client()
    sim.cancel(client, [TaskID(b"z" * 16)])
    assert client.answers[TaskID(b"z" * 16)] == [("cancelled", "notFound")]


def test_cancel_while_the_worker_dies_ends_as_cancelled() -> None:
    sim = SimulatedCluster()
    client, worker = sim.add_client(), sim.add_worker()
    sim.submit(client, [task(client.peer, 1)])
    task_id = worker.held[0]
    worker.alive = False
    sim.cancel(client, [task_id])
    sim.kill(worker)
    assert client.answers[task_id] == [("cancelled", "canceled")]


# ---------------------------------------------------------------- deaths


def test_a_dead_workers_tasks_run_again_elsewhere() -> None:
    sim = SimulatedCluster()
    client = sim.add_client()
    a = sim.add_worker("a", capacity=2)
    sim.submit(client, [task(client.peer, 1), task(client.peer, 2)])
    held = list(a.held)
    b = sim.add_worker("b", capacity=2)
    sim.kill(a)
    assert b.held == held
    sim.finish(b)
    sim.finish(b)
    assert all(client.answers[t] == [("result", "success")] for t in held)


def test_a_task_that_outlives_the_retry_budget_fails_with_worker_died() -> None:
    sim = SimulatedCluster(CoreSettings("s", "o", PYTHON, max_task_retries=2))
    client = sim.add_client()
    sim.submit(client, [task(client.peer, 1)])
    for number in range(3):
        sim.kill(sim.add_worker(f"w{number}"))
    assert client.answers[TaskID((1).to_bytes(16, "big"))] == [("result", "workerDied")]
    result = [e.message for e in sim.effects if isinstance(e, Send) and isinstance(e.message, m.TaskResult)][-1]
    assert "3 time(s)" in result.error_message and "killed" in result.error_message


def test_a_task_whose_remote_host_was_lost_runs_again_within_the_retry_budget() -> None:
    """A proxy worker reports HOST_LOST when the machine that ran a task vanished (a reclaimed spot instance):
    the task goes back to the queue like a dead worker's, and fails with WorkerDiedError past the budget."""
    sim = SimulatedCluster(CoreSettings("s", "o", PYTHON, max_task_retries=1))
    client, proxy = sim.add_client(), sim.add_worker("proxy")
    sim.submit(client, [task(client.peer, 1)])
    sim.finish(proxy, status=m.ResultStatus.HOST_LOST)
    assert proxy.held == [tid(1)] and not client.answers[tid(1)]  # dispatched again, to the only worker
    sim.finish(proxy, status=m.ResultStatus.HOST_LOST)
    assert client.answers[tid(1)] == [("result", "workerDied")]
    assert proxy.alive


def test_a_gracefully_leaving_worker_hands_its_tasks_back_without_using_the_budget() -> None:
    sim = SimulatedCluster(CoreSettings("s", "o", PYTHON, max_task_retries=0))
    client, worker = sim.add_client(), sim.add_worker()
    sim.submit(client, [task(client.peer, 1)])
    effects = sim.send(worker.peer, m.WorkerLeaving("sigterm"))
    assert sent_to(effects, worker.peer, m.Shutdown)
    other = sim.add_worker("other")
    sim.finish(other)
    assert client.answers[TaskID((1).to_bytes(16, "big"))] == [("result", "success")]


def test_silent_workers_and_clients_are_dropped_on_tick() -> None:
    sim = SimulatedCluster(CoreSettings("s", "o", PYTHON, worker_timeout_seconds=5, client_timeout_seconds=5))
    client, worker = sim.add_client(), sim.add_worker()
    sim.submit(client, [task(client.peer, 1)])
    effects = sim.advance(6)
    assert not sim.core.workers and not sim.core.clients
    assert any(isinstance(e, DeleteOwnerObjects) and e.owner == client.peer for e in effects)
    assert not sim.core.tasks.records
    del worker


def test_a_late_beat_judges_no_silence_and_the_next_one_does() -> None:
    """A scheduler stalled past its peers' timeouts wakes with its beat due and their heartbeats not yet read: that
    beat (late, `Beats`) drops nobody; the heartbeats read after it keep the worker and the client, and the next,
    on-time beat still drops a worker that stays silent. Fails with `_on_tick` judging silence on a late beat
    (both are dropped on it), and with `Beats` calling every beat on time."""
    sim = SimulatedCluster(CoreSettings("s", "o", PYTHON, worker_timeout_seconds=3, client_timeout_seconds=3))
    client, worker, quiet = sim.add_client(), sim.add_worker(), sim.add_worker("quiet")
    beats = Beats()
    sim.feed(beats.tick(sim.now, 0.0))
    sim.time.advance(4)  # the scheduler did not run for 4 s
    late = beats.tick(sim.now, 0.0)
    assert not late.on_time
    sim.feed(late)
    assert {client.peer, worker.peer, quiet.peer} <= set(sim.core.clients) | set(sim.core.workers)
    sim.heartbeat(client)  # read after the late beat: they were sent during the stall
    sim.send(worker.peer, m.Heartbeat(worker=m.WorkerStatus()))
    sim.time.advance(0.25)
    on_time = beats.tick(sim.now, 0.0)
    assert on_time.on_time
    sim.feed(on_time)
    assert client.peer in sim.core.clients and worker.peer in sim.core.workers
    assert quiet.peer not in sim.core.workers, "silent through an on-time beat: dropped"


def test_a_departed_clients_objects_are_kept_for_the_retention_time() -> None:
    sim = SimulatedCluster(CoreSettings("s", "o", PYTHON, object_retention_seconds=30))
    client = sim.add_client()
    effects = sim.send(client.peer, m.ClientDisconnect())
    assert not any(isinstance(e, DeleteOwnerObjects) for e in effects)
    assert not any(isinstance(e, DeleteOwnerObjects) for e in sim.advance(29))
    (deletion,) = [e for e in sim.advance(2) if isinstance(e, DeleteOwnerObjects)]
    assert deletion.owner == client.peer
    assert not any(isinstance(e, DeleteOwnerObjects) for e in sim.advance(60))  # once


def test_a_client_back_within_its_retention_time_keeps_its_objects() -> None:
    sim = SimulatedCluster(CoreSettings("s", "o", PYTHON, object_retention_seconds=30, client_timeout_seconds=5))
    client = sim.add_client()
    sim.advance(6)  # silent too long (a laptop asleep): forgotten, its objects kept for 30 s
    assert client.peer not in sim.core.clients
    sim.send(client.peer, hello(m.ClientInfo("c")))  # its scheduler link registers again
    effects = []
    for _ in range(10):  # 40 s: well past the 30 s, heartbeating as a live client does
        effects += sim.send(client.peer, m.Heartbeat()) + sim.advance(4)
    assert client.peer in sim.core.clients
    assert not any(isinstance(e, DeleteOwnerObjects) for e in effects)


def test_a_cluster_shutdown_deletes_the_objects_kept_for_departed_clients() -> None:
    sim = SimulatedCluster(CoreSettings("s", "o", PYTHON, object_retention_seconds=30))
    gone, last = sim.add_client("gone"), sim.add_client("last")
    sim.send(gone.peer, m.ClientDisconnect())
    effects = sim.send(last.peer, m.ClientDisconnect(shutdown_cluster=True))
    deleted = {e.owner for e in effects if isinstance(e, DeleteOwnerObjects)}
    assert deleted == {gone.peer, last.peer}


def test_a_departed_clients_running_tasks_are_cancelled_at_their_workers() -> None:
    sim = SimulatedCluster()
    client, worker = sim.add_client(), sim.add_worker()
    sim.submit(client, [task(client.peer, 1)])
    effects = sim.feed(PeerLost(client.peer, "closed", 0.0))
    assert sent_to(effects, worker.peer, m.ProcessorKill), "computing alone: its processor is killed"
    assert any(isinstance(e, DeleteOwnerObjects) for e in effects)
    assert not worker.held and not sim.core.tasks.records


def test_status_and_task_transitions_are_published_on_ticks_with_wall_time() -> None:
    sim = SimulatedCluster()
    sim.add_worker()
    client = sim.add_client()
    sim.submit(client, [task(client.peer, 1), task(client.peer, 2)])
    effects = sim.feed(Tick(1.0, wall_time=1_700_000_001.0))
    published = [e.message for e in effects if isinstance(e, Publish)]
    (status,) = [p for p in published if isinstance(p, m.StatusSnapshot)]
    assert len(status.workers) == 1 and status.wall_time == 1_700_000_001.0
    assert status.feed_version == m.FEED_VERSION
    (client_summary,) = status.clients
    assert (client_summary.counts.queued, client_summary.counts.running) == (1, 1)
    (function,) = status.functions
    assert function.name == "f" and function.counts.live == 2
    (transitions,) = [p for p in published if isinstance(p, m.TaskTransitions)]
    states = [(t.task_id, t.state) for t in transitions.transitions]
    assert states == [(tid(1), "queued"), (tid(1), "dispatched"), (tid(2), "queued")]
    assert transitions.transitions[1].worker_id.startswith(b"Worker|")


def test_task_transitions_are_bounded_per_publication_and_the_rest_counted() -> None:
    sim = SimulatedCluster()
    client = sim.add_client()
    sim.submit(client, [task(client.peer, n) for n in range(TRANSITIONS_PER_PUBLICATION + 10)])
    (transitions,) = [e.message for e in sim.feed(Tick(1.0)) if isinstance(e, Publish) and
                      isinstance(e.message, m.TaskTransitions)]  # fmt: skip
    assert len(transitions.transitions) == TRANSITIONS_PER_PUBLICATION and transitions.dropped == 10
    later = [e.message for e in sim.feed(Tick(2.0)) if isinstance(e, Publish)]
    assert not [p for p in later if isinstance(p, m.TaskTransitions)]  # nothing new, nothing sent


# ---------------------------------------------------------------- shutdown


def test_protected_scheduler_refuses_shutdown() -> None:
    sim = SimulatedCluster(CoreSettings("s", "o", PYTHON, protected=True))
    client = sim.add_client()
    effects = sim.send(client.peer, m.ClientDisconnect(shutdown_cluster=True))
    (reply,) = sent_to(effects, client.peer, m.ShutdownReply)
    assert not reply.accepted and "protected" in reply.reason
    assert not [e for e in effects if isinstance(e, StopScheduler)]


def test_unprotected_scheduler_stops_workers_and_itself() -> None:
    sim = SimulatedCluster()
    client, worker = sim.add_client(), sim.add_worker()
    effects = sim.send(client.peer, m.ClientDisconnect(shutdown_cluster=True))
    assert sent_to(effects, client.peer, m.ShutdownReply)[0].accepted
    assert sent_to(effects, worker.peer, m.Shutdown)
    assert [e for e in effects if isinstance(e, StopScheduler)]


def test_a_task_whose_client_id_is_forged_is_refused_and_its_sender_told() -> None:
    sim = SimulatedCluster()
    client = sim.add_client()
    effects = sim.send(client.peer, task(b"Client|someone-else", 1))
    (refusal,) = sent_to(effects, client.peer, m.TaskResult)
    assert refusal.status is m.ResultStatus.ERROR and "client id" in refusal.error_message
    assert not sim.core.tasks.records


def test_received_events_advance_the_core_clock() -> None:
    core = SchedulerCore(CoreSettings("s", "o", PYTHON), strict=True)
    core.handle(Received(PeerID(b"Client|a"), hello(m.ClientInfo()), 42.0))
    assert core.clients[PeerID(b"Client|a")].last_seen == 42.0


# ---------------------------------------------------------------- balancing


def test_an_idle_worker_gets_a_prefetched_task_back_from_a_busy_one() -> None:
    sim = SimulatedCluster(CoreSettings("s", "o", PYTHON, load_balance_seconds=0.25, load_balance_trigger_times=2))
    client = sim.add_client()
    busy = sim.add_worker("busy", capacity=2)
    sim.submit(client, [task(client.peer, 1), task(client.peer, 2)])
    idle = sim.add_worker("idle", capacity=2)
    assert len(busy.held) == 2 and not idle.held
    sim.advance(0.25)  # first sighting of the plan (well before 2 would be asked back from behind a long 1)
    effects = sim.advance(0.25)  # second: act
    (request,) = sent_to(effects, busy.peer, m.TaskReturn)
    assert request.task_ids == (TaskID((2).to_bytes(16, "big")),)
    assert busy.returned == 1  # the fake worker gave the unstarted task back
    assert idle.held == [TaskID((2).to_bytes(16, "big"))]
    assert not sent_to(sim.advance(0.25) + sim.advance(0.25), busy.peer, m.TaskReturn), "asked only once"
    sim.check_invariants()


def test_no_balancing_while_tasks_wait_in_the_queue_or_when_disabled() -> None:
    sim = SimulatedCluster(CoreSettings("s", "o", PYTHON, load_balance_seconds=-1))
    client = sim.add_client()
    busy = sim.add_worker("busy", capacity=2)
    sim.submit(client, [task(client.peer, 1), task(client.peer, 2)])
    sim.add_worker("idle", capacity=2)
    effects = sim.advance(0.25) + sim.advance(0.25) + sim.advance(0.25)  # before 2 is asked back from behind a long 1
    assert not sent_to(effects, busy.peer, m.TaskReturn)


# ---------------------------------------------------------------- worker managers


class QueueLengthHook:
    """A scaling hook that asks for one worker per queued task (enough to see when targets go out)."""

    def targets(self, view: m.StatusSnapshot, manager_id: str) -> m.ManagerTarget:
        return m.ManagerTarget((m.TargetEntry((), sum(group.count for group in view.pending)),))

    def reason(self, manager_id: str) -> str:
        return "one worker per queued task"


def test_a_changed_target_goes_out_on_the_next_tick_without_waiting_for_a_heartbeat() -> None:
    sim = SimulatedCluster()
    sim.core = SchedulerCore(sim.settings, QueueLengthHook(), strict=True)
    effects = sim.send(b"manager", hello(m.ManagerInfo("m1")))
    assert sent_to(effects, b"manager", m.ManagerTarget) == [m.ManagerTarget((m.TargetEntry((), 0),))]
    client = sim.add_client()
    sim.submit(client, [task(client.peer, n) for n in range(3)])
    effects = sim.advance(0.25)
    assert sent_to(effects, b"manager", m.ManagerTarget) == [m.ManagerTarget((m.TargetEntry((), 3),))]
    assert sent_to(sim.advance(0.25), b"manager", m.ManagerTarget) == [], "unchanged: only heartbeats repeat it"
    effects = sim.send(b"manager", m.Heartbeat(manager=m.ManagerStatus(0, 0)))
    assert sent_to(effects, b"manager", m.ManagerTarget) == [m.ManagerTarget((m.TargetEntry((), 3),))]


class RecordingHook(QueueLengthHook):
    def __init__(self) -> None:
        self.views: list[m.StatusSnapshot] = []

    def targets(self, view: m.StatusSnapshot, manager_id: str) -> m.ManagerTarget:
        self.views.append(view)
        return super().targets(view, manager_id)


def test_the_scaling_hook_decides_on_the_view_the_feed_publishes_in_the_same_step() -> None:
    hook = RecordingHook()
    sim = SimulatedCluster()
    sim.core = SchedulerCore(sim.settings, hook, strict=True)
    sim.send(b"manager", hello(m.ManagerInfo("m1")))
    client = sim.add_client()
    sim.submit(client, [task(client.peer, 1)])
    effects = sim.advance(1.0)
    (status,) = [e.message for e in effects if isinstance(e, Publish) and isinstance(e.message, m.StatusSnapshot)]
    assert hook.views[-1] is status  # one read model: what the policy saw is what the monitors see


def test_a_task_ended_by_a_result_names_its_worker_and_run_time_on_the_feed() -> None:
    """The run report's timeline and durations read these (checked by leaving `ran` out of `_end`: the worker is
    then empty and the run time 0)."""
    sim = SimulatedCluster()
    worker = sim.add_worker()
    client = sim.add_client()
    sim.submit(client, [task(client.peer, 1), task(client.peer, 2)])
    sim.advance(2.5)
    sim.finish(worker, tid(1))
    sim.send(worker.link, m.TaskResult(tid(2), m.ResultStatus.FAILED, profile=m.Profile(0.25, 0.2, 4096)))
    published = [e.message for e in sim.advance(2.5) if isinstance(e, Publish)]
    (transitions,) = [p for p in published if isinstance(p, m.TaskTransitions)]
    ends = {t.task_id: t for t in transitions.transitions if t.state in ("success", "failed")}
    assert ends[tid(1)].worker_id == worker.peer and ends[tid(1)].run_seconds == pytest.approx(2.5)
    assert ends[tid(2)].worker_id == worker.peer and ends[tid(2)].run_seconds == 0.25
    assert ends[tid(2)].peak_memory_bytes == 4096 and ends[tid(1)].peak_memory_bytes == 0


def test_answers_may_wait_while_their_client_has_many_tasks_live_and_its_last_ones_leave_at_once() -> None:
    """client_sessions.py, rule 5: an answer for a client with at least ANSWERS_WAIT_AT_LIVE tasks still live may
    wait to leave with its next ones; the answers of its last ANSWERS_WAIT_AT_LIVE tasks may not."""
    sim = SimulatedCluster()
    client = sim.add_client()
    total = ANSWERS_WAIT_AT_LIVE + 5
    sim.submit(client, [task(client.peer, number) for number in range(total)])
    worker = sim.add_worker(capacity=total)
    may_wait = []
    for _ in range(total):
        task_id = worker.held.pop(0)
        effects = sim.send(worker.where.pop(task_id), m.TaskResult(task_id, m.ResultStatus.SUCCESS))
        may_wait += [e.may_wait for e in effects if isinstance(e, Send) and isinstance(e.message, m.TaskResult)]
    assert may_wait == [True] * 5 + [False] * ANSWERS_WAIT_AT_LIVE, may_wait
    assert len(client.answers) == total
