"""The scheduler core and its processors' links (link_sessions.py, processor_links.py; docs/architecture.md, "One
route"): every task reaches a processor on its link and everything about it comes back there; the scheduler keeps one
record per link, stops, times out and kills by its rules, and asks workers for the processors they keep.

Each test that checks a mechanism says how it was checked to fail with the mechanism off."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from scaler.protocol import messages as m
from scaler.protocol.ids import PeerID, TaskID
from scaler.scheduler.core.effects import Send
from scaler.scheduler.core.events import PeerLost, Tick
from scaler.scheduler.core.link_sessions import EXIT_WAIT_SECONDS
from scaler.scheduler.core.peers import WorkerRecord
from scaler.scheduler.core.processor_links import STOP_GRACE_SECONDS
from scaler_rehearsal.testing.simulation import FakeClient, FakeWorker, SimulatedCluster, hello, success, task


def sent_to(sim: SimulatedCluster, peer: bytes, kind: type) -> list:  # type: ignore[type-arg]
    return [e.message for e in sim.effects if isinstance(e, Send) and e.peer == peer and isinstance(e.message, kind)]


def tasks_on(sim: SimulatedCluster, link: bytes) -> list[TaskID]:
    return [t.task_id for t in sent_to(sim, link, m.Task)]


def one_worker(**settings: Any) -> tuple[SimulatedCluster, FakeClient, FakeWorker]:
    """A simulated scheduler with a client and a worker (`settings`: `SimulatedCluster.add_worker`'s)."""
    sim = SimulatedCluster()
    return sim, sim.add_client(), sim.add_worker(**settings)


def dies(sim: SimulatedCluster, worker: FakeWorker, link: bytes, **exited: object) -> None:
    """A processor dies: its link closes, its agent says why (ProcessorExited), and a new one says hello."""
    worker.links.remove(PeerID(link))
    sim.feed(PeerLost(PeerID(link), "connection closed", sim.now))
    sim.send(worker.peer, m.ProcessorExited(link.split(b"/")[1], **exited))  # type: ignore[arg-type]
    sim.add_processor(worker)


def test_every_kind_of_task_goes_on_a_link_and_its_results_end_it_there() -> None:
    sim, client, worker = one_worker(capacity=3)
    plain, streaming = task(client.peer, 1), replace(task(client.peer, 2), stream_credit=4)
    sim.submit(client, [plain, streaming])
    assert tasks_on(sim, worker.link) == [plain.task_id, streaming.task_id]
    assert not sent_to(sim, worker.peer, m.Task), "nothing goes to the worker's agent"
    sim.send(client.peer, m.StreamCredit(streaming.task_id, 8))
    assert sent_to(sim, worker.link, m.StreamCredit) == [m.StreamCredit(streaming.task_id, 8)], "credit on its link"
    sim.check_invariants()
    sim.finish(worker)
    sim.finish(worker)
    assert client.answers[plain.task_id] == [("result", "success")]
    assert not sim.core.processors[worker.link].tasks
    sim.check_invariants()


def test_tasks_spread_over_the_links_of_a_worker() -> None:
    sim, client, worker = one_worker(capacity=4, slots=2)
    sim.submit(client, [task(client.peer, n) for n in range(4)])
    assert [len(tasks_on(sim, link)) for link in worker.links] == [2, 2]


def test_a_cancelled_task_computing_alone_has_its_processor_killed_and_its_loss_answers_the_cancel() -> None:
    """Code stuck in a C call never sees a stop: the processor is killed (processor_links.py rule 4); the task staged
    behind it goes back to the queue, no retry spent, and nothing is blamed. Checked to fail with `stops_by_kill`
    returning False (a TaskCancel went on the link instead)."""
    sim, client, worker = one_worker(capacity=2)
    link = worker.link
    sim.submit(client, [task(client.peer, 1), task(client.peer, 2)])
    computing, staged = tasks_on(sim, link)
    sim.cancel(client, [computing])
    assert not sent_to(sim, link, m.TaskCancel)
    assert sent_to(sim, worker.peer, m.ProcessorKill) == [m.ProcessorKill(b"p1", "its task was cancelled")]
    assert client.answers[computing] == [("cancelled", "canceled")], "its processor's loss answered the cancel"
    assert tasks_on(sim, worker.links[0]) == [staged], "the staged one runs on the new processor"
    assert sim.core.tasks.records[staged].attempts == 1 and not sim.core.tasks.records[staged].lost_workers
    sim.check_invariants()


def test_a_staged_task_and_one_computing_among_parked_ones_are_stopped_in_their_processor() -> None:
    """A staged task is withdrawn there; a task computing among parked parents is stopped there (killing would take
    the parents down), and its processor is killed only if it does not unwind within STOP_GRACE_SECONDS. Checked to
    fail with `stop_on_link` always killing."""
    sim, client, worker = one_worker(capacity=3)
    link = worker.link
    sim.submit(client, [task(client.peer, n) for n in (1, 2, 3)])
    parent, child, staged = tasks_on(sim, link)
    sim.cancel(client, [staged])
    assert sent_to(sim, link, m.TaskCancel) == [m.TaskCancel((staged,))]
    assert client.answers[staged] == [("cancelled", "canceled")], "the processor withdrew it"
    sim.send(link, m.ProcessorBlocked(parent))  # the child computes now, beside its parked parent
    worker.where.pop(child)  # it is stuck: it will not answer the cancel
    worker.held.remove(child)
    sim.cancel(client, [child])
    assert sent_to(sim, link, m.TaskCancel)[-1] == m.TaskCancel((child,))
    assert not sent_to(sim, worker.peer, m.ProcessorKill)
    sim.advance(STOP_GRACE_SECONDS + 1)
    assert sent_to(sim, worker.peer, m.ProcessorKill) == [m.ProcessorKill(b"p1", "a task stopped in it did not end "
                                                                           "within 5 s")]  # fmt: skip
    assert client.answers[child] == [("cancelled", "canceled")]
    assert not client.answers[parent], "the parent runs again, a retry spent"
    assert sim.core.tasks.records[parent].lost_workers
    sim.check_invariants()


def test_a_task_past_its_workers_timeout_fails_timed_out_and_is_stopped() -> None:
    """The scheduler's rule on its tick (processor_links.py rule 5): a task computing alone has its processor killed,
    a parked one is stopped in it. Checked to fail with `LinkSessions._watch` not looking at timeouts."""
    sim, client, worker = one_worker(capacity=2, task_timeout_seconds=2.0)
    link = worker.link
    sim.submit(client, [task(client.peer, 1)])
    sim.advance(1.0)
    assert not client.answers[task(client.peer, 1).task_id]
    sim.advance(1.5)
    assert client.answers[task(client.peer, 1).task_id] == [("result", "timedOut")]
    assert sent_to(sim, worker.peer, m.ProcessorKill) == [m.ProcessorKill(b"p1", "its task timed out")]
    parent = task(client.peer, 2)
    sim.submit(client, [parent])
    sim.send(worker.link, m.ProcessorBlocked(parent.task_id))
    sim.advance(2.5)
    assert client.answers[parent.task_id] == [("result", "timedOut")]
    assert sent_to(sim, worker.link, m.TaskCancel) == [m.TaskCancel((parent.task_id,))], "a parked one stops there"
    assert link not in worker.links
    sim.check_invariants()


def test_a_processor_that_dies_fails_its_computing_task_and_requeues_the_others() -> None:
    sim, client, worker = one_worker(capacity=3)
    link = worker.link
    sim.submit(client, [task(client.peer, n) for n in (1, 2, 3)])
    parked, computing, staged = tasks_on(sim, link)
    sim.send(link, m.ProcessorBlocked(parked))  # the first parks: the second computes
    sim.feed(PeerLost(PeerID(link), "connection closed", sim.now))
    assert client.answers[computing] == [], "its agent is to say why it ended"
    sim.send(worker.peer, m.ProcessorExited(b"p1", "killed by SIGSEGV"))
    assert client.answers[computing] == [("result", "processorDied")], "the picture's computing task is blamed"
    records = sim.core.tasks.records
    assert records[parked].lost_workers and not records[staged].lost_workers, "only the parked one spent a retry"
    sim.check_invariants()


def test_the_task_a_dead_processors_mark_names_is_blamed_and_the_one_before_it_runs_again() -> None:
    """Its result died in the processor's I/O thread: it is not to blame. Checked to fail with `computingTaskKnown`
    ignored (processor_links.py `_blame`): the picture's computing task is blamed."""
    sim, client, worker = one_worker(capacity=3)
    link = worker.link
    sim.submit(client, [task(client.peer, n) for n in (1, 2, 3)])
    ran, crashed, staged = tasks_on(sim, link)
    dies(sim, worker, link, description="exit code 3", computing_task=crashed, computing_task_known=True)
    assert client.answers[crashed] == [("result", "processorDied")]
    assert not client.answers[ran] and not client.answers[staged]
    assert set(tasks_on(sim, worker.links[0])) == {ran, staged}
    records = sim.core.tasks.records
    assert records[ran].lost_workers and not records[staged].lost_workers, "the one that ran spent a retry"
    sim.check_invariants()


def test_a_closed_link_never_explained_ends_its_tasks_after_a_wait() -> None:
    sim, client, worker = one_worker(capacity=2)
    sim.submit(client, [task(client.peer, 1), task(client.peer, 2)])
    computing, staged = tasks_on(sim, worker.link)
    sim.feed(PeerLost(worker.link, "connection closed", sim.now))
    sim.advance(EXIT_WAIT_SECONDS + 1)
    assert client.answers[computing] == [("result", "processorDied")]
    assert sim.core.tasks.records[staged].state.value == "queued", "the other went back to the queue"


def test_a_worker_that_dies_takes_its_tasks_back_to_the_queue() -> None:
    sim, client, worker = one_worker(capacity=2)
    sim.submit(client, [task(client.peer, 1), task(client.peer, 2)])
    other = sim.add_worker("v", capacity=2)
    sim.kill(worker)
    assert len(other.held) == 2 and list(sim.core.processors) == other.links
    sim.check_invariants()


def test_a_parked_task_yields_its_slot_until_it_goes_on() -> None:
    sim, client, worker = one_worker(capacity=1)
    sim.submit(client, [task(client.peer, 1), task(client.peer, 2)])
    (parent,) = tasks_on(sim, worker.link)
    sim.send(worker.link, m.ProcessorBlocked(parent))
    assert len(tasks_on(sim, worker.link)) == 2, "its slot took the next task, in the same processor"
    sim.check_invariants()
    sim.send(worker.link, m.ProcessorResumeRequest(parent))
    assert sim.core.workers[worker.peer].beside == 0
    sim.finish(worker)
    sim.check_invariants()


def test_with_a_processor_per_parent_a_waiting_parent_gets_its_worker_another_processor() -> None:
    """nested_parents "process": the parked parent keeps its processor, its worker is asked for one more
    (ProcessorsWanted), the child goes there; once the parent goes on, an idle processor beyond the slots is killed.
    Checked to fail with `keep_processors` counting no parked link."""
    sim, client, worker = one_worker(capacity=1, processor_per_parent=True)
    first = worker.link
    sim.submit(client, [task(client.peer, 1), task(client.peer, 2)])
    (parent,) = tasks_on(sim, first)
    sim.send(first, m.ProcessorBlocked(parent))
    assert sent_to(sim, worker.peer, m.ProcessorsWanted) == [m.ProcessorsWanted(1)]
    second = worker.links[1]
    assert tasks_on(sim, second) == [task(client.peer, 2).task_id] and tasks_on(sim, first) == [parent]
    sim.finish(worker, task(client.peer, 2).task_id)
    sim.send(first, m.ProcessorResumeRequest(parent))
    assert sent_to(sim, worker.peer, m.ProcessorsWanted)[-1] == m.ProcessorsWanted(0)
    assert sent_to(sim, worker.peer, m.ProcessorKill) == [m.ProcessorKill(b"p2", "not needed any more")]
    sim.check_invariants()


def test_a_processor_still_writing_is_retired_only_once_its_writes_are_done() -> None:
    """Issue 42 and rule 2: a processor beyond the slots that still writes results readers follow is not killed as
    not needed until it says it is done. Checked to fail with `is_idle` ignoring `writing` (killed at once), and with
    `on_writing` not keeping the processors (never retired)."""
    sim, client, worker = one_worker(capacity=1, processor_per_parent=True)
    first = worker.link
    sim.submit(client, [task(client.peer, 1), task(client.peer, 2)])
    (parent,) = tasks_on(sim, first)
    sim.send(first, m.ProcessorBlocked(parent))
    second = worker.links[1]
    sim.send(second, m.ProcessorWriting(True))
    sim.finish(worker, task(client.peer, 2).task_id)
    sim.send(first, m.ProcessorResumeRequest(parent))
    assert not sent_to(sim, worker.peer, m.ProcessorKill), "it still writes: not retired"
    sim.send(second, m.ProcessorWriting(False))
    assert sent_to(sim, worker.peer, m.ProcessorKill) == [m.ProcessorKill(b"p2", "not needed any more")]
    sim.check_invariants()


def test_a_processor_hosting_an_actor_takes_no_other_task_and_its_worker_gets_another() -> None:
    """Its actor holds its computing turn while it lives (link_sessions.py rule 2). Checked to fail with `link.host`
    not called on ActorReady (the next task went to the actor's link)."""
    sim, client, worker = one_worker(capacity=2)
    start = replace(task(client.peer, 1), function_name="Ledger", actor=m.ActorSpec(1, 1, "", b""))
    sim.submit(client, [start])
    assert tasks_on(sim, worker.link) == [start.task_id], "an actor's start goes on a link as any task"
    sim.send(worker.link, m.ActorReady(start.task_id))
    assert sent_to(sim, worker.peer, m.ProcessorsWanted) == [m.ProcessorsWanted(1)]
    sim.submit(client, [task(client.peer, 2)])
    assert tasks_on(sim, worker.link) == [start.task_id]
    assert tasks_on(sim, worker.links[1]) == [task(client.peer, 2).task_id]
    call = replace(task(client.peer, 3), actor_id=start.task_id)
    sim.submit(client, [call])
    assert tasks_on(sim, worker.link) == [start.task_id, call.task_id], "its calls go on its link"
    sim.send(worker.link, success(call.task_id))
    assert client.answers[call.task_id] == [("result", "success")]
    sim.check_invariants()


def test_a_writing_processors_cancelled_task_is_stopped_in_it_not_killed() -> None:
    """Issue 42: a processor still writing results readers follow is never killed for a cancel. Checked to fail with
    `stops_by_kill` ignoring `writing`."""
    sim, client, worker = one_worker()
    sim.submit(client, [task(client.peer, 1)])
    sim.send(worker.link, m.ProcessorWriting(True))
    sim.cancel(client, [task(client.peer, 1).task_id])
    assert sent_to(sim, worker.link, m.TaskCancel) and not sent_to(sim, worker.peer, m.ProcessorKill)


# ---------------------------------------------------------------- taking tasks back


def test_a_task_taken_back_is_asked_on_its_link() -> None:
    """Overtaking, the balancer and a reclaim notice ask through `take_back`: on each task's link; the one computing is
    not given back. Checked to fail with `take_back` sending nothing."""
    sim, client, worker = one_worker(capacity=3)
    sim.submit(client, [task(client.peer, n) for n in (1, 2)])
    computing, staged = tasks_on(sim, worker.link)
    sim.core.lifecycle.take_back(worker.peer, (computing, staged))
    sim.advance(0.0)  # its sends leave with the next step's
    assert sent_to(sim, worker.link, m.TaskReturn)[0] == m.TaskReturn((computing, staged))
    record = sim.core.tasks.records[staged]
    assert record.attempts == 1 and record.link == worker.link, "queued again, no retry spent, sent there again"
    sim.check_invariants()


def test_tasks_staged_behind_a_long_task_are_asked_back_once_and_the_link_gets_no_more() -> None:
    """processor_links.py rule 3. Checked to fail with `behind_long` returning None."""
    sim, client, worker = one_worker(capacity=2)
    link = worker.link
    sim.core.workers[worker.peer].learn(0.0001)  # tiny so far: tasks are staged behind the one computing
    sim.submit(client, [task(client.peer, n) for n in (1, 2, 3)])
    computing, *staged = tasks_on(sim, link)
    sim.advance(0.5)
    assert not sent_to(sim, link, m.TaskReturn), "not before it computed STAGED_WAIT_SECONDS"
    sim.advance(0.75)
    assert sent_to(sim, link, m.TaskReturn) == [m.TaskReturn(tuple(staged))], "the computing one started: not asked"
    sim.effects.clear()
    sim.advance(2.0)
    assert not sent_to(sim, link, m.TaskReturn) and not sent_to(sim, link, m.Task), "asked once; no more sent"
    sim.finish(worker, computing)
    assert tasks_on(sim, link) == staged, "its result ends the long episode"
    sim.check_invariants()


def long_with_tasks_asked_back(stream_credit: int = 0) -> tuple[SimulatedCluster, FakeClient, FakeWorker, m.Task]:
    """A worker of one slot whose tasks are tiny so far; a first task (streaming with `stream_credit`) computes long
    with two tasks staged behind it, which were asked back and given back (they wait in the queue)."""
    sim, client, worker = one_worker(capacity=2)
    sim.core.workers[worker.peer].learn(0.0001)
    first = replace(task(client.peer, 1), stream_credit=stream_credit)
    behind = [task(client.peer, n) for n in (2, 3)]
    sim.submit(client, [first, *behind])
    sim.advance(1.25)
    assert sent_to(sim, worker.link, m.TaskReturn) == [m.TaskReturn(tuple(t.task_id for t in behind))]
    assert worker.held == [first.task_id], "given back unstarted"
    sim.effects.clear()
    return sim, client, worker, first


def test_a_long_task_that_parks_gives_its_link_back_what_it_stages() -> None:
    """processor_links.py rule 3: the link is long while its long task holds the turn; once it parks, the tasks asked
    back from behind it are sent there again, the one computing and the other staged behind it. Checked to fail with
    `long` left set until a result comes on the link (one was sent, the other waited in the queue)."""
    sim, client, worker, parent = long_with_tasks_asked_back()
    sim.send(worker.link, m.ProcessorBlocked(parent.task_id))
    assert tasks_on(sim, worker.link) == [task(client.peer, n).task_id for n in (2, 3)]
    sim.check_invariants()


def test_a_long_streaming_task_cancelled_gives_its_link_back_what_it_stages() -> None:
    """The same once the long task's cancel is answered (a streaming task is stopped in its processor, which confirms).
    Checked to fail with `long` left set (one was sent, the other waited), and with `_end` not reporting the change
    (the same: the worker's credit was not counted again)."""
    sim, client, worker, streaming = long_with_tasks_asked_back(stream_credit=4)
    sim.cancel(client, [streaming.task_id])
    assert sent_to(sim, worker.link, m.TaskCancel) == [m.TaskCancel((streaming.task_id,))]
    assert client.answers[streaming.task_id] == [("cancelled", "canceled")]
    assert tasks_on(sim, worker.link) == [task(client.peer, n).task_id for n in (2, 3)]
    sim.check_invariants()


def test_nothing_is_asked_back_on_a_beat_that_came_while_the_reads_were_behind() -> None:
    """The answers the picture waits for may be unread (events.Tick): a beat behind on the reads asks nothing back,
    the next one caught up does. Checked to fail with the beat's `reads_behind` not passed on (asked at once)."""
    sim, client, worker = one_worker(capacity=2)
    link = worker.link
    sim.core.workers[worker.peer].learn(0.0001)
    sim.submit(client, [task(client.peer, n) for n in (1, 2, 3)])
    _computing, *staged = tasks_on(sim, link)
    sim.time.advance(1.25)
    sim.feed(Tick(sim.now, reads_behind=True))
    assert not sent_to(sim, link, m.TaskReturn)
    sim.advance(0.25)
    assert sent_to(sim, link, m.TaskReturn) == [m.TaskReturn(tuple(staged))]
    sim.check_invariants()


def test_tasks_asked_back_from_behind_long_ones_are_not_staged_behind_the_next_long_one() -> None:
    """Two workers of one slot and four tasks of 2 s: each link takes two, the second staged; both are asked back
    after STAGED_WAIT_SECONDS. The first result's link then takes one of them, not both (its worker's tasks are known
    to compute long), and the other link's result the other. Checked to fail without `WorkerRecord.restage` withholding
    the prefetch of a worker whose tasks compute long."""
    sim = SimulatedCluster()
    client = sim.add_client()
    workers = [sim.add_worker(name, capacity=2) for name in ("a", "b")]
    sim.submit(client, [task(client.peer, n) for n in range(4)])
    sent = [tasks_on(sim, worker.link) for worker in workers]
    assert [len(tasks) for tasks in sent] == [2, 2], "before any result, one staged behind each"
    sim.advance(1.25)
    sim.effects.clear()
    for worker, (computing, _) in zip(workers, sent, strict=True):
        result = replace(success(computing), ran=m.RunStamps(sim.now - 2.0, sim.now))
        worker.held.remove(computing)
        sim.send(worker.where.pop(computing), result)
        assert len(tasks_on(sim, worker.link)) == 1, "one for the freed processor, none staged behind it"
    assert {t for worker in workers for t in tasks_on(sim, worker.link)} == {sent[0][1], sent[1][1]}
    sim.check_invariants()


def test_a_queued_only_cancel_takes_staged_tasks_back_and_cancels_those_given_back() -> None:
    """An Executor's shutdown(cancel_futures=True) cancels what has not started: the staged tasks are asked back and
    cancelled once given back; the one computing runs on. Checked to fail with the cancel leaving dispatched tasks
    alone (CPython's ExecutorShutdownTest.test_cancel_futures then finds too few cancelled)."""
    sim, client, worker = one_worker(capacity=2)
    sim.core.workers[worker.peer].learn(0.0001)
    sim.submit(client, [task(client.peer, n) for n in range(1, 7)])
    computing, *staged = tasks_on(sim, worker.link)
    assert staged, "tasks were staged behind the one computing"
    sim.effects.clear()
    sim.send(client.peer, m.TaskCancel((computing, *staged), True))
    assert sent_to(sim, worker.link, m.TaskReturn) == [m.TaskReturn(tuple(staged))]
    assert not sent_to(sim, worker.link, m.TaskCancel), "nothing is stopped"
    assert all(client.answers[task_id] == [("cancelled", "canceled")] for task_id in staged)
    sim.finish(worker, computing)
    assert client.answers[computing] == [("result", "success")]
    sim.check_invariants()


# ---------------------------------------------------------------- a scheduler restart


def test_results_read_on_a_link_are_named_in_an_echo_on_the_link_after_the_workers_heartbeat() -> None:
    """The processor keeps each result until then, for a restart (link_state.py rule 2). Checked to fail with the
    echo on the link not sent (`LinkSessions.echo`)."""
    sim, client, worker = one_worker(capacity=2)
    sim.submit(client, [task(client.peer, 1), task(client.peer, 2)])
    ids = tuple(tasks_on(sim, worker.link))
    sim.finish(worker)
    sim.finish(worker)
    assert not sent_to(sim, worker.link, m.HeartbeatEcho), "named after the worker's heartbeat, all at once"
    sim.send(worker.peer, m.Heartbeat())
    assert sent_to(sim, worker.link, m.HeartbeatEcho) == [m.HeartbeatEcho(results_read=ids)]
    sim.send(worker.peer, m.Heartbeat())
    assert len(sent_to(sim, worker.link, m.HeartbeatEcho)) == 1, "each named once"


def test_tasks_a_processor_names_in_its_hello_to_a_new_instance_are_adopted_on_its_link() -> None:
    """After a restart the processor's hello names the task it computes and one whose result it kept; the client
    submits both again: neither runs again, and the link's loss fails the adopted one as the computing task. Checked
    to fail with the hello's held tasks ignored (`LinkSessions.register`): both are dispatched again."""
    sim = SimulatedCluster()
    client = sim.add_client()
    peer = PeerID(b"Worker|SIM|w")
    sim.workers[peer] = FakeWorker(peer, 2, started=1)
    sim.send(peer, hello(m.WorkerInfo((), 2, "", "SIM")))
    computing, finished, parked = task(client.peer, 1), task(client.peer, 2), task(client.peer, 3)
    link = PeerID(peer + b"/p1")
    held = (computing.task_id, finished.task_id, parked.task_id)
    sim.send(link, hello(m.ProcessorInfo(b"p1", peer, held_tasks=held, max_staged_tasks=64)))
    sim.send(link, success(finished.task_id))  # sent again once the hello was accepted
    sim.send(link, m.ProcessorBlocked(parked.task_id))
    sim.submit(client, [computing, finished, parked])
    assert not tasks_on(sim, link), "adopted: not run again"
    assert client.answers[finished.task_id] == [("result", "success")]
    assert sim.core.workers[peer].beside == 1, "the parked one yields its slot"
    sim.feed(PeerLost(link, "connection closed", sim.now))
    sim.send(peer, m.ProcessorExited(b"p1", "killed by SIGKILL"))
    assert client.answers[computing.task_id] == [("result", "processorDied")]
    sim.check_invariants()


def test_tasks_named_by_a_processor_that_dies_before_their_client_comes_back_run_again() -> None:
    sim = SimulatedCluster()
    client = sim.add_client()
    peer = PeerID(b"Worker|SIM|w")
    sim.workers[peer] = worker = FakeWorker(peer, 2, started=1)
    sim.send(peer, hello(m.WorkerInfo((), 2, "", "SIM")))
    held = task(client.peer, 1)
    link = PeerID(peer + b"/p1")
    sim.send(link, hello(m.ProcessorInfo(b"p1", peer, held_tasks=(held.task_id,), max_staged_tasks=64)))
    sim.feed(PeerLost(link, "connection closed", sim.now))
    sim.send(peer, m.ProcessorExited(b"p1", "killed by SIGKILL"))
    sim.add_processor(worker)
    sim.submit(client, [held])
    assert tasks_on(sim, worker.link) == [held.task_id], "dispatched as any task"


def test_the_published_status_counts_the_tasks_on_a_workers_links() -> None:
    """The agent's status knows none of them: the scheduler adds one running per link, the rest queued and the parked
    blocked (view.with_link_tasks); fails with it returning the agent's status unchanged."""
    sim, client, worker = one_worker(capacity=3)

    def status() -> tuple[int, int, int]:
        (summary,) = sim.core.view().workers
        return summary.status.running, summary.status.queued, summary.status.blocked

    assert status() == (0, 0, 0)
    sim.submit(client, [task(client.peer, n) for n in range(1, 4)])
    assert status() == (1, 2, 0)
    sim.send(worker.link, m.ProcessorBlocked(tasks_on(sim, worker.link)[0]))
    assert status() == (1, 1, 1)


def test_clients_count_a_worker_once_a_processor_of_it_has_connected() -> None:
    """`workerCount` tells a client how many workers a task can go to now (`ray.init()` waits for its local cluster's
    workers by it). Checked with `ready_worker_count` counting every worker: the first assert fails."""
    sim = SimulatedCluster()
    client = sim.add_client()
    sim.add_worker(capacity=2)
    peer = PeerID(b"Worker|SIM|late")
    sim.workers[peer] = late = FakeWorker(peer, 2)
    sim.send(peer, hello(m.WorkerInfo((), 2, "", "SIM")))

    def told() -> int:
        sim.heartbeat(client)
        return sent_to(sim, client.peer, m.HeartbeatEcho)[-1].worker_count

    assert told() == 1, "the late worker has no processor's link yet"
    sim.add_processor(late)
    assert told() == 2


def test_clients_heartbeats_count_the_workers_once_a_beat(monkeypatch: Any) -> None:
    """Every client's heartbeat echo carries `workerCount`: twenty clients' heartbeats within one beat of the clock
    walk the workers once, not twenty times (fails with the count made for each echo)."""
    sim = SimulatedCluster()
    clients = [sim.add_client(f"c{number}") for number in range(20)]
    for number in range(5):
        sim.add_worker(f"w{number}")
    sim.advance(0.25)
    asked: list[WorkerRecord] = []
    link_for = WorkerRecord.link_for

    def counted(worker: WorkerRecord) -> Any:
        asked.append(worker)
        return link_for(worker)

    monkeypatch.setattr(WorkerRecord, "link_for", counted)
    for client in clients:
        sim.heartbeat(client)
    assert len(asked) == 5
    assert {sent_to(sim, client.peer, m.HeartbeatEcho)[-1].worker_count for client in clients} == {5}


def test_a_worker_that_fills_up_is_counted_out_at_the_next_beat() -> None:
    """A worker's room that changes between beats shows in `workerCount` at the next beat; a worker that comes shows
    at once."""
    sim = SimulatedCluster()
    client = sim.add_client()
    sim.add_worker("a", max_staged=0)

    def told() -> int:
        sim.heartbeat(client)
        return sent_to(sim, client.peer, m.HeartbeatEcho)[-1].worker_count

    assert told() == 1
    sim.submit(client, [task(client.peer, 1)])
    assert told() == 1, "counted at this beat already"
    sim.advance(0.25)
    assert told() == 0, "its one processor computes, with no room to stage"
    sim.add_worker("b", max_staged=0)
    assert told() == 1, "a worker that comes is counted at once"
