"""Each task's story in the scheduler core: transitions with causes, waits and their reasons, retries, balancing,
the processor's reported times, and the bounds on what is kept (per task, finished tasks by count and by age)."""

from __future__ import annotations

import gc
from dataclasses import replace

from scaler.policy.content import Allocation
from scaler.protocol import messages as m
from scaler.protocol.ids import TaskID
from scaler.scheduler.core.scheduler_core import CoreSettings
from scaler.scheduler.core.story_book import ENTRIES_PER_TASK, SPANS_PER_KEY, StoryBook
from scaler.scheduler.core.task_state import TaskState
from scaler_rehearsal.testing.simulation import PYTHON, SimulatedCluster, success, task


def tid(number: int) -> TaskID:
    return TaskID(number.to_bytes(16, "big"))


def story_of(sim: SimulatedCluster, peer: bytes, number: int) -> m.TaskStoryReply:
    """Asked the way a client asks: a TaskStoryRequest, answered with a TaskStoryReply to that client."""
    effects = sim.send(peer, m.TaskStoryRequest(tid(number)))
    (reply,) = [e.message for e in effects if isinstance(getattr(e, "message", None), m.TaskStoryReply)]
    assert isinstance(reply, m.TaskStoryReply)
    return reply


def whats(reply: m.TaskStoryReply) -> list[str]:
    return [entry.what for entry in reply.entries]


def test_a_normal_task_tells_queued_dispatched_and_its_end_with_causes_in_time_order() -> None:
    sim = SimulatedCluster()
    client = sim.add_client()
    sim.submit(client, [task(client.peer, 1)])
    sim.advance(0.5)
    worker = sim.add_worker()
    sim.advance(0.5)
    sim.finish(worker)
    reply = story_of(sim, client.peer, 1)
    assert reply.known and whats(reply) == ["queued", "waiting", "dispatched", "success"]
    assert "submitted by client" in reply.entries[0].cause
    assert reply.entries[1].cause == "no worker is connected"
    assert reply.entries[2].cause == "dispatch attempt 1" and "SIM" in reply.entries[2].where
    assert "result success" in reply.entries[3].cause
    times = [entry.wall_time for entry in reply.entries]
    assert times == sorted(times) and times[0] < times[2] < times[3]


def test_a_task_that_waits_for_a_capability_has_the_reason_in_its_story() -> None:
    """Checked with `_note_waits` switched off: no waiting entry, the test fails."""
    sim = SimulatedCluster(CoreSettings("s", "o", PYTHON, allocate=Allocation.CAPABILITY))
    client = sim.add_client()
    sim.add_worker("plain")
    sim.submit(client, [task(client.peer, 1, capabilities=(("gpu", 1),))])
    sim.advance(1.5)
    sim.advance(1.5)
    gpu = sim.add_worker("gpu", capabilities=(("gpu", -1),))
    sim.finish(gpu)
    reply = story_of(sim, client.peer, 1)
    assert whats(reply) == ["queued", "waiting", "dispatched", "success"]
    assert "no connected worker has the capabilities gpu" in reply.entries[1].cause
    assert "gpu" in reply.entries[2].where


def test_a_retry_names_the_lost_worker_and_why() -> None:
    sim = SimulatedCluster()
    client = sim.add_client()
    a = sim.add_worker("a")
    sim.submit(client, [task(client.peer, 1)])
    b = sim.add_worker("b")
    sim.kill(a)
    sim.finish(b)
    reply = story_of(sim, client.peer, 1)
    assert whats(reply) == ["queued", "dispatched", "queued", "dispatched", "success"]
    retry = reply.entries[2].cause
    assert retry.startswith("retry 1 of 3") and "killed" in retry and "a" in reply.entries[1].where
    assert reply.entries[3].cause == "dispatch attempt 2"


def test_a_balancing_move_is_told() -> None:
    sim = SimulatedCluster(CoreSettings("s", "o", PYTHON, load_balance_seconds=1, load_balance_trigger_times=1))
    client = sim.add_client()
    a = sim.add_worker("a", capacity=10)
    sim.submit(client, [task(client.peer, n) for n in range(1, 7)])
    sim.add_worker("b", capacity=10)
    sim.advance(1.1)
    asked = [e.message for e in sim.effects if isinstance(getattr(e, "message", None), m.TaskReturn)]
    assert asked, "the balancer asked for nothing: the scenario does not exercise balancing"
    moved = asked[-1].task_ids[0]
    sim.send(a.link, m.TaskReturn((moved,)))
    reply = story_of(sim, client.peer, int.from_bytes(moved, "big"))
    assert "balancing" in whats(reply)
    returned = reply.entries[whats(reply).index("balancing") + 1]
    assert returned.what == "queued" and "gave it back unstarted" in returned.cause and "no retry" in returned.cause


def test_the_processors_times_reported_with_a_result_join_the_story() -> None:
    sim = SimulatedCluster()
    client = sim.add_client()
    worker = sim.add_worker()
    sim.advance(1.0)  # the core's wall offset stays 0 here: wall times are the simulated times
    sim.submit(client, [task(client.peer, 1)])
    worker.held.clear()
    sim.advance(1.0)
    sim.send(worker.link, replace(success(tid(1)), ran=m.RunStamps(1.25, 1.75, 4242, 1.125)))
    reply = story_of(sim, client.peer, 1)
    assert [(e.component, e.what) for e in reply.entries] == [
        ("scheduler", "queued"),
        ("scheduler", "dispatched"),
        ("processor", "received on its link"),
        ("processor", "started"),
        ("processor", "finished (success)"),
        ("scheduler", "success"),
    ]
    assert "pid 4242" in reply.entries[2].where and reply.entries[2].cause == "dispatch attempt 1"
    assert "SIM|w" in reply.entries[2].where


def test_a_task_the_scheduler_forgot_is_answered_with_a_reason_not_an_empty_story() -> None:
    sim = SimulatedCluster(CoreSettings("s", "o", PYTHON, story_retention_tasks=2))
    client = sim.add_client()
    worker = sim.add_worker(capacity=3)
    sim.submit(client, [task(client.peer, n) for n in (1, 2, 3)])
    for _ in range(3):
        sim.finish(worker)
    forgotten = story_of(sim, client.peer, 1)
    assert not forgotten.known and not forgotten.entries
    assert "forgotten" in forgotten.note and "2 tasks" in forgotten.note
    assert story_of(sim, client.peer, 3).known
    never = story_of(sim, client.peer, 99)
    assert not never.known and "does not know this task" in never.note


def test_finished_stories_expire_after_the_retention_time_live_ones_do_not() -> None:
    book = StoryBook(retention_tasks=100, retention_seconds=10)
    book.opened(tid(1), (), 0.0, "queued", "submitted")
    book.opened(tid(2), (), 0.0, "queued", "submitted")
    book.ended(tid(1), now=0.0, wall_time=0.0, what="success")
    book.expire(5.0)
    assert book.story(tid(1)).known
    book.expire(10.5)
    assert not book.story(tid(1)).known and book.story(tid(2)).known
    assert len(book) == 1


def test_a_long_story_is_bounded_and_says_so_but_keeps_its_end() -> None:
    book = StoryBook()
    book.opened(tid(1), (), 0.0, "queued", "submitted")
    for n in range(ENTRIES_PER_TASK * 2):
        book.note(tid(1), float(n), "dispatched")
    book.ended(tid(1), now=1e3, wall_time=1e3, what="success")
    reply = book.story(tid(1))
    assert len(reply.entries) == ENTRIES_PER_TASK + 1 and reply.entries[-1].what == "success"
    assert f"{ENTRIES_PER_TASK + 1} entries left out" in reply.note


def test_a_processor_report_counts_against_the_bound_entry_by_entry() -> None:
    """A run's report is kept as it came and its entries made when the story is read: those that did not fit when it
    came stay out, and the ones that did keep their words."""
    book = StoryBook()
    book.opened(tid(1), (), 0.0, "queued", "submitted")
    for n in range(ENTRIES_PER_TASK - 2):
        book.note(tid(1), float(n), "dispatched")
    ran = m.RunStamps(started_at=200.0, finished_at=300.0, processor_pid=42, received_at=100.0)
    result = replace(success(tid(1)), ran=ran)
    book.ran(tid(1), b"Worker|w", 3, result)  # three entries, one fits
    book.ran(tid(1), b"Worker|w", 4, result)  # none fits
    book.ended(tid(1), now=1e3, wall_time=1e3, what="success")
    reply = book.story(tid(1))
    assert len(reply.entries) == ENTRIES_PER_TASK + 1 and "5 entries left out" in reply.note
    (received,) = [entry for entry in reply.entries if entry.component == "processor"]
    assert (received.wall_time, received.what) == (100.0, "received on its link")
    assert received.where == "pid 42 of worker Worker|w" and received.cause == "dispatch attempt 3"


def test_stories_off_records_nothing_and_says_so() -> None:
    sim = SimulatedCluster(CoreSettings("s", "o", PYTHON, story_retention_tasks=0))
    client = sim.add_client()
    worker = sim.add_worker()
    sim.submit(client, [task(client.peer, 1)])
    assert len(sim.core.tasks.stories) == 0
    sim.finish(worker)
    reply = story_of(sim, client.peer, 1)
    assert not reply.known and "stories are off" in reply.note


def test_after_a_scheduler_restart_a_story_tells_the_adoption_and_the_resubmission() -> None:
    """A restarted scheduler (a new instance id) adopts task 2 from the worker that still holds it and gets task 3
    submitted again by its returning client: both stories say the restart caused them."""
    from tests.simulation.test_restart_reattachment import CLIENT, client_back, restarted, worker_back

    sim = restarted()
    sim.advance(0.1)
    worker = worker_back(sim, held=[2])
    client = client_back(sim)
    sim.submit(client, [task(CLIENT, n) for n in (2, 3)])
    sim.advance(5.0)
    sim.finish(worker, task(CLIENT, 2).task_id)
    adopted = story_of(sim, CLIENT, 2)
    assert [(e.what, e.cause) for e in adopted.entries][:2] == [
        ("queued", "submitted again by its client after a scheduler restart"),
        ("dispatched", "scheduler restart: adopted from the worker that held it before the restart (not run again)"),
    ]
    assert adopted.entries[0].where == "instance " + b"new-instance".hex()[:8]
    resubmitted = story_of(sim, CLIENT, 3)
    assert resubmitted.entries[0].cause == "submitted again by its client after a scheduler restart"


def test_waiting_reasons_are_kept_as_few_spans_per_queue_key_and_old_keys_go() -> None:
    book = StoryBook(retention_tasks=10, retention_seconds=100)
    for second in range(150):  # the same reason sampled every second: one span
        book.waiting(("gpu",), float(second), "no connected worker has the capabilities gpu")
    for second in range(200, 300):
        book.waiting((), float(second), "no worker is connected" if second % 2 else "all workers are busy")
    assert len(book._reasons[("gpu",)]) == 1
    assert len(book._reasons[()]) == SPANS_PER_KEY
    book.expire(0.0)
    assert list(book._reasons) == [()], "a key not sampled for longer than the retention time is forgotten"


def test_a_task_id_that_ends_again_has_its_new_story_and_the_kept_endings_stay_bounded() -> None:
    """A task id submitted again after it ended (a client's fixed ids): its story is the latest one, the first is
    passed over when its turn to go comes, and the stories kept never exceed the bound. Checked with the
    passing over switched off (every old ending deletes its id's story): fails."""
    book = StoryBook(retention_tasks=3)
    for round_number in range(10):
        book.opened(tid(1), (), float(round_number), "queued", f"submitted, round {round_number}")
        book.ended(tid(1), now=float(round_number), wall_time=float(round_number), what="success")
    book.opened(tid(2), (), 20.0, "queued", "submitted")
    book.ended(tid(2), now=20.0, wall_time=20.0, what="success")
    assert [entry.cause for entry in book.story(tid(1)).entries] == ["submitted, round 9", ""]
    assert book.story(tid(2)).known and len(book._ended) <= 3 and len(book) == 2


def test_a_finished_story_is_a_tuple_the_collector_leaves_alone_and_reads_as_before_its_task_ended() -> None:
    """A finished story is kept as one tuple of plain values, which the collector stops tracking (the 10,000 kept are
    no work for its collections): asked for afterwards, every entry reads as before (times, places, causes made from
    templates and peer ids, a run's stamps, the waiting reasons of its queue key), and the end is added. Checked with
    the story kept as its list: the first assertion fails; and with a run's stamps read back as a RunStamps only
    (`_entries_of` without the tuple case): its entries are lost."""
    book = StoryBook(retention_tasks=10, retention_seconds=100)
    gpu = (("gpu", 1),)
    worker = b"Worker|host|0123456789abcdef"
    book.opened(tid(1), gpu, 10.0, TaskState.QUEUED, ("submitted by client {}", b"Client|c|0123456789"))
    book.waiting(gpu, 10.5, "no connected worker has the capabilities gpu")
    book.waiting(gpu, 11.5, "no connected worker has the capabilities gpu")
    book.note(tid(1), 12.0, TaskState.DISPATCHED, worker, ("dispatch attempt {}", 1))
    ran = m.RunStamps(started_at=12.5, finished_at=13.5, processor_pid=4242, received_at=12.25)
    book.ran(tid(1), worker, 1, replace(success(tid(1)), ran=ran))
    before = book.story(tid(1))
    book.ended(tid(1), now=14.0, wall_time=14.0, what="success", where=worker, cause=("result {} from worker {}",
               "success", worker))  # fmt: skip
    (kept,) = book._finished.values()
    gc.collect()  # a collection untracks the tuples inside it, the next one the story
    gc.collect()
    assert type(kept) is tuple and not gc.is_tracked(kept) and not book._live
    after = book.story(tid(1))
    assert after.known and after.entries[:-1] == before.entries and after.note == before.note
    assert [entry.what for entry in after.entries] == [
        "queued", "waiting", "dispatched", "received on its link", "started", "finished (success)", "success"
    ]  # fmt: skip
    end = after.entries[-1]
    assert end.wall_time == 14.0 and "worker Worker|host" in end.where and end.cause.startswith("result success from")
    assert before.entries[3].where == "pid 4242 of worker Worker|host|01234567"  # the short form of its id


def test_an_entry_about_a_finished_task_joins_its_packed_story_which_still_goes_in_its_turn() -> None:
    """An actor's notes come after its start task ended: its story is unpacked, the entry added, packed again; the
    bound on finished stories still forgets it in its turn (the ending order is kept by task id)."""
    book = StoryBook(retention_tasks=2)
    book.opened(tid(1), (), 1.0, TaskState.QUEUED, "submitted")
    book.ended(tid(1), now=2.0, wall_time=2.0, what="success")
    book.note(tid(1), 3.0, "actor stopped", b"Worker|w", "its client left")
    assert type(book._finished[tid(1)]) is tuple and not book._live
    assert [entry.what for entry in book.story(tid(1)).entries] == ["queued", "success", "actor stopped"]
    for number in (2, 3):
        book.opened(tid(number), (), 4.0, TaskState.QUEUED, "submitted")
        book.ended(tid(number), now=5.0, wall_time=5.0, what="success")
    assert not book.story(tid(1)).known and book.forgotten == 1 and len(book) == 2


def test_a_cause_the_packing_does_not_take_is_kept_in_words() -> None:
    """A cause is text, a peer id or a template with arguments; an argument of another kind that cannot be pickled (an
    object of a local class) does not stop the stories from being frozen: that entry's place and cause are kept in
    words."""

    class Local:
        def __str__(self) -> str:
            return "a local value"

    book = StoryBook()
    book.opened(tid(1), (), 1.0, TaskState.QUEUED, ("submitted by {}", Local()))
    book.ended(tid(1), now=2.0, wall_time=2.0, what="success", cause=("result from {}", b"Worker|w"))
    book.freeze()
    assert book._frozen is not None
    causes = [entry.cause for entry in book.story(tid(1)).entries]
    assert causes == ["submitted by a local value", "result from Worker|w"]


def _ended_stories(book: StoryBook, numbers: range, now: float) -> None:
    for number in numbers:
        book.opened(tid(number), (), now, TaskState.QUEUED, f"submitted {number}")
        book.note(tid(number), now, TaskState.DISPATCHED, b"Worker|w", "dispatch attempt 1")
        book.ended(tid(number), now=now, wall_time=now, what="success")


def test_frozen_finished_stories_are_one_object_read_as_before_and_still_go_in_their_turn() -> None:
    """After a big drain the kept stories become one object (issue 58: each story packed among the queue's memory
    pinned the pages around it once that memory was given back); asked for, or when more tasks end, they are made
    back as they were: every story reads the same, the ending order and the bound hold. Checked with `freeze` doing
    nothing: the first assertion fails."""
    book = StoryBook(retention_tasks=4, retention_seconds=0)
    _ended_stories(book, range(1, 7), 1.0)  # 3..6 kept
    before = {number: book.story(tid(number)) for number in range(1, 7)}
    book.freeze()
    assert book._frozen is not None and not book._finished and not book._ended and len(book) == 4
    _ended_stories(book, range(7, 9), 2.0)  # thawed: the two oldest go first
    assert book._frozen is None and len(book) == 4 and book.forgotten == 4
    assert [book.story(tid(number)).known for number in range(1, 9)] == [False] * 4 + [True] * 4
    assert all(book.story(tid(number)) == before[number] for number in (5, 6))
    book.freeze()
    assert book.story(tid(6)) == before[6] and book._frozen is None  # asked for: thawed, read as before


def test_frozen_stories_expire_only_once_the_oldest_is_old_enough() -> None:
    """Ticks call `expire`: frozen stories stay one object while the oldest is young, and go in their turn after."""
    book = StoryBook(retention_tasks=10, retention_seconds=10)
    _ended_stories(book, range(1, 3), 1.0)
    _ended_stories(book, range(3, 5), 6.0)
    book.freeze()
    book.expire(10.0)
    assert book._frozen is not None and len(book) == 4
    book.expire(12.0)
    assert book._frozen is None and len(book) == 2 and not book.story(tid(1)).known and book.story(tid(3)).known
