"""Jobs in the scheduler core (core/jobs.py): tasks that outlive their client, followers, retention, owners."""

from __future__ import annotations

from dataclasses import replace

from scaler.protocol import messages as m
from scaler.protocol.ids import ClientID, PeerID, TaskID
from scaler.scheduler.core.effects import DeleteObjects, DeleteOwnerObjects, Send
from scaler.scheduler.core.events import PeerLost
from scaler.scheduler.core.jobs import JobTable
from scaler.scheduler.core.scheduler_core import CoreSettings
from scaler_rehearsal.testing.simulation import PYTHON, FakeClient, SimulatedCluster, hello, task


def replies(sim: SimulatedCluster, peer: bytes) -> list[m.JobReply]:
    return [
        e.message for e in sim.effects if isinstance(e, Send) and e.peer == peer and isinstance(e.message, m.JobReply)
    ]


def open_job(sim: SimulatedCluster, peer: bytes, name: str, numbers: range) -> list[TaskID]:
    tasks = [task(peer, number) for number in numbers]
    sim.send(peer, m.JobOpen(name, tuple(t.task_id for t in tasks)))
    for item in tasks:
        sim.send(peer, item)
    return [t.task_id for t in tasks]


def cluster(retention: float = 60.0) -> SimulatedCluster:
    return SimulatedCluster(CoreSettings("tcp://sim:1", "tcp://sim:2", PYTHON, result_retention_seconds=retention))


def test_a_jobs_tasks_run_on_after_their_client_is_gone_and_a_new_client_gets_every_answer_in_order() -> None:
    """Checked by letting `TaskLifecycle.client_gone` cancel job tasks too: the tasks are cancelled, no answers."""
    sim = cluster()
    submitter, worker = sim.add_client("a"), sim.add_worker(capacity=10)
    task_ids = open_job(sim, submitter.peer, "nightly", range(1, 6))
    assert replies(sim, submitter.peer)[-1].accepted
    sim.finish(worker, task_ids[1])
    sim.feed(PeerLost(submitter.peer, "killed", sim.now))
    assert sorted(worker.held) == sorted(set(task_ids) - {task_ids[1]}), "nothing was cancelled"
    for task_id in list(worker.held):
        sim.finish(worker, task_id)
    follower = sim.add_client("b")
    sim.send(follower.peer, m.JobAttach("nightly", follow=True))
    reply = replies(sim, follower.peer)[-1]
    assert reply.accepted and reply.task_ids == tuple(task_ids) and reply.state == "done"
    assert list(follower.answers) == task_ids and all(a == [("result", "success")] for a in follower.answers.values())
    assert sum(1 for e in sim.effects if isinstance(e, Send) and isinstance(e.message, m.Task)) == 5, "none ran twice"


def test_a_follower_gets_answers_as_they_come_and_can_cancel_the_job() -> None:
    sim = cluster()
    submitter, worker = sim.add_client("a"), sim.add_worker(capacity=1)
    task_ids = open_job(sim, submitter.peer, "j", range(1, 4))
    sim.feed(PeerLost(submitter.peer, "gone", sim.now))
    follower = sim.add_client("b")
    sim.send(follower.peer, m.JobAttach("j", follow=True))
    sim.finish(worker)
    assert follower.answers[task_ids[0]] == [("result", "success")]
    sim.cancel(follower, task_ids[1:])
    assert follower.answers[task_ids[2]] == [("cancelled", "canceled")]
    assert sim.core.jobs.jobs["j"].state in ("running", "cancelled")


def test_a_taken_name_and_an_unknown_name_are_refused_naming_them() -> None:
    sim = cluster()
    a = sim.add_client("a")
    open_job(sim, a.peer, "nightly", range(1, 3))
    open_job(sim, a.peer, "nightly", range(3, 5))
    refusal = replies(sim, a.peer)[-1]
    assert not refusal.accepted and "'nightly' is taken" in refusal.reason
    sim.send(a.peer, m.JobAttach("weekly"))
    assert "no job named 'weekly'" in replies(sim, a.peer)[-1].reason


def test_a_job_expires_after_the_retention_and_its_submitters_objects_go_then() -> None:
    """Checked by removing `job_requests.expire()` from the tick: the job stays and no DeleteOwnerObjects is issued."""
    sim = cluster(retention=30)
    submitter, worker = sim.add_client("a"), sim.add_worker(capacity=5)
    open_job(sim, submitter.peer, "j", range(1, 3))
    sim.feed(PeerLost(submitter.peer, "gone", sim.now))
    assert not [e for e in sim.effects if isinstance(e, DeleteOwnerObjects)], "its tasks still need its objects"
    sim.finish(worker)
    sim.finish(worker)
    sim.advance(29)
    assert "j" in sim.core.jobs.jobs
    sim.advance(2)
    assert [e.owner for e in sim.effects if isinstance(e, DeleteOwnerObjects)] == [ClientID(submitter.peer)]
    later = sim.add_client("b")
    sim.send(later.peer, m.JobAttach("j"))
    assert "job 'j' expired" in replies(sim, later.peer)[-1].reason


def test_with_keys_another_key_cannot_attach() -> None:
    """The owner comes from the hello's `owner_key`, which only the shell sets (peer_keys.py)."""
    sim = cluster()
    for name, key in (("a", "alice"), ("b", "bob"), ("c", "alice")):
        peer = PeerID(b"Client|" + name.encode())
        sim.clients[peer] = FakeClient(peer)
        sim.send(peer, hello(replace(m.ClientInfo(name), owner_key=key)))
    open_job(sim, b"Client|a", "mine", range(1, 2))
    sim.send(b"Client|b", m.JobAttach("mine"))
    assert "belongs to another key" in replies(sim, b"Client|b")[-1].reason
    sim.send(b"Client|c", m.JobAttach("mine"))
    assert replies(sim, b"Client|c")[-1].accepted


def test_the_table_refuses_a_task_in_two_jobs() -> None:
    table = JobTable(1.0)
    one = TaskID(b"1" * 16)
    assert table.open("x", "", ClientID(b"c"), (one,)) is None
    assert "another job" in (table.open("y", "", ClientID(b"c"), (one,)) or "")
    assert table.open("z", "", ClientID(b"c"), ()) == "job 'z' has no tasks"


def test_tasks_of_a_job_that_never_arrived_count_as_cancelled_when_the_submitter_goes_so_the_job_ends() -> None:
    """A submitter killed between JobOpen and its tasks: without `never_sent` the job would run for ever."""
    sim = cluster(retention=10)
    submitter, worker = sim.add_client("a"), sim.add_worker()
    first, second = task(submitter.peer, 1), task(submitter.peer, 2)
    sim.send(submitter.peer, m.JobOpen("half", (first.task_id, second.task_id)))
    sim.send(submitter.peer, first)
    sim.feed(PeerLost(submitter.peer, "killed", sim.now))
    sim.finish(worker)
    job = sim.core.jobs.jobs["half"]
    assert job.state == "cancelled" and isinstance(job.answers[second.task_id], m.TaskCancelConfirm)
    sim.advance(11)
    assert "half" not in sim.core.jobs.jobs


def test_the_view_lists_the_jobs_with_their_progress_and_whether_the_submitter_is_there() -> None:
    sim = cluster()
    submitter, worker = sim.add_client("a"), sim.add_worker()
    open_job(sim, submitter.peer, "nightly", range(1, 4))
    sim.finish(worker)
    sim.feed(PeerLost(submitter.peer, "gone", sim.now))
    assert sim.core.view().jobs == (m.JobSummary("nightly", "running", 1, 3, False, submitter="a"),)


def test_the_view_lists_each_job_with_its_failures_submitter_and_age() -> None:
    """What the monitor feed carries of a job (scaler_top and the dashboard show it). Checked by switching it off:
    with `JobTable.answered` not counting failures, `failed` stays 0 and the test fails."""
    sim = cluster()
    submitter, worker = sim.add_client("risk-desk"), sim.add_worker(capacity=10)
    task_ids = open_job(sim, submitter.peer, "nightly", range(1, 5))
    sim.advance(42.0)
    sim.finish(worker, task_ids[0])
    sim.finish(worker, task_ids[1], m.ResultStatus.FAILED)
    sim.feed(PeerLost(submitter.peer, "gone", sim.now))
    (job,) = sim.core.view().jobs
    assert (job.name, job.state, job.done, job.total, job.failed) == ("nightly", "running", 2, 4, 1)
    assert job.submitter == "risk-desk" and not job.submitter_connected and job.owner_key == ""
    assert job.age_seconds >= 42.0


def stored(task_id: TaskID, size: int) -> m.TaskResult:
    """A result over the inline limit: in object storage, `size` bytes."""
    return m.TaskResult(task_id, m.ResultStatus.SUCCESS, m.PayloadKind.OBJECT_ID, b"obj-" + task_id, stored_bytes=size)


def test_results_over_the_storage_quota_are_refused_naming_it_and_their_objects_deleted() -> None:
    """--job-result-quota-bytes 100: a 60-byte result is kept, the next would pass 100 and is refused with an error
    naming the quota, its object deleted; once the job expires its bytes are given back. Checked by switching it
    off (JobStorage.admit admitting everything): the second result reached the follower as a success."""
    sim = SimulatedCluster(
        CoreSettings("tcp://sim:1", "tcp://sim:2", PYTHON, result_retention_seconds=30, job_result_quota_bytes=100)
    )
    submitter, worker = sim.add_client("a"), sim.add_worker(capacity=5)
    first, second = open_job(sim, submitter.peer, "big", range(1, 3))
    for task_id, size in ((first, 60), (second, 60)):
        worker.held.remove(task_id)
        sim.send(worker.link, stored(task_id, size))
    assert submitter.answers[first] == [("result", "success")]
    (refusal,) = [
        e.message
        for e in sim.effects
        if isinstance(e, Send) and isinstance(e.message, m.TaskResult) and e.message.task_id == second
    ]
    assert refusal.status is m.ResultStatus.ERROR and submitter.answers[second] == [("result", "error")]
    assert "storage quota" in refusal.error_message and "100 bytes" in refusal.error_message
    assert [e.object_ids for e in sim.effects if isinstance(e, DeleteObjects)] == [(b"obj-" + second,)]
    assert sim.core.jobs.storage.held == {f"client:{submitter.peer.hex()}": 60}
    sim.advance(31)  # the job expires: its 60 bytes are given back
    assert sim.core.jobs.storage.held == {}


def test_a_keys_own_storage_quota_replaces_the_schedulers() -> None:
    table = JobTable(60.0, result_quota_bytes=10)
    one, two = TaskID(b"\x01" * 16), TaskID(b"\x02" * 16)
    assert table.open("mine", "alice", ClientID(b"c"), (one, two), key_quota_bytes=1000) is None
    admitted, _ = table.answered(one, stored(one, 500), 1.0)
    assert admitted.answer.status is m.ResultStatus.SUCCESS  # over the scheduler's 10, within the key's 1,000
    admitted, _ = table.answered(two, stored(two, 600), 2.0)
    assert admitted.deleted == b"obj-" + two and "1,000 bytes" in admitted.answer.error_message
    assert table.jobs["mine"].failed == 1
