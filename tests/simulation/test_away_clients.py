"""Clients that go away and come back (#42 goal 1), in the real scheduler core on a fake clock (the simulated cluster):
a client silent past its timeout, or whose connection is lost, is away: its tasks run on and their answers wait for
it, in memory and then in object storage; it gets every answer once when it comes back, and nothing runs twice.
Past its resume window (the clock jumps past it) its work is cancelled and its objects deleted, and it is told so
when it comes back.

Checked with the mechanism off: each test that a client's work survives its absence also runs with the scheduler's
window at 0 (`client_resume_seconds=0`, as before windows: the client is dropped at its timeout) and fails there as
its `off` case asserts; the resume test was checked by hand with `AnswerLog.resume` returning no answers (the answers
lost with the connection never arrive, and the wait for them fails).
"""

from __future__ import annotations

import logging
import math
from collections import Counter

import pytest

from scaler.protocol import messages as m
from scaler.protocol.ids import ObjectID, PeerID, TaskID
from scaler.scheduler.core.effects import DeleteObjects, DeleteOwnerObjects, LoadAnswers, Send, StoreAnswers
from scaler.scheduler.core.events import AnswersLoaded, AnswersStored, PeerLost
from scaler.scheduler.core.scheduler_core import CoreSettings
from scaler_rehearsal.testing.simulation import PYTHON, FakeClient, FakeWorker, SimulatedCluster, hello, task

TIMEOUT = 60.0
WINDOW = 1800.0


def cluster(window: float = WINDOW, held_bytes: int = 1 << 20) -> SimulatedCluster:
    settings = CoreSettings(
        "tcp://sim:1", "tcp://sim:2", PYTHON, client_timeout_seconds=TIMEOUT, client_resume_seconds=window,
        held_answers_memory_bytes=held_bytes, instance_id=b"instance",
    )  # fmt: skip
    return SimulatedCluster(settings)


def stopped_at(sim: SimulatedCluster, worker: FakeWorker) -> bool:
    """Whether the scheduler stopped a task at the worker: a TaskCancel on a processor's link, or its processor killed
    (a task computing alone)."""
    return any(
        isinstance(e.message, (m.TaskCancel, m.ProcessorKill)) and e.peer.startswith(worker.peer)
        for e in sim.effects_of(Send)
    )


def dispatches(sim: SimulatedCluster) -> Counter[TaskID]:
    """How often each task was sent to a worker (a task that runs twice is dispatched twice)."""
    return Counter(e.message.task_id for e in sim.effects if isinstance(e, Send) and isinstance(e.message, m.Task))


def asleep(sim: SimulatedCluster, client: FakeClient, seconds: float, step: float = 5.0) -> None:
    """The clock moves on `seconds` while the client says nothing (a laptop asleep, its process stopped) and the
    workers heartbeat."""
    for _ in range(math.ceil(seconds / step)):
        for worker in sim.workers.values():
            if worker.alive:
                sim.send(worker.peer, m.Heartbeat())
        sim.advance(step)


def lose_connection(sim: SimulatedCluster, client: FakeClient) -> None:
    """The client falls silent, and its connection is lost 20 s later (a laptop asleep, its link cut)."""
    asleep(sim, client, 20)
    sim.feed(PeerLost(client.peer, "connection closed", sim.now))
    assert sim.core.clients[client.peer].is_away


@pytest.mark.parametrize("window", [WINDOW, 0.0], ids=["resume", "off"])
def test_a_client_asleep_past_its_timeout_finds_its_work_done_when_it_wakes(window: float) -> None:
    """Four tasks on two workers; the client sleeps 10 minutes (past the 60 s timeout, within the window): it is
    away, not dropped; its tasks run on, their results wait; awake, it gets each result once, and nothing ran
    twice. `off` (no window): it is dropped at its timeout and its tasks are cancelled."""
    sim = cluster(window)
    client = sim.add_client()
    workers = [sim.add_worker(name, capacity=2, slots=2, max_staged=0) for name in ("w1", "w2")]
    sim.submit(client, [task(client.peer, n) for n in range(4)])
    client.online = False  # asleep: what is sent to it now waits in its socket (it reads nothing)
    asleep(sim, client, 61)
    if window == 0:
        assert client.peer not in sim.core.clients, "without a window the silent client is dropped"
        assert not sim.core.tasks.records, "and its tasks are cancelled"
        return
    (summary,) = sim.core.view().clients
    assert summary.away_seconds > TIMEOUT and summary.resume_seconds == WINDOW, "the status shows it away"
    for worker in workers:  # its tasks run on while it sleeps
        while worker.held:
            sim.finish(worker)
    asleep(sim, client, 600)
    assert client.peer in sim.core.clients
    assert sim.core.clients[client.peer].answers.waiting_count == 4, "the results wait for it"
    client.online = True
    sim.heartbeat(client)  # awake: its first word brings it back
    assert client.answers == {TaskID(n.to_bytes(16, "big")): [("result", "success")] for n in range(4)}
    assert set(dispatches(sim).values()) == {1}, "a task ran twice"
    assert sim.core.view().clients[0].away_seconds == 0
    sim.heartbeat(client)
    assert not sim.core.clients[client.peer].answers.sent, "acknowledged answers are forgotten"


def test_past_the_window_its_work_is_cancelled_its_objects_deleted_and_it_is_told_when_it_comes_back() -> None:
    sim = cluster(window=300)
    client, worker = sim.add_client(), sim.add_worker()
    sim.submit(client, [task(client.peer, 1), task(client.peer, 2)])
    client.online = False
    asleep(sim, client, 295)
    assert client.peer in sim.core.clients and not sim.effects_of(DeleteOwnerObjects)
    sim.advance(10)  # past 300 s of silence
    assert client.peer not in sim.core.clients
    assert stopped_at(sim, worker)
    assert [e.owner for e in sim.effects_of(DeleteOwnerObjects)] == [client.peer]
    client.online = True
    late = task(client.peer, 3)
    client.answers[late.task_id] = []
    sim.send(client.peer, late)  # submitted as it woke: refused, the scheduler does not know it any more
    reason = client.errors[0]
    assert "resume window of 300 s" in reason and "2 unfinished task(s) were cancelled" in reason
    assert client.peer not in sim.core.clients
    sim.send(client.peer, hello(m.ClientInfo("c")))  # its link registers again, then asks what became of its work
    sim.resume(client)
    (resumed,) = [e.message for e in sim.effects_of(Send) if isinstance(e.message, m.ClientResumed)]
    assert set(resumed.cancelled) == {task(client.peer, 1).task_id, task(client.peer, 2).task_id}
    assert resumed.unknown == (late.task_id,), "what it sent after the drop never ran: it sends it again"
    sim.heartbeat(client)
    assert not client.errors[1:], "the expired record is gone once it registered again"


def test_the_clients_own_wish_shortens_the_window() -> None:
    sim = cluster(window=WINDOW)
    client = sim.add_client(resume_seconds=90)
    (reply,) = [e.message for e in sim.effects_of(Send) if isinstance(e.message, m.HelloReply)]
    assert reply.resume_seconds == 90
    longer = sim.add_client("longer", resume_seconds=10 * WINDOW)
    assert sim.core.clients[longer.peer].resume_seconds == WINDOW, "a wish longer than the scheduler's is capped"
    sim.heartbeat(longer)
    asleep(sim, client, 85)
    assert client.peer in sim.core.clients
    asleep(sim, client, 10)
    assert client.peer not in sim.core.clients


@pytest.mark.parametrize("window", [WINDOW, 0.0], ids=["resume", "off"])
def test_a_client_whose_connection_is_lost_gets_what_was_lost_with_it_once_it_resumes(window: float) -> None:
    """Two results are sent into a connection that dies unread (the scheduler has not noticed yet), then the
    connection is lost: the client is away, two more results are held. It reconnects and resumes with the count it
    received: the two lost ones are sent again, the two held ones too, and the task it sent into the dead
    connection is named unknown (it sends it again). `off`: the lost connection drops the client."""
    sim = cluster(window)
    client, worker = sim.add_client(), sim.add_worker("w", capacity=4)
    client.dedupe = True
    sim.submit(client, [task(client.peer, n) for n in range(4)])
    sim.finish(worker)
    sim.heartbeat(client)  # acknowledges the first answer
    client.online = False  # the connection dies: what is sent now is lost
    sim.finish(worker)
    sim.finish(worker)
    asleep(sim, client, 20)  # the client is silent until its connection times out
    sim.feed(PeerLost(client.peer, "connection closed", sim.now))
    if window == 0:
        assert client.peer not in sim.core.clients
        return
    sim.finish(worker)  # held: the client is away
    never = task(client.peer, 9)
    client.answers[never.task_id] = []  # sent into the dead connection: the scheduler never had it
    client.online = True
    sim.resume(client)
    assert client.unknown == (never.task_id,)
    sim.submit(client, [never])
    sim.finish(worker)
    sim.heartbeat(client)
    assert all(answers == [("result", "success")] for answers in client.answers.values())
    assert len(client.answers) == 5 and client.duplicates == 0
    assert set(dispatches(sim).values()) == {1}
    assert not sim.core.clients[client.peer].answers.sent, "the new epoch's count acknowledges everything"


def test_a_resume_in_a_stale_epoch_sends_the_whole_log_again() -> None:
    """The client lost the ClientResumed too (a second loss before it arrived): its next resume names the old
    epoch, and everything of the current one goes again."""
    sim = cluster()
    client, worker = sim.add_client(), sim.add_worker("w", capacity=2)
    client.dedupe = True
    sim.submit(client, [task(client.peer, 1), task(client.peer, 2)])
    client.online = False
    sim.finish(worker)
    sim.resume(client)  # the resumed answer and what follows are lost as well
    sim.finish(worker)
    client.online = True
    sim.resume(client)
    assert sorted(len(a) for a in client.answers.values()) == [1, 1] and client.answers_epoch == 2


def perform_storage(sim: SimulatedCluster, effects: list[object], stored: dict[ObjectID, tuple[object, ...]]) -> None:
    """What the scheduler's shell does with a bundle's effects, against an object store that is a dict."""
    pending = list(effects)
    while pending:
        effect = pending.pop(0)
        if isinstance(effect, StoreAnswers):
            stored[effect.object_id] = effect.answers
            pending += sim.feed(AnswersStored(effect.client, effect.object_id, True, sim.now))
        elif isinstance(effect, LoadAnswers):
            answers = stored[effect.object_id]
            pending += sim.feed(AnswersLoaded(effect.client, effect.object_id, answers, sim.now))  # type: ignore[arg-type]
        elif isinstance(effect, DeleteObjects):
            for object_id in effect.object_ids:
                stored.pop(object_id, None)


def test_answers_held_past_the_memory_budget_wait_in_object_storage_and_arrive_in_order() -> None:
    """With a budget of 2 KB, 30 results of 200 bytes wait in bundles in object storage (the scheduler keeps only
    their ids); back, the client gets all 30 once, and the bundles are deleted."""
    sim = cluster(held_bytes=2000)
    client, worker = sim.add_client(), sim.add_worker("w", capacity=30, slots=30, max_staged=0)
    sim.submit(client, [task(client.peer, n) for n in range(30)])
    lose_connection(sim, client)
    stored: dict[ObjectID, tuple[object, ...]] = {}
    for _ in range(30):
        chosen = worker.held.pop(0)
        result = m.TaskResult(chosen, m.ResultStatus.SUCCESS, m.PayloadKind.INLINE, b"x" * 200)
        perform_storage(sim, sim.send(worker.where.pop(chosen), result), stored)
    log = sim.core.clients[client.peer].answers
    assert stored and log.held_bytes < 2000 and len(log.held) < 30, "the held answers went to storage"
    assert all(bundle.answers is None for bundle in log.bundles), "a written bundle leaves memory"
    effects = sim.heartbeat(client)  # back
    perform_storage(sim, effects, stored)
    assert len(client.answers) == 30 and all(a == [("result", "success")] for a in client.answers.values())
    assert not stored, "the bundles are deleted once sent"
    assert not log.bundles and not log.held


def test_a_bundle_that_could_not_be_written_stays_in_memory() -> None:
    sim = cluster(held_bytes=500)
    client, worker = sim.add_client(), sim.add_worker("w", capacity=4, slots=4, max_staged=0)
    sim.submit(client, [task(client.peer, n) for n in range(4)])
    lose_connection(sim, client)
    writes: list[StoreAnswers] = []
    for _ in range(4):
        chosen = worker.held.pop(0)
        result = m.TaskResult(chosen, m.ResultStatus.SUCCESS, m.PayloadKind.INLINE, b"x" * 400)
        writes += [e for e in sim.send(worker.where.pop(chosen), result) if isinstance(e, StoreAnswers)]
        for write in writes:
            sim.feed(AnswersStored(write.client, write.object_id, False, sim.now))
        writes.clear()
    log = sim.core.clients[client.peer].answers
    assert not log.may_spill and len(log.held) == 4 and not log.bundles
    sim.heartbeat(client)
    assert len(client.answers) == 4 and all(a == [("result", "success")] for a in client.answers.values())


def test_a_client_whose_connection_closes_while_it_talks_ended_and_is_dropped_unless_it_speaks_again() -> None:
    """A process killed closes its connection at once (its kernel does): nobody comes back for that work, and it is
    dropped 5 s later. A connection replaced looks the same (or messages read late by a scheduler that was paused
    itself): a client that speaks again within the 5 s keeps its work. Checked with the grace off (dropped at once):
    the second half fails (the task is cancelled)."""
    sim = cluster()
    client, worker = sim.add_client(), sim.add_worker()
    sim.submit(client, [task(client.peer, 1)])
    sim.advance(1)
    sim.feed(PeerLost(client.peer, "connection closed", sim.now))
    assert sim.core.clients[client.peer].is_away
    sim.advance(3)
    sim.heartbeat(client)  # its new connection
    sim.advance(10)
    assert client.peer in sim.core.clients and not sim.core.clients[client.peer].is_away
    assert sim.core.tasks.records, "its task goes on"
    sim.heartbeat(client)
    sim.feed(PeerLost(client.peer, "connection closed", sim.now))
    sim.advance(6)
    assert client.peer not in sim.core.clients
    assert stopped_at(sim, worker)


def test_a_connection_found_closed_after_the_scheduler_was_paused_keeps_its_client_away_not_dropped() -> None:
    """A scheduler stopped for 30 s (SIGSTOP, its machine asleep): its clients' ZeroMQ heartbeats end their
    connections meanwhile, and once it runs again it reads their last messages late, then the connections closed,
    which looks like clients that ended while talking. Those clients are away with their whole window, not dropped
    5 s later (a client may take longer than that to connect again). A crash once the pause is over is judged as
    before. Checked with the pause rule off (`ClientSessions.paused` doing nothing): the client is dropped 5 s
    after the pause and the first assertion after it fails."""
    sim = cluster()
    client, worker = sim.add_client(), sim.add_worker()
    sim.submit(client, [task(client.peer, 1)])
    sim.advance(1)
    sim.time.advance(30)  # the scheduler is stopped: nothing is read
    sim.heartbeat(client)  # read late: sent before its connection closed
    sim.feed(PeerLost(client.peer, "connection closed", sim.now))
    assert sim.core.clients[client.peer].is_away
    for _ in range(4):
        sim.send(worker.peer, m.Heartbeat())
        sim.advance(3)
    assert client.peer in sim.core.clients, "a client whose connection a pause closed is not taken for ended"
    assert sim.core.tasks.records, "its task goes on"
    sim.heartbeat(client)  # it connected again
    assert not sim.core.clients[client.peer].is_away
    sim.advance(1)
    sim.heartbeat(client)
    sim.feed(PeerLost(client.peer, "connection closed", sim.now))  # long after the pause: its process ended
    sim.advance(6)
    assert client.peer not in sim.core.clients


def test_a_client_that_leaves_nothing_unfinished_without_a_goodbye_is_not_warned_about(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A client made inside a task ends with its processor, its connection closed without a ClientDisconnect: with
    nothing unfinished its going away is no warning (a clean run logs nothing); a client whose connection closes
    while its work runs is still warned about and kept as rule 2 says. Checked by switching it off (the away log a
    warning whatever is unfinished): the first assertion fails."""
    sim = cluster()
    idle, busy = sim.add_client("idle"), sim.add_client("busy")
    sim.add_worker()
    sim.submit(busy, [task(busy.peer, 1)])
    sim.advance(1)
    with caplog.at_level(logging.INFO, logger="scaler.scheduler.core.client_sessions"):
        sim.feed(PeerLost(idle.peer, "connection closed", sim.now))
        assert sim.core.clients[idle.peer].is_away
        assert not [r for r in caplog.records if r.levelno >= logging.WARNING], "an idle client's end is no news"
        sim.feed(PeerLost(busy.peer, "connection closed", sim.now))
        assert sim.core.clients[busy.peer].is_away
        warned = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
        assert len(warned) == 1 and "1 unfinished task(s)" in warned[0], warned


def test_the_warning_about_a_client_whose_connection_closed_while_it_talked_gives_its_grace_not_its_window(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Found walking docs/guide/failures.md ("your client process dies: ... 5 s later the scheduler cancels its
    tasks"): the scheduler's log said "its work is cancelled if it stays silent for 1800 s", then, 5 s later, that
    it was cancelled. The warning gives the 5 s that apply; a client silent past its timeout keeps its window in
    it. Checked with `lost` no longer passing the grace to `away`: the first assertion fails (1800 s)."""
    sim = cluster()
    ended, asleep_client = sim.add_client("ended"), sim.add_client("asleep")
    sim.add_worker()
    sim.submit(ended, [task(ended.peer, 1)])
    sim.submit(asleep_client, [task(asleep_client.peer, 2)])
    sim.advance(1)
    with caplog.at_level(logging.INFO, logger="scaler.scheduler.core.client_sessions"):
        sim.feed(PeerLost(ended.peer, "connection closed", sim.now))
        (warned,) = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
        assert "its work is cancelled unless it speaks again within 5 s" in warned, warned
        caplog.clear()
        asleep_client.online = False
        asleep(sim, asleep_client, TIMEOUT + 1)
        warned = [
            r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING and "is away" in r.getMessage()
        ]
        assert len(warned) == 1 and f"cancelled if it stays silent for {WINDOW:g} s" in warned[0], warned


def test_a_peer_lost_for_good_is_dropped_whatever_its_window() -> None:
    sim = cluster()
    client = sim.add_client()
    sim.feed(PeerLost(client.peer, "its CURVE key was revoked", sim.now, final=True))
    assert client.peer not in sim.core.clients


def test_output_is_not_sent_to_an_away_client() -> None:
    sim = cluster()
    client, worker = sim.add_client(), sim.add_worker()
    sim.submit(client, [task(client.peer, 1)])
    lose_connection(sim, client)
    effects = sim.send(worker.peer, m.TaskLog(TaskID((1).to_bytes(16, "big")), m.LogStream.STDOUT, "hi\n"))
    assert not [e for e in effects if isinstance(e, Send) and e.peer == client.peer]


def test_a_hello_again_from_an_away_client_brings_it_back_with_its_work() -> None:
    sim = cluster()
    client, worker = sim.add_client(), sim.add_worker()
    sim.submit(client, [task(client.peer, 1)])
    lose_connection(sim, client)
    sim.finish(worker)
    sim.send(client.peer, hello(m.ClientInfo("c")))
    assert client.answers[TaskID((1).to_bytes(16, "big"))] == [("result", "success")]


def test_a_task_sent_again_while_its_answer_waits_is_not_run_twice() -> None:
    sim = cluster()
    client, worker = sim.add_client(), sim.add_worker()
    client.dedupe = True
    first = task(client.peer, 1)
    sim.submit(client, [first])
    sim.finish(worker)
    sim.send(client.peer, first)  # a copy that crossed the answer
    assert dispatches(sim)[first.task_id] == 1
    assert PeerID(client.peer) in sim.core.clients


def test_a_jobs_tasks_keep_the_jobs_rules_when_their_submitter_stays_away_past_its_window() -> None:
    """Jobs keep their own rules (sharing.md, "Jobs"): the submitter's plain task is cancelled past its window, its
    job's tasks run on and a follower gets their answers; back, the submitter is told only the plain task was
    cancelled. Checked with `TaskLifecycle.client_gone` cancelling job tasks too: the job's tasks are cancelled."""
    sim = cluster(window=300)
    client, worker = sim.add_client(), sim.add_worker(capacity=10)
    jobbed = [task(client.peer, number) for number in (1, 2)]
    sim.send(client.peer, m.JobOpen("nightly", tuple(t.task_id for t in jobbed)))
    plain = task(client.peer, 3)
    sim.submit(client, [*jobbed, plain])
    client.online = False
    asleep(sim, client, 310)
    assert client.peer not in sim.core.clients
    cancels = [i for e in sim.effects_of(Send) if isinstance(e.message, m.TaskCancel) for i in e.message.task_ids]
    assert cancels == [plain.task_id], "only its plain task is cancelled"
    for job_task in jobbed:
        sim.finish(worker, job_task.task_id)
    follower = sim.add_client("follower")
    sim.send(follower.peer, m.JobAttach("nightly", follow=True))
    assert list(follower.answers) == [t.task_id for t in jobbed]
    assert all(a == [("result", "success")] for a in follower.answers.values())
    client.online = True
    sim.send(client.peer, hello(m.ClientInfo("c")))
    sim.resume(client)
    (resumed,) = [e.message for e in sim.effects_of(Send) if isinstance(e.message, m.ClientResumed)]
    assert resumed.cancelled == (plain.task_id,)
