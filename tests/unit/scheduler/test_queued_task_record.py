"""A queued task's record (issue 58, memory per queued task): its body and a few shared values, no decoded Task; the
Task a worker is sent is the one its client submitted (a graph node's with its inputs attached); its story opens with
its submission though the story book holds nothing for it until it moves."""

from __future__ import annotations

from dataclasses import replace

from scaler.protocol import codec
from scaler.protocol import messages as m
from scaler.protocol.ids import ClientID, GraphID, TaskID
from scaler.scheduler.core.effects import Send
from scaler.scheduler.core.events import Received
from scaler.scheduler.core.task_record import TaskRecord, task_of
from scaler_rehearsal.testing.simulation import SimulatedCluster, task


def tid(number: int) -> TaskID:
    return TaskID(number.to_bytes(16, "big"))


def sent_tasks(sim: SimulatedCluster) -> dict[TaskID, m.Task]:
    return {e.message.task_id: e.message for e in sim.effects_of(Send) if isinstance(e.message, m.Task)}


def slots_of(record: TaskRecord) -> list[object]:
    return [getattr(record, name) for name in type(record).__slots__]


def test_a_queued_task_is_kept_as_its_body_and_shared_traits_not_a_decoded_task() -> None:
    """Checked with the record holding the decoded Task again (its first slot the Task): fails."""
    sim = SimulatedCluster()
    client = sim.add_client()
    sim.submit(client, [task(client.peer, n) for n in (1, 2)])
    first, second = sim.core.tasks.records[tid(1)], sim.core.tasks.records[tid(2)]
    assert first.state.value == "queued"
    assert not any(isinstance(value, m.Task) for value in slots_of(first)), "no decoded Task while queued"
    assert first.body == b"body" and first.traits.function_name == "f"
    assert first.traits is second.traits, "tasks of one function, priority and shape share their traits"
    assert first.opening is second.opening, "tasks submitted in one step by one client share their opening"


def test_tasks_of_clients_interleaved_in_one_step_share_their_traits_per_client() -> None:
    """One burst of reads brings several clients' submissions one after another: each client's tasks still share one
    traits object (its opening names its client). Checked with one opening kept at a time (the last): fails."""
    sim = SimulatedCluster()
    first, second = sim.add_client("a"), sim.add_client("b")
    interleaved = [
        Received(client.peer, task(client.peer, 2 * number + offset), sim.now)
        for number in range(50)
        for offset, client in enumerate((first, second))
    ]
    sim.core.handle_all(interleaved)
    records = sim.core.tasks.records.values()
    by_client = {
        client: {id(r.traits) for r in records if r.client_id == client} for client in (first.peer, second.peer)
    }
    assert len(records) == 100 and all(len(shared) == 1 for shared in by_client.values())
    assert len({next(iter(shared)) for shared in by_client.values()}) == 2


def test_a_plain_task_submitted_as_a_frame_is_queued_as_its_body_and_sent_as_the_same_frame() -> None:
    """The scheduler's shell decodes a client's frame: a plain task keeps its frame only while its step lasts, and is
    queued as its body (the frame is written again when it is dispatched, byte for byte the client's); an actor's call
    keeps its frame and no body (sent on as it came)."""
    sim = SimulatedCluster()
    client = sim.add_client()
    submitted = m.Task(tid(7), ClientID(client.peer), bytes(range(136)), "inc", priority=3, stream_credit=5)
    frame = codec.encode(submitted)
    decoded = codec.decode(frame, forwarding=True)
    assert isinstance(decoded, m.Task) and decoded.wire == frame and decoded.body == submitted.body
    sim.submit(client, [decoded])
    assert not sim.core.tasks.arrived, "a task still queued at its step's end keeps only its record"
    sim.add_worker()
    sent = sent_tasks(sim)[tid(7)]
    assert sent == submitted and sent.wire is None, "written again"
    assert codec.encode(sent) == frame, "the frame its client sent"
    call = codec.decode(codec.encode(replace(submitted, actor_id=tid(1))), forwarding=True)
    assert isinstance(call, m.Task) and call.wire is not None and call.body == b""


def test_a_plain_task_dispatched_in_the_step_it_came_is_sent_as_its_clients_frame() -> None:
    """Not written again: the Task its client's frame was read as, that frame with it. Checked with the table keeping
    no Task of its step (`arrived` never filled): fails."""
    sim = SimulatedCluster()
    client = sim.add_client()
    sim.add_worker()
    frame = codec.encode(m.Task(tid(8), ClientID(client.peer), bytes(range(136)), "inc"))
    decoded = codec.decode(frame, forwarding=True)
    sim.submit(client, [decoded])
    sent = sent_tasks(sim)[tid(8)]
    assert sent is decoded and sent.wire == frame and codec.encode(sent) == frame
    assert not sim.core.tasks.arrived
    record = sim.core.tasks.records[tid(8)]
    assert not any(isinstance(value, m.Task) for value in slots_of(record)), "its record holds no Task"


def test_a_dispatched_task_is_the_task_submitted_whatever_its_shape() -> None:
    sim = SimulatedCluster()
    client = sim.add_client()
    owner = ClientID(client.peer)
    shapes = [
        m.Task(tid(1), owner, b"plain", "f"),
        m.Task(tid(2), owner, b"urgent", "g", priority=7),
        m.Task(tid(3), owner, b"gpu", "h", capabilities=(("gpu", 1),)),
        m.Task(tid(4), owner, b"stream", "s", stream_credit=16),
        m.Task(tid(5), owner, b"actor", "Counter", actor=m.ActorSpec(max_restarts=2, name="counter")),
    ]
    sim.submit(client, shapes)
    gone = sim.core.tasks.records[tid(3)]
    assert task_of(gone) == shapes[2], "made again as submitted while it waits"
    sim.add_worker(capacity=8, capabilities=(("gpu", 1),), slots=5)
    sent = sent_tasks(sim)
    assert [sent[submitted.task_id] for submitted in shapes] == shapes


def test_a_graph_node_is_sent_as_submitted_with_the_results_it_depends_on() -> None:
    """The inputs are attached when the node is dispatched (they are not kept on its record while it waits)."""
    sim = SimulatedCluster()
    client = sim.add_client()
    first = task(client.peer, 1)
    second = replace(task(client.peer, 2), dependencies=(first.task_id,))
    sim.submit_graph(client, 9, [first, second], [second.task_id])
    worker = sim.add_worker()
    sim.finish(worker, first.task_id)
    sent = sent_tasks(sim)
    graph = GraphID((9).to_bytes(16, "big"))
    assert sent[first.task_id] == replace(first, graph_id=graph)
    given = m.TaskInput(first.task_id, m.PayloadKind.INLINE, b"v")
    assert sent[second.task_id] == replace(second, graph_id=graph, inputs=(given,))


def test_a_queued_tasks_story_opens_with_its_submission_though_the_book_holds_nothing_for_it() -> None:
    """Checked with the table opening a story per task again (`StoryBook.opened`): the book holds one per task."""
    sim = SimulatedCluster()
    client = sim.add_client()
    sim.submit(client, [task(client.peer, n) for n in range(1, 101)])
    book = sim.core.tasks.stories
    assert len(book) == 0, "a queued task whose story has not moved has no story of its own"
    reply = book.story(tid(50))
    assert reply.known and [(e.what, e.cause) for e in reply.entries] == [
        ("queued", f"submitted by client {client.peer.decode()}")
    ]
    assert len(book) == 0, "reading a story keeps nothing"
    sim.add_worker()
    whats = [entry.what for entry in book.story(tid(1)).entries]
    assert whats == ["queued", "dispatched"]
