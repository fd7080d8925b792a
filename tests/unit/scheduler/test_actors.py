"""Actors in the scheduler core (core/actors.py): calls held until the actor is ready and sent in order on its
processor's link, restarts after a lost worker or processor up to the limit, stop, names, the end of an actor and of
its client."""

from __future__ import annotations

from dataclasses import replace

from scaler.protocol import messages as m
from scaler.protocol.ids import ClientID, PeerID, TaskID
from scaler.scheduler.core.effects import Send
from scaler.scheduler.core.scheduler_core import CoreSettings
from scaler_rehearsal.testing.simulation import PYTHON, FakeClient, FakeWorker, SimulatedCluster, hello, task


def start(sim: SimulatedCluster, client: FakeClient, number: int, max_restarts: int = 1, name: str = "") -> TaskID:
    actor = replace(
        task(client.peer, number), function_name="Pricer", actor=m.ActorSpec(max_restarts, 1, name, b"price")
    )
    sim.submit(client, [actor])
    return actor.task_id


def call(sim: SimulatedCluster, client: FakeClient, actor_id: TaskID, number: int) -> TaskID:
    made = replace(task(client.peer, number), function_name="Pricer.price", actor_id=actor_id)
    sim.submit(client, [made])
    return made.task_id


def ready(sim: SimulatedCluster, actor_id: TaskID) -> PeerID:
    """The actor is built in the processor that runs its start task: ActorReady on its link; the link."""
    link = sim.link_of(actor_id)
    sim.send(link, m.ActorReady(actor_id))
    return link


def sent_on(sim: SimulatedCluster, peer: bytes, kind: type) -> list[m.Message]:
    return [e.message for e in sim.effects if isinstance(e, Send) and e.peer == peer and isinstance(e.message, kind)]


def answered(client: FakeClient, task_id: TaskID) -> list[tuple[str, str]]:
    return client.answers.get(task_id, [])


def test_calls_wait_for_the_actor_then_go_to_its_processor_in_order_and_their_results_to_the_caller() -> None:
    """Checked to fail with calls sent before ActorReady (Actors.call sending at once): they reached no worker."""
    sim = SimulatedCluster()
    client, worker = sim.add_client(), sim.add_worker(capacity=2)
    actor_id = start(sim, client, 1)
    calls = [call(sim, client, actor_id, n) for n in range(10, 15)]
    assert worker.held == [actor_id], "no call before the actor is ready"
    ready(sim, actor_id)
    assert worker.held == [actor_id, *calls]
    for call_id in calls:
        sim.finish(worker, call_id)
    assert all(answered(client, c) == [("result", "success")] for c in calls)
    later = call(sim, client, actor_id, 20)
    assert worker.held == [actor_id, later]  # straight to its processor now
    (summary,) = sim.core.view().actors
    assert (summary.class_name, summary.state, summary.calls, summary.calls_done) == ("Pricer", "running", 1, 5)
    sim.check_invariants()


def test_a_lost_worker_fails_the_calls_at_the_actor_and_builds_it_again_up_to_its_limit() -> None:
    """Checked to fail with Actors.worker_gone doing nothing: the calls at the lost worker were never answered."""
    sim = SimulatedCluster()
    client = sim.add_client()
    first, second = sim.add_worker("a", 2), sim.add_worker("b", 2)
    actor_id = start(sim, client, 1, max_restarts=1)
    home, other = (first, second) if actor_id in first.held else (second, first)
    ready(sim, actor_id)
    at_it = call(sim, client, actor_id, 10)
    sim.kill(home)
    assert answered(client, at_it) == [("result", "actorRestarted")]
    assert other.held == [actor_id], "built again on the other worker"
    waiting = call(sim, client, actor_id, 11)
    assert answered(client, waiting) == [] and other.held == [actor_id]
    ready(sim, actor_id)
    assert other.held == [actor_id, waiting]
    sim.check_invariants()
    sim.kill(other)
    assert answered(client, waiting) == [("result", "actorDied")]
    assert answered(client, actor_id) == [("result", "actorDied")]
    refused = call(sim, client, actor_id, 12)
    assert answered(client, refused) == [("result", "actorDied")]
    reason = [e.message for e in sim.effects if isinstance(e, Send) and getattr(e.message, "task_id", None) == refused]
    assert "restarts are spent" in reason[-1].error_message  # type: ignore[attr-defined]
    assert sim.core.view().actors == ()


def test_a_processor_that_died_under_the_actor_builds_it_again_at_no_retry_cost() -> None:
    sim = SimulatedCluster()
    client, worker = sim.add_client(), sim.add_worker(capacity=2)
    actor_id = start(sim, client, 1, max_restarts=-1)
    for _ in range(6):  # more than the retry budget of a task (3)
        ready(sim, actor_id)
        at_it = call(sim, client, actor_id, 10 + len(client.answers))
        worker.held.remove(at_it)
        sim.finish(worker, actor_id, m.ResultStatus.PROCESSOR_DIED)
        assert answered(client, at_it) == [("result", "actorRestarted")]
        assert worker.held == [actor_id]
    assert answered(client, actor_id) == []
    (summary,) = sim.core.view().actors
    assert summary.restarts == 6 and summary.state == "placing"


def test_stop_goes_after_the_calls_made_before_it_and_refuses_those_after() -> None:
    sim = SimulatedCluster()
    client, worker = sim.add_client(), sim.add_worker(capacity=2)
    actor_id = start(sim, client, 1)
    before = call(sim, client, actor_id, 10)
    sim.send(client.peer, m.ActorStop(actor_id))
    after = call(sim, client, actor_id, 11)
    assert answered(client, after) == [("result", "actorDied")]
    ready(sim, actor_id)
    assert worker.held == [actor_id, before]
    assert sent_on(sim, worker.link, m.ActorStop) == [m.ActorStop(actor_id)]
    sim.finish(worker, before)
    sim.finish(worker, actor_id)  # the actor's start task ends: a success
    assert answered(client, actor_id) == [("result", "success")]
    assert sim.core.view().actors == ()
    sim.check_invariants()


def test_a_name_is_unique_among_live_actors_and_found_by_lookup() -> None:
    sim = SimulatedCluster()
    client, worker = sim.add_client(), sim.add_worker(capacity=3)
    actor_id = start(sim, client, 1, name="pricer")
    taken = start(sim, client, 2, name="pricer")
    assert answered(client, taken) == [("result", "error")]
    sim.send(client.peer, m.ActorLookup("pricer"))
    replies = [e.message for e in sim.effects if isinstance(e, Send) and isinstance(e.message, m.ActorReply)]
    assert replies[-1] == m.ActorReply("pricer", True, actor_id, "Pricer", b"price")
    sim.finish(worker, actor_id, m.ResultStatus.FAILED)  # its constructor raised
    sim.send(client.peer, m.ActorLookup("pricer"))
    replies = [e.message for e in sim.effects if isinstance(e, Send) and isinstance(e.message, m.ActorReply)]
    assert not replies[-1].found
    again = start(sim, client, 3, name="pricer")
    assert answered(client, again) == [] and again in worker.held


def test_an_actor_whose_client_left_ends_and_fails_the_calls_of_other_clients() -> None:
    """Checked to fail with the sweep not answering an ended actor's calls: the other client's call hung."""
    sim = SimulatedCluster()
    starter, other, worker = sim.add_client("a"), sim.add_client("b"), sim.add_worker(capacity=3)
    actor_id = start(sim, starter, 1)
    ready(sim, actor_id)
    theirs = call(sim, other, actor_id, 10)
    sim.send(starter.peer, m.ClientDisconnect(False))
    assert actor_id not in worker.held  # the start task was cancelled at its worker
    assert answered(other, theirs) == [("result", "actorDied")]
    assert sim.core.view().actors == ()
    stale = m.TaskResult(theirs, m.ResultStatus.SUCCESS)
    sim.send(worker.link, stale)  # a late result of a call already answered is dropped
    assert answered(other, theirs) == [("result", "actorDied")]
    assert not sim.core.tasks.owned_by(ClientID(other.peer))


# ---------------------------------------------------------------- its processor's link (rule 6)


def test_an_actors_calls_and_stop_go_on_its_processors_link_and_their_results_come_back_there() -> None:
    """The calls (those that waited, then new ones) and the stop go on the link, in order; their results on the link
    reach their caller; the start task's end on the link ends the actor. Checked to fail with `Actors.ready` not
    taking the link (the calls were sent nowhere)."""
    sim = SimulatedCluster()
    client, worker = sim.add_client(), sim.add_worker(capacity=2)
    actor_id = start(sim, client, 1)
    waited = [call(sim, client, actor_id, n) for n in range(10, 13)]
    link = ready(sim, actor_id)
    later = call(sim, client, actor_id, 13)
    assert [t.task_id for t in sent_on(sim, link, m.Task)] == [actor_id, *waited, later]  # type: ignore[attr-defined]
    for call_id in [*waited, later]:
        sim.finish(worker, call_id)
    assert all(answered(client, c) == [("result", "success")] for c in [*waited, later])
    sim.send(client.peer, m.ActorStop(actor_id))
    assert sent_on(sim, link, m.ActorStop) == [m.ActorStop(actor_id)]
    sim.finish(worker, actor_id)
    assert answered(client, actor_id) == [("result", "success")]
    assert not sim.core.view().actors
    sim.check_invariants()


def test_when_the_actors_processor_dies_its_calls_are_answered_and_it_is_built_again() -> None:
    """The calls at the processor are answered when its death is heard; the rebuilt actor takes its new processor's
    link. Checked to fail with `LinkSessions.drop` not telling the actors (the call at it never answered)."""
    sim = SimulatedCluster()
    client, worker = sim.add_client(), sim.add_worker(capacity=2)
    actor_id = start(sim, client, 1, max_restarts=2)
    link = ready(sim, actor_id)
    at_it = call(sim, client, actor_id, 10)
    sim.processor_died(worker, link)
    assert answered(client, at_it) == [("result", "actorRestarted")]
    assert answered(client, actor_id) == [], "built again"
    relinked = ready(sim, actor_id)
    assert relinked != link
    again = call(sim, client, actor_id, 12)
    assert sent_on(sim, relinked, m.Task)[-1].task_id == again  # type: ignore[attr-defined]
    sim.check_invariants()


def test_an_actor_whose_start_task_is_refused_ends_and_its_calls_say_why() -> None:
    """A start task the lifecycle refuses (the queue is full) never enters the task table: the actors' sweep still
    ends the actor in that step, and a call to it is refused. Checked to fail with `Actors.start` not marking the
    sweep due (the sweep skipped, the call waited for an actor that would never be built)."""
    sim = SimulatedCluster(CoreSettings("tcp://sim:1", "tcp://sim:2", PYTHON, max_tasks_waiting=0))
    client = sim.add_client()
    actor_id = start(sim, client, 1)
    assert answered(client, actor_id) == [("result", "noWorker")]
    refused = call(sim, client, actor_id, 10)
    assert answered(client, refused) == [("result", "actorDied")]
    assert not sim.core.view().actors
    sim.check_invariants()


# ---------------------------------------------------------------- a stopped actor's calls still unanswered (rule 3)


def answer_text(sim: SimulatedCluster, client: FakeClient, task_id: TaskID) -> str:
    sent = [e.message for e in sim.effects if isinstance(e, Send) and e.peer == client.peer]
    return [s for s in sent if isinstance(s, m.TaskResult) and s.task_id == task_id][-1].error_message


def stopped_with_a_call_at_it(sim: SimulatedCluster) -> tuple[FakeClient, FakeWorker, PeerID, TaskID, TaskID]:
    """An actor, a call made, then the stop: both go on the link once the actor is ready; then the start task's end
    comes before the call's result (a result sent again after a restart, say)."""
    client, worker = sim.add_client(), sim.add_worker(capacity=2)
    actor_id = start(sim, client, 1)
    made = call(sim, client, actor_id, 10)
    sim.send(client.peer, m.ActorStop(actor_id))
    link = ready(sim, actor_id)
    assert [type(s) for s in sent_on(sim, link, (m.Task, m.ActorStop))] == [m.Task, m.Task, m.ActorStop]
    sim.finish(worker, actor_id)
    assert answered(client, actor_id) == [("result", "success")]
    return client, worker, link, actor_id, made


def test_a_stopped_actors_end_that_comes_before_a_calls_result_leaves_the_call_its_result() -> None:
    """The call still gets its own result when it comes, the actor ends then, and a call made after the stop is
    refused. Checked to fail with the sweep ending the actor at its start task's end (the call was answered
    ACTOR_DIED "the actor Pricer ended: it was stopped", its real result dropped)."""
    sim = SimulatedCluster()
    client, worker, _, actor_id, made = stopped_with_a_call_at_it(sim)
    assert answered(client, made) == [], "not answered before its result"
    (summary,) = sim.core.view().actors
    assert (summary.state, summary.calls) == ("stopped", 1)
    late = call(sim, client, actor_id, 11)
    assert answered(client, late) == [("result", "actorDied")]
    sim.finish(worker, made)
    assert answered(client, made) == [("result", "success")]
    assert not sim.core.view().actors
    sim.check_invariants()


def test_a_stopped_actors_unanswered_call_ends_actor_died_when_its_link_or_worker_is_lost() -> None:
    """Its processor's link closes, or its worker is lost, before the call's result came: the call ends ACTOR_DIED
    saying so (never "it was stopped", never silence). Checked to fail as the test above."""
    sim = SimulatedCluster()
    client, worker, link, _, made = stopped_with_a_call_at_it(sim)
    sim.processor_died(worker, link)
    assert answered(client, made) == [("result", "actorDied")]
    assert "its processor's link closed" in answer_text(sim, client, made)
    assert not sim.core.view().actors
    sim.check_invariants()

    sim = SimulatedCluster()
    client, worker, _, _, made = stopped_with_a_call_at_it(sim)
    sim.kill(worker)
    assert answered(client, made) == [("result", "actorDied")]
    assert "it was stopped" not in answer_text(sim, client, made)
    assert not sim.core.view().actors


def keyed_client(sim: SimulatedCluster, name: str, key: str) -> FakeClient:
    """A client whose hello came with CURVE key `key` (the shell sets `owner_key`: scheduler/peer_keys.py)."""
    peer = PeerID(b"Client|" + name.encode())
    client = sim.clients[peer] = FakeClient(peer)
    sim.send(peer, hello(m.ClientInfo(name, owner_key=key)))
    return client


def keyed_worker(sim: SimulatedCluster, name: str, key: str) -> FakeWorker:
    peer = PeerID(b"Worker|SIM|" + name.encode())
    worker = sim.workers[peer] = FakeWorker(peer, 2)
    sim.send(peer, hello(m.WorkerInfo((), 2, "", "SIM", owner_key=key)))
    sim.add_processor(worker)
    return worker


def looked_up(sim: SimulatedCluster, client: FakeClient, name: str, from_task: bytes = b"") -> bool:
    sim.send(client.peer, m.ActorLookup(name, from_task))
    replies = [
        e.message
        for e in sim.effects
        if isinstance(e, Send) and e.peer == client.peer and isinstance(e.message, m.ActorReply)
    ]
    return replies[-1].found


def test_a_client_inside_a_task_finds_the_named_actors_of_its_tasks_client_key_and_no_one_elses() -> None:
    """Rule 5: a client inside a task connects with its worker's key; naming the task it comes from, it sees the
    names of that task's client's key, while the task runs at a worker of the key it connected with. Checked to fail
    with `Actors._owner` ignoring `from_task` (the driver's actor was not found from its task)."""
    sim = SimulatedCluster()
    driver, stranger = keyed_client(sim, "driver", "K-driver"), keyed_client(sim, "stranger", "K-stranger")
    worker = keyed_worker(sim, "w", "K-worker")
    actor_id = start(sim, driver, 1, name="pricer")
    ready(sim, actor_id)
    parent = task(driver.peer, 2)
    sim.submit(driver, [parent])
    assert parent.task_id in worker.held
    in_task = keyed_client(sim, "in-task", "K-worker")
    assert looked_up(sim, driver, "pricer")
    assert not looked_up(sim, in_task, "pricer"), "without the task: its own key's names"
    assert looked_up(sim, in_task, "pricer", parent.task_id)
    assert not looked_up(sim, stranger, "pricer", parent.task_id), "another key claiming the task gets its own"
    # started from the task, a name is the driver key's: taken already, and found by the driver once free
    taken = replace(task(in_task.peer, 3), function_name="Pricer",
                    actor=m.ActorSpec(1, 1, "pricer", b"price", parent.task_id))  # fmt: skip
    sim.submit(in_task, [taken])
    assert answered(in_task, taken.task_id) == [("result", "error")]
    made = replace(task(in_task.peer, 4), function_name="Pricer",
                   actor=m.ActorSpec(1, 1, "quoter", b"price", parent.task_id))  # fmt: skip
    sim.submit(in_task, [made])
    assert looked_up(sim, driver, "quoter")
    sim.finish(worker, parent.task_id)
    assert not looked_up(sim, in_task, "pricer", parent.task_id), "the task ended: its client's key no more"
    sim.check_invariants()
