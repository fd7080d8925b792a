"""The scheduler core and lent processors (docs/architecture.md, "Lent processors"): a processor whose hello says
`lent` takes its worker's plain tasks on its own link, and each stays an ordinary DISPATCHED record at its worker, so
that a result, a cancel, the processor's death, its worker's death and a task given back end it as they would at the
agent.

Checked with the mechanism off, by hand: with `_lent_link` returning None (every task to the agent), the routing,
cancel, death and parking tests fail; with `_lent_link_gone` not called from `drop_processor`, the death test fails
(the tasks stay dispatched to a gone link); with `on_lent_parked` not counting the parked task, the parking test fails
(the second task is not dispatched)."""

from __future__ import annotations

from dataclasses import replace

from scaler.protocol import messages as m
from scaler.protocol.ids import PeerID
from scaler.scheduler.core.effects import Send
from scaler.scheduler.core.events import PeerLost
from scaler.scheduler.core.worker_sessions import LENT_EXIT_WAIT_SECONDS
from scaler.testing.simulation import FakeWorker, SimulatedCluster, hello, success, task


def sent_to(sim: SimulatedCluster, peer: bytes, kind: type) -> list:  # type: ignore[type-arg]
    return [e.message for e in sim.effects if isinstance(e, Send) and e.peer == peer and isinstance(e.message, kind)]


def lend(sim: SimulatedCluster, worker: FakeWorker, processor: bytes = b"p1", lent: bool = True) -> bytes:
    """A processor of `worker` says hello on its own link, lent (or not); its identity."""
    peer = worker.peer + b"/" + processor
    sim.send(peer, hello(m.ProcessorInfo(processor, worker.peer, lent)))
    (reply,) = sent_to(sim, peer, m.HelloReply)
    assert reply.accepted
    return peer


def test_plain_tasks_go_on_a_lent_link_and_its_results_end_them() -> None:
    sim = SimulatedCluster()
    client = sim.add_client()
    worker = sim.add_worker(capacity=3)
    link = lend(sim, worker)
    streaming = task(client.peer, 3)
    sim.submit(client, [task(client.peer, 1), task(client.peer, 2), replace(streaming, stream_credit=4)])
    on_link = [t.task_id for t in sent_to(sim, link, m.Task)]
    assert len(on_link) == 2, "plain tasks take the lent processor's link"
    assert worker.held == [streaming.task_id], "a streaming task goes to the agent"
    assert sim.core.workers[worker.peer].assigned == {*on_link, streaming.task_id}, "all of them held at the worker"
    sim.check_invariants()
    for task_id in on_link:
        sim.send(link, success(task_id))
        assert client.answers[task_id] == [("result", "success")]
    assert not sim.core.processors[PeerID(link)].tasks
    sim.check_invariants()


def test_without_lending_the_tasks_go_to_the_agent() -> None:
    sim = SimulatedCluster()
    client = sim.add_client()
    worker = sim.add_worker(capacity=2)
    link = lend(sim, worker, lent=False)
    sim.submit(client, [task(client.peer, 1), task(client.peer, 2)])
    assert not sent_to(sim, link, m.Task) and len(worker.held) == 2


def test_tasks_spread_over_the_lent_links_of_a_worker() -> None:
    sim = SimulatedCluster()
    client = sim.add_client()
    worker = sim.add_worker(capacity=4)
    first, second = lend(sim, worker, b"p1"), lend(sim, worker, b"p2")
    sim.submit(client, [task(client.peer, n) for n in range(4)])
    assert len(sent_to(sim, first, m.Task)) == 2 and len(sent_to(sim, second, m.Task)) == 2


def test_a_cancel_of_a_lent_task_goes_on_its_link() -> None:
    sim = SimulatedCluster()
    client = sim.add_client()
    worker = sim.add_worker()
    link = lend(sim, worker)
    sim.submit(client, [task(client.peer, 1)])
    (sent,) = sent_to(sim, link, m.Task)
    sim.cancel(client, [sent.task_id])
    assert sent_to(sim, link, m.TaskCancel) == [m.TaskCancel((sent.task_id,))]
    assert not sent_to(sim, worker.peer, m.TaskCancel)
    sim.send(link, m.TaskCancelConfirm(sent.task_id, m.CancelOutcome.CANCELED))
    assert client.answers[sent.task_id] == [("cancelled", "canceled")]
    sim.check_invariants()


def test_a_lent_processor_that_leaves_on_purpose_blames_nothing_on_its_way() -> None:
    """It ends for a cancelled task (as its agent would have killed it): the tasks sent to it and not read go back."""
    sim = SimulatedCluster()
    client = sim.add_client()
    worker = sim.add_worker(capacity=3)
    link = lend(sim, worker)
    sim.submit(client, [task(client.peer, n) for n in (1, 2, 3)])
    cancelled, returned, on_its_way = (t.task_id for t in sent_to(sim, link, m.Task))
    sim.cancel(client, [cancelled])
    sim.send(worker.peer, m.ProcessorExited(b"p1", "exit code 0"))  # its agent's word may come before its last words
    sim.send(link, m.WorkerLeaving("ends"))
    assert sent_to(sim, link, m.Shutdown), "acknowledged: it exits once it reads this"
    sim.send(link, m.TaskReturn((returned,)))
    sim.send(link, m.TaskCancelConfirm(cancelled, m.CancelOutcome.CANCELED))
    sim.feed(PeerLost(PeerID(link), "connection closed", sim.now))
    assert client.answers[cancelled] == [("cancelled", "canceled")]
    assert not sent_to(sim, worker.peer, m.Task), "the worker lends no processor now: its agent gets no task"
    assert not client.answers[on_its_way]
    lend(sim, worker, b"p2")
    assert {t.task_id for t in sent_to(sim, worker.peer + b"/p2", m.Task)} == {returned, on_its_way}
    sim.check_invariants()


def test_a_lent_processor_that_dies_fails_its_computing_task_and_requeues_the_others() -> None:
    sim = SimulatedCluster()
    client = sim.add_client()
    worker = sim.add_worker(capacity=3)
    link = lend(sim, worker)
    sim.submit(client, [task(client.peer, n) for n in (1, 2, 3)])
    computing, parked, staged = (t.task_id for t in sent_to(sim, link, m.Task))
    sim.send(link, m.ProcessorBlocked(computing))  # the first parks: the second computes
    sim.feed(PeerLost(PeerID(link), "connection closed", sim.now))
    assert client.answers[parked] == [], "its agent is to say why it ended"
    sim.send(worker.peer, m.ProcessorExited(b"p1", "killed by SIGSEGV"))
    assert client.answers[parked] == [("result", "processorDied")], "the oldest one not parked was computing"
    records = sim.core.tasks.records
    assert not worker.held, "queued again, not to the agent: the worker lends no processor until its next one says so"
    lend(sim, worker, b"p2")
    assert {t.task_id for t in sent_to(sim, worker.peer + b"/p2", m.Task)} == {computing, staged}
    assert records[computing].attempts == 2 and records[staged].attempts == 1, "dispatched again, one retry spent"
    assert records[computing].lost_workers and not records[staged].lost_workers, "only the parked one spent a retry"
    assert sim.core.workers[worker.peer].lent_parked == 0
    sim.check_invariants()


def test_a_lent_link_closed_and_never_explained_ends_its_tasks_after_a_wait() -> None:
    sim = SimulatedCluster()
    client = sim.add_client()
    worker = sim.add_worker(capacity=2)
    link = lend(sim, worker)
    sim.submit(client, [task(client.peer, 1), task(client.peer, 2)])
    computing, staged = (t.task_id for t in sent_to(sim, link, m.Task))
    sim.feed(PeerLost(PeerID(link), "connection closed", sim.now))
    sim.advance(LENT_EXIT_WAIT_SECONDS + 1)
    assert client.answers[computing] == [("result", "processorDied")]
    assert sim.core.tasks.records[staged].state.value == "queued", "the other went back to the queue"
    sim.check_invariants()


def test_a_worker_that_dies_takes_its_lent_tasks_back_to_the_queue() -> None:
    sim = SimulatedCluster()
    client = sim.add_client()
    worker = sim.add_worker(capacity=2)
    lend(sim, worker)
    sim.submit(client, [task(client.peer, 1), task(client.peer, 2)])
    other = sim.add_worker("v", capacity=2)
    sim.kill(worker)
    assert len(other.held) == 2 and not sim.core.processors
    sim.check_invariants()


def test_a_parked_lent_task_yields_its_slot_until_it_goes_on() -> None:
    sim = SimulatedCluster()
    client = sim.add_client()
    worker = sim.add_worker(capacity=1)
    link = lend(sim, worker)
    sim.submit(client, [task(client.peer, 1), task(client.peer, 2)])
    (parent,) = sent_to(sim, link, m.Task)
    sim.send(link, m.ProcessorBlocked(parent.task_id))
    assert len(sent_to(sim, link, m.Task)) == 2, "its slot took the next task"
    sim.check_invariants()
    sim.send(link, m.ProcessorResumeRequest(parent.task_id))
    assert sim.core.workers[worker.peer].lent_parked == 0
    sim.send(link, success(parent.task_id))
    sim.check_invariants()


def test_tasks_a_lent_processor_gives_back_are_queued_again_and_it_is_lent_no_more() -> None:
    sim = SimulatedCluster()
    client = sim.add_client()
    worker = sim.add_worker(capacity=2)
    link = lend(sim, worker)
    sim.submit(client, [task(client.peer, 1)])
    (sent,) = sent_to(sim, link, m.Task)
    sim.send(link, m.TaskReturn((sent.task_id,)))
    lend(sim, worker, b"p2")
    assert [t.task_id for t in sent_to(sim, worker.peer + b"/p2", m.Task)] == [sent.task_id], "to its other processor"
    assert sim.core.tasks.records[sent.task_id].attempts == 1, "no retry spent"
    sim.check_invariants()


def test_a_lent_processor_that_builds_an_actor_is_lent_no_more() -> None:
    """Its actor holds its computing turn while it lives. Checked to fail with `WorkerSessions.hosts_actor` doing
    nothing (the next task went to the actor's link)."""
    sim = SimulatedCluster()
    client = sim.add_client()
    worker = sim.add_worker(capacity=2)
    link = lend(sim, worker)
    start = replace(task(client.peer, 1), function_name="Ledger", actor=m.ActorSpec(1, 1, "", b""))
    sim.submit(client, [start])
    assert worker.held == [start.task_id], "an actor's start goes to the agent"
    sim.send(worker.peer, m.ActorReady(start.task_id, link))
    sim.submit(client, [task(client.peer, 2)])
    lend(sim, worker, b"p2")
    assert not sent_to(sim, link, m.Task) and sent_to(sim, worker.peer + b"/p2", m.Task) == [task(client.peer, 2)]
    sim.check_invariants()


def test_a_worker_that_says_it_lends_gets_no_task_before_its_first_lent_link() -> None:
    """Its agent would place the task on a processor that then runs lent tasks beside it. Checked to fail with
    `Registration` not reading `WorkerInfo.lends_processors` (the task went to the agent)."""
    sim = SimulatedCluster()
    client = sim.add_client()
    peer = PeerID(b"Worker|SIM|w")
    worker = sim.workers[peer] = FakeWorker(peer, 2)
    sim.send(peer, hello(m.WorkerInfo((), 2, "", "SIM", (), True)))
    sim.submit(client, [task(client.peer, 1)])
    assert not worker.held
    link = lend(sim, worker)
    assert [t.task_id for t in sent_to(sim, link, m.Task)] == [task(client.peer, 1).task_id]
    sim.check_invariants()


# ---------------------------------------------------------------- a scheduler restart


def test_results_read_on_a_lent_link_are_named_in_an_echo_on_the_link_after_the_workers_heartbeat() -> None:
    """The processor keeps each lent result until then, for a restart (outlet.py). Checked to fail with the echo on the
    link not sent (`on_heartbeat`)."""
    sim = SimulatedCluster()
    client = sim.add_client()
    worker = sim.add_worker(capacity=2)
    link = lend(sim, worker)
    sim.submit(client, [task(client.peer, 1), task(client.peer, 2)])
    ids = tuple(t.task_id for t in sent_to(sim, link, m.Task))
    for task_id in ids:
        sim.send(link, success(task_id))
    assert not sent_to(sim, link, m.HeartbeatEcho), "named after the worker's heartbeat, all at once"
    sim.send(worker.peer, m.Heartbeat())
    assert sent_to(sim, link, m.HeartbeatEcho) == [m.HeartbeatEcho(results_read=ids)]
    (echo,) = sent_to(sim, worker.peer, m.HeartbeatEcho)
    assert echo.results_read == (), "not the agent's: its journal never had them"
    sim.send(worker.peer, m.Heartbeat())
    assert len(sent_to(sim, link, m.HeartbeatEcho)) == 1, "each named once"


def test_lent_tasks_a_processor_names_in_its_hello_to_a_new_instance_are_adopted_on_its_link() -> None:
    """A new instance (after a restart): the lent processor's hello names the task it computes and one whose result
    it kept; the client submits both again: neither runs again (the kept result is answered at once, the other is
    adopted on the link, and the link's loss fails it as the computing task). Checked to fail with the hello's held
    tasks ignored (`_register_processor`): both are dispatched again."""
    sim = SimulatedCluster()
    client = sim.add_client()
    worker = sim.add_worker(capacity=2)
    computing, finished = task(client.peer, 1), task(client.peer, 2)
    peer = worker.peer + b"/p1"
    held = (computing.task_id, finished.task_id)
    sim.send(peer, hello(m.ProcessorInfo(b"p1", worker.peer, True, held)))
    sim.send(peer, success(finished.task_id))  # sent again once the hello was accepted
    sim.submit(client, [computing, finished])
    assert not sent_to(sim, peer, m.Task) and not worker.held, "adopted: not run again"
    assert client.answers[finished.task_id] == [("result", "success")]
    assert not client.answers[computing.task_id]
    assert sim.core.tasks.records[computing.task_id].link == peer
    sim.feed(PeerLost(PeerID(peer), "connection closed", sim.now))
    sim.send(worker.peer, m.ProcessorExited(b"p1", "killed by SIGKILL"))
    assert client.answers[computing.task_id] == [("result", "processorDied")]
    sim.check_invariants()


def test_lent_tasks_named_by_a_processor_that_dies_before_their_client_comes_back_run_again() -> None:
    sim = SimulatedCluster()
    client = sim.add_client()
    worker = sim.add_worker(capacity=2)
    held = task(client.peer, 1)
    peer = worker.peer + b"/p1"
    sim.send(peer, hello(m.ProcessorInfo(b"p1", worker.peer, True, (held.task_id,))))
    sim.feed(PeerLost(PeerID(peer), "connection closed", sim.now))
    sim.send(worker.peer, m.ProcessorExited(b"p1", "killed by SIGKILL"))
    lend(sim, worker, b"p2")
    sim.submit(client, [held])
    assert [t.task_id for t in sent_to(sim, worker.peer + b"/p2", m.Task)] == [held.task_id]
    sim.check_invariants()


def test_the_task_a_dead_lent_processor_s_mark_names_is_blamed_and_the_one_before_it_runs_again() -> None:
    """Its result died in the processor's I/O thread: it is not to blame. Checked to fail with `lentTaskKnown`
    ignored (`_lent_link_gone`): the oldest one is blamed."""
    sim = SimulatedCluster()
    client = sim.add_client()
    worker = sim.add_worker(capacity=3)
    link = lend(sim, worker)
    sim.submit(client, [task(client.peer, n) for n in (1, 2, 3)])
    lost, crashed, staged = (t.task_id for t in sent_to(sim, link, m.Task))
    sim.feed(PeerLost(PeerID(link), "connection closed", sim.now))
    sim.send(worker.peer, m.ProcessorExited(b"p1", "exit code 3", computing_task=crashed, computing_task_known=True))
    assert client.answers[crashed] == [("result", "processorDied")]
    assert not client.answers[lost] and not client.answers[staged]
    lend(sim, worker, b"p2")
    assert {t.task_id for t in sent_to(sim, worker.peer + b"/p2", m.Task)} == {lost, staged}
    records = sim.core.tasks.records
    assert records[lost].lost_workers and not records[staged].lost_workers, "the one that ran spent a retry"
    sim.check_invariants()


def test_a_lent_processor_whose_mark_names_none_blames_none() -> None:
    """It died between two tasks (killed from outside): both run again, the first (it may have run) with a retry
    spent."""
    sim = SimulatedCluster()
    client = sim.add_client()
    worker = sim.add_worker(capacity=2)
    link = lend(sim, worker)
    sim.submit(client, [task(client.peer, 1), task(client.peer, 2)])
    ids = {t.task_id for t in sent_to(sim, link, m.Task)}
    sim.feed(PeerLost(PeerID(link), "connection closed", sim.now))
    sim.send(worker.peer, m.ProcessorExited(b"p1", "killed by SIGKILL", computing_task_known=True))
    assert not any(client.answers[t] for t in ids)
    lend(sim, worker, b"p2")
    assert {t.task_id for t in sent_to(sim, worker.peer + b"/p2", m.Task)} == ids
    first, second = (t.task_id for t in sent_to(sim, link, m.Task))
    records = sim.core.tasks.records
    assert records[first].lost_workers and not records[second].lost_workers
    sim.check_invariants()


def test_a_parked_lent_task_named_after_a_restart_yields_its_slot_once_adopted() -> None:
    """The processor says again, after its hello, which held task waits on nested futures; adopted, it frees its slot
    for its children. Checked to fail with `held_parked` not kept (`on_lent_parked`): the child is not dispatched."""
    sim = SimulatedCluster()
    client = sim.add_client()
    worker = sim.add_worker(capacity=1)
    parent, child = task(client.peer, 1), task(client.peer, 2)
    peer = worker.peer + b"/p1"
    sim.send(peer, hello(m.ProcessorInfo(b"p1", worker.peer, True, (parent.task_id,))))
    sim.send(peer, m.ProcessorBlocked(parent.task_id))
    sim.submit(client, [parent])
    assert sim.core.workers[worker.peer].lent_parked == 1
    sim.submit(client, [child])
    assert [t.task_id for t in sent_to(sim, peer, m.Task)] == [child.task_id], "the child runs beside its parent"
    sim.send(peer, success(child.task_id))
    sim.send(peer, m.ProcessorResumeRequest(parent.task_id))
    assert sim.core.workers[worker.peer].lent_parked == 0
    sim.check_invariants()


def test_a_lent_task_taken_back_is_asked_on_its_link_and_the_link_stays_lent() -> None:
    """A reclaim notice's drain asks every task back: the lent ones on their link, never to the agent; what the
    processor gives back is queued again (no retry spent) and the link is still lent. Checked to fail with
    `TaskLifecycle.take_back` sending every TaskReturn to the agent."""
    sim = SimulatedCluster()
    client = sim.add_client()
    worker = sim.add_worker(capacity=3)
    link = lend(sim, worker)
    sim.submit(client, [task(client.peer, n) for n in (1, 2)])
    computing, staged = (t.task_id for t in sent_to(sim, link, m.Task))
    sim.core.lifecycle.take_back(worker.peer, (computing, staged))  # as overtaking, the balancer, a drain ask
    sim.advance(0.0)  # its sends leave with the next step's
    assert sent_to(sim, link, m.TaskReturn) == [m.TaskReturn((computing, staged))]
    assert not sent_to(sim, worker.peer, m.TaskReturn)
    sim.send(link, m.TaskReturn((staged,)))  # the computing one started: not given back
    record = sim.core.tasks.records[staged]
    assert record.attempts == 1 and record.link == link, "queued again, no retry spent, and sent on the link again"
    assert sim.core.processors[PeerID(link)] in sim.core.workers[worker.peer].lent_links
    sim.check_invariants()


def test_tasks_staged_behind_a_long_lent_task_are_asked_back_once_and_the_link_gets_no_more() -> None:
    """The agent's rule 7 for lent links, on a worker of one slot (its agent announces one task more) whose lent tasks
    were tiny so far. Checked to fail with `WorkerSessions.withdraw_behind_long` doing nothing."""
    sim = SimulatedCluster()
    client = sim.add_client()
    worker = sim.add_worker(capacity=2)
    link = lend(sim, worker)
    sim.core.workers[worker.peer].learn_lent(0.0001)  # up to MAX_LENT_STAGED staged per lent processor
    sim.submit(client, [task(client.peer, n) for n in (1, 2, 3)])
    computing, *staged = (t.task_id for t in sent_to(sim, link, m.Task))
    sim.advance(0.5)
    assert not sent_to(sim, link, m.TaskReturn), "not before it computed STAGED_WAIT_SECONDS"
    sim.advance(0.75)
    assert sent_to(sim, link, m.TaskReturn) == [m.TaskReturn(tuple(staged))], "the computing one started: not asked"
    sim.effects.clear()
    sim.send(link, m.TaskReturn(tuple(staged)))
    assert not sent_to(sim, link, m.Task), "nothing more goes to a link that computes long"
    sim.advance(2.0)
    assert not sent_to(sim, link, m.TaskReturn), "asked once"
    sim.send(link, success(computing))
    assert [t.task_id for t in sent_to(sim, link, m.Task)] == staged, "its result ends the long episode"
    sim.check_invariants()


def test_the_published_status_counts_a_lent_links_tasks_as_its_workers() -> None:
    """The agent's status knows none of them (the FakeWorker reports zeros): the scheduler adds one running, the rest
    queued and the parked blocked (view.with_lent_tasks); fails with it returning the agent's status unchanged."""
    sim = SimulatedCluster()
    client = sim.add_client()
    worker = sim.add_worker(capacity=3)
    link = lend(sim, worker)

    def status() -> m.WorkerStatus:
        (summary,) = sim.core.view().workers
        return summary.status

    assert (status().running, status().queued, status().blocked) == (0, 0, 0)
    sim.submit(client, [task(client.peer, n) for n in range(1, 4)])
    first, *_ = sent_to(sim, link, m.Task)
    assert (status().running, status().queued, status().blocked) == (1, 2, 0)
    sim.send(link, m.ProcessorBlocked(first.task_id))
    assert (status().running, status().queued, status().blocked) == (1, 1, 1)
    for sent in sent_to(sim, link, m.Task):
        sim.send(link, success(sent.task_id))
    assert (status().running, status().queued, status().blocked) == (0, 0, 0)


def test_tasks_asked_back_from_behind_long_ones_are_not_staged_behind_the_next_long_one() -> None:
    """Two workers of one slot each, lending, and four tasks that compute 2 s (the partitioned client's test,
    tests/integration/test_partitioned_peers.py): each link takes two, the second staged; both are asked back after
    STAGED_WAIT_SECONDS. When the first result comes, its link takes one of them, not both: its worker's lent tasks
    are known to compute long, so nothing is staged behind the next one (rule 7 would only ask it back again a second
    later, while the other worker sat idle: the fourth task started 1 s late and the run took 5 s, not 4). The other
    link's result then takes the other one. Checked to fail without `WorkerRecord.restage` withholding the staged
    task of a worker whose lent tasks compute long (both asked-back tasks went to the first link's worker)."""
    sim = SimulatedCluster()
    client = sim.add_client()
    workers = [sim.add_worker(name, capacity=2) for name in ("a", "b")]
    links = [lend(sim, worker) for worker in workers]
    sim.submit(client, [task(client.peer, n) for n in range(4)])
    sent = [[t.task_id for t in sent_to(sim, link, m.Task)] for link in links]
    assert [len(tasks) for tasks in sent] == [2, 2], "before any result, one staged behind each"
    sim.advance(1.25)
    for link, (_, staged) in zip(links, sent, strict=True):
        sim.send(link, m.TaskReturn((staged,)))
    sim.effects.clear()
    first, second = sent  # (computing, staged) on each link
    sim.send(links[0], replace(success(first[0]), ran=m.RunStamps(sim.now - 2.0, sim.now)))
    assert len(sent_to(sim, links[0], m.Task)) == 1, "one for the freed processor, none staged behind it"
    sim.send(links[1], replace(success(second[0]), ran=m.RunStamps(sim.now - 2.0, sim.now)))
    assert len(sent_to(sim, links[1], m.Task)) == 1, "the other one runs on the other worker at once"
    assert {t.task_id for link in links for t in sent_to(sim, link, m.Task)} == {first[1], second[1]}
    sim.check_invariants()


def test_a_processor_freed_beside_two_that_compute_long_takes_a_task() -> None:
    """A worker of three slots (its agent announces one task more) whose lent tasks were tiny, then long: all three
    links compute long, what was staged behind them is asked back, and the third one's result frees it. It takes a
    task at once, though two links still compute long. Checked to fail with `WorkerRecord.restage` taking one task off
    per long link (as it did): the worker was offered nothing and its free processor sat idle."""
    sim = SimulatedCluster()
    client = sim.add_client()
    worker = sim.add_worker(capacity=4)
    links = [lend(sim, worker, name) for name in (b"p1", b"p2", b"p3")]
    sim.core.workers[worker.peer].learn_lent(0.0001)  # up to MAX_LENT_STAGED staged per lent processor
    sim.submit(client, [task(client.peer, n) for n in range(9)])
    sent = [[t.task_id for t in sent_to(sim, link, m.Task)] for link in links]
    assert [len(tasks) for tasks in sent] == [3, 3, 3]
    sim.advance(1.25)
    for link, (_, *staged) in zip(links, sent, strict=True):
        sim.send(link, m.TaskReturn(tuple(staged)))
    sim.effects.clear()
    sim.send(links[2], replace(success(sent[2][0]), ran=m.RunStamps(sim.now - 1.25, sim.now)))
    assert len(sent_to(sim, links[2], m.Task)) == 1, "the freed processor takes one (none staged: they compute long)"
    assert not sent_to(sim, links[0], m.Task) and not sent_to(sim, links[1], m.Task)
    sim.check_invariants()


def test_a_queued_only_cancel_takes_staged_lent_tasks_back_and_cancels_those_given_back() -> None:
    """An Executor's shutdown(cancel_futures=True) cancels what has not started. A lending worker's processors hold
    tiny tasks staged behind the one they compute: the cancel asks them back (TaskReturn on the link), the processor
    gives back those it did not start, and they are cancelled, not queued again. The one it computes (or starts next:
    it may not have read it yet) is not asked, as a task a free worker took runs on, unanswered by the cancel. Checked
    to fail with the cancel leaving dispatched lent tasks alone (as before: CPython's ExecutorShutdownTest
    .test_cancel_futures found 14 of its 50 tasks cancelled, where it wants more than 20)"""
    sim = SimulatedCluster()
    client = sim.add_client()
    worker = sim.add_worker(capacity=2)
    link = lend(sim, worker)
    sim.core.workers[worker.peer].learn_lent(0.0001)  # tiny so far: tasks are staged behind the one computing
    sim.submit(client, [task(client.peer, n) for n in range(1, 7)])
    computing, *staged = (t.task_id for t in sent_to(sim, link, m.Task))
    assert staged, "tasks were staged behind the one computing"
    sim.effects.clear()
    sim.send(client.peer, m.TaskCancel((computing, *staged), True))
    assert sent_to(sim, link, m.TaskReturn) == [m.TaskReturn(tuple(staged))], "the first one runs, as it would alone"
    assert not sent_to(sim, link, m.TaskCancel), "nothing is stopped"
    sim.send(link, m.TaskReturn(tuple(staged)))
    assert all(client.answers[task_id] == [("cancelled", "canceled")] for task_id in staged)
    assert not sent_to(sim, link, m.Task), "what was given back is not sent again"
    sim.send(link, success(computing))
    assert client.answers[computing] == [("result", "success")]
    sim.check_invariants()


def test_clients_count_a_lending_worker_once_a_processor_of_it_has_connected() -> None:
    """`workerCount` tells a client how many workers a task can go to now: `ray.init()` waits for its local cluster's
    workers by it, and a worker that lends its processors takes no task before one of their links has connected (the
    first tasks then went to the first worker's processor, one behind the other, while the second's was starting).

    Checked with the mechanism off, by hand: counting `len(core.workers)` again, the first two asserts fail."""
    sim = SimulatedCluster()
    client = sim.add_client()
    sim.add_worker(capacity=2)  # a worker whose agent takes the tasks
    peer = PeerID(b"Worker|SIM|lending")
    sim.send(peer, hello(m.WorkerInfo((), 2, "", "SIM", lends_processors=True)))

    def told() -> int:
        sim.heartbeat(client)
        return sent_to(sim, client.peer, m.HeartbeatEcho)[-1].worker_count

    assert told() == 1, "the lending worker has no processor's link yet"
    late = sim.add_client("late")
    assert sent_to(sim, late.peer, m.HelloReply)[-1].worker_count == 1, "a client's hello is answered the same way"
    lend(sim, FakeWorker(peer, 2))
    assert told() == 2
