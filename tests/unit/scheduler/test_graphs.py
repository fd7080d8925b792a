"""Graphs in the scheduler core: readiness, inputs, failure fan-out, cancel, freeing intermediates."""

from __future__ import annotations

from scaler.protocol import messages as m
from scaler.protocol.ids import ClientID, GraphID, TaskID
from scaler.scheduler.core.effects import DeleteObjects
from scaler_rehearsal.testing.simulation import FakeClient, SimulatedCluster

GRAPH = GraphID(b"g" * 16)


def node(client: FakeClient, name: str, *dependencies: str) -> m.Task:
    return m.Task(
        TaskID(name.encode().ljust(16, b".")),
        ClientID(client.peer),
        b"body",
        name,
        graph_id=GRAPH,
        dependencies=tuple(TaskID(d.encode().ljust(16, b".")) for d in dependencies),
    )


def tid(name: str) -> TaskID:
    return TaskID(name.encode().ljust(16, b"."))


def diamond(client: FakeClient) -> m.GraphTask:
    """a -> (b, c) -> d; targets d."""
    nodes = (node(client, "a"), node(client, "b", "a"), node(client, "c", "a"), node(client, "d", "b", "c"))
    return m.GraphTask(GRAPH, ClientID(client.peer), nodes, (tid("d"),))


def test_nodes_run_when_their_dependencies_succeed_and_get_their_inputs() -> None:
    sim = SimulatedCluster()
    client = sim.add_client()
    worker = sim.add_worker(capacity=4)
    client.answers[tid("d")] = []
    sim.send(client.peer, diamond(client))
    assert worker.held == [tid("a")]
    sim.finish(worker)
    assert set(worker.held) == {tid("b"), tid("c")}
    sent = [e.message for e in sim.effects if isinstance(getattr(e, "message", None), m.Task)]
    b_task = next(t for t in sent if t.task_id == tid("b"))
    assert [given.task_id for given in b_task.inputs] == [tid("a")]
    sim.finish(worker)
    sim.finish(worker)
    sim.finish(worker)
    assert client.answers[tid("d")] == [("result", "success")]
    assert not sim.core.graphs.graphs and not sim.core.tasks.records
    sim.check_invariants()


def test_only_targets_are_sent_to_the_client() -> None:
    sim = SimulatedCluster()
    client = sim.add_client()
    worker = sim.add_worker(capacity=4)
    sim.send(client.peer, diamond(client))
    for _ in range(4):
        sim.finish(worker)
    assert set(client.answers) == {tid("d")}


def test_a_failing_root_fails_every_target_that_needs_it() -> None:
    sim = SimulatedCluster()
    client = sim.add_client()
    worker = sim.add_worker(capacity=4)
    nodes = (node(client, "a"), node(client, "b", "a"), node(client, "c", "a"), node(client, "d", "b", "c"))
    sim.send(client.peer, m.GraphTask(GRAPH, ClientID(client.peer), nodes, (tid("b"), tid("c"), tid("d"))))
    sim.finish(worker, status=m.ResultStatus.FAILED)
    for target in ("b", "c", "d"):
        assert client.answers[tid(target)] == [("result", "failed")]
    assert not sim.core.graphs.graphs and not sim.core.tasks.records


def test_cancelling_one_member_cancels_the_whole_graph() -> None:
    sim = SimulatedCluster()
    client = sim.add_client()
    worker = sim.add_worker(capacity=4)
    nodes = (node(client, "a"), node(client, "b"), node(client, "c", "a", "b"))
    sim.send(client.peer, m.GraphTask(GRAPH, ClientID(client.peer), nodes, (tid("a"), tid("c"))))
    assert set(worker.held) == {tid("a"), tid("b")}
    sim.cancel(client, [tid("c")])
    assert client.answers[tid("a")] == [("cancelled", "canceled")]
    assert client.answers[tid("c")] == [("cancelled", "canceled")]
    assert not worker.held and not sim.core.tasks.records and not sim.core.graphs.graphs


def test_a_node_that_uses_the_same_dependency_twice_runs_once_it_is_done() -> None:
    sim = SimulatedCluster()
    client = sim.add_client()
    worker = sim.add_worker(capacity=4)
    nodes = (node(client, "a"), node(client, "b", "a", "a"))
    sim.send(client.peer, m.GraphTask(GRAPH, ClientID(client.peer), nodes, (tid("b"),)))
    sim.finish(worker)
    assert worker.held == [tid("b")]
    sim.finish(worker)
    assert client.answers[tid("b")] == [("result", "success")]
    assert not sim.core.graphs.graphs


def test_intermediate_results_in_storage_are_deleted_when_nothing_needs_them() -> None:
    sim = SimulatedCluster()
    client = sim.add_client()
    worker = sim.add_worker(capacity=4)
    nodes = (node(client, "a"), node(client, "b", "a"))
    sim.send(client.peer, m.GraphTask(GRAPH, ClientID(client.peer), nodes, (tid("b"),)))
    big = m.TaskResult(tid("a"), m.ResultStatus.SUCCESS, m.PayloadKind.OBJECT_ID, b"object-of-a")
    worker.held.remove(tid("a"))
    sim.send(worker.link, big)
    assert not [e for e in sim.effects if isinstance(e, DeleteObjects)]
    sim.finish(worker)
    deletes = [e for e in sim.effects if isinstance(e, DeleteObjects)]
    assert deletes and deletes[0].object_ids == (b"object-of-a",)


def test_a_one_node_graph_in_a_tight_loop_always_completes() -> None:
    sim = SimulatedCluster()
    client = sim.add_client()
    worker = sim.add_worker()
    for number in range(200):
        graph_id = GraphID(number.to_bytes(16, "big"))
        only = m.Task(TaskID(b"n" + number.to_bytes(15, "big")), ClientID(client.peer), b"b", graph_id=graph_id)
        client.answers[only.task_id] = []
        sim.send(client.peer, m.GraphTask(graph_id, ClientID(client.peer), (only,), (only.task_id,)))
        sim.finish(worker)
        assert client.answers[only.task_id] == [("result", "success")]
    assert not sim.core.graphs.graphs


def test_cancel_while_subtasks_finish_leaves_no_state_behind() -> None:
    sim = SimulatedCluster()
    client = sim.add_client()
    worker = sim.add_worker(capacity=4)
    for round_number in range(50):
        graph_id = GraphID(round_number.to_bytes(16, "big"))
        a = m.Task(TaskID(b"a" + round_number.to_bytes(15, "big")), ClientID(client.peer), b"b", graph_id=graph_id)
        b = m.Task(TaskID(b"b" + round_number.to_bytes(15, "big")), ClientID(client.peer), b"b", graph_id=graph_id,
                   dependencies=(a.task_id,))  # fmt: skip
        sim.send(client.peer, m.GraphTask(graph_id, ClientID(client.peer), (a, b), (b.task_id,)))
        worker.alive = False  # the cancel crosses the result of a
        sim.cancel(client, [b.task_id])
        worker.alive = True
        sim.send(worker.link, m.TaskResult(a.task_id, m.ResultStatus.SUCCESS, m.PayloadKind.INLINE, b"v"))
        sim.send(worker.link, m.TaskCancelConfirm(a.task_id, m.CancelOutcome.NOT_FOUND))
        worker.held.clear()
        assert client.answers[b.task_id] == [("cancelled", "canceled")]
    assert not sim.core.graphs.graphs and not sim.core.tasks.records
    sim.check_invariants()


def test_a_cyclic_graph_is_refused_naming_the_problem() -> None:
    sim = SimulatedCluster()
    client = sim.add_client()
    nodes = (node(client, "a", "b"), node(client, "b", "a"))
    sim.send(client.peer, m.GraphTask(GRAPH, ClientID(client.peer), nodes, (tid("a"),)))
    assert client.answers[tid("a")] == [("result", "error")]
    assert not sim.core.tasks.records
