"""The core's per-task tables give their hash tables back once they hold far fewer entries than at their peak,
and keep behaving: same entries, same identity, same dispatch."""

from __future__ import annotations

import sys

from scaler.protocol import messages as m
from scaler.protocol.ids import ClientID, GraphID, PeerID, TaskID
from scaler.scheduler.core.graphs import GraphRegistry
from scaler.scheduler.core.reattachment import Reattachment
from scaler.scheduler.core.shrink_rule import MIN_PEAK, SHRINK_FACTOR, ShrinkRule, rebuild
from scaler_rehearsal.testing.simulation import SimulatedCluster, task


def tid(number: int) -> TaskID:
    return TaskID(number.to_bytes(16, "big"))


# ---------------------------------------------------------------- the rule


def test_a_table_that_grows_or_stays_put_is_never_due() -> None:
    rule = ShrinkRule()
    assert not any(rule.due(size) for size in range(0, 10 * MIN_PEAK, 7))
    assert not any(rule.due(10 * MIN_PEAK) for _ in range(100))
    assert rule.peak == 10 * MIN_PEAK and rule.rebuilds == 0


def test_a_table_far_below_its_peak_is_due_once_then_watched_from_its_new_size() -> None:
    rule = ShrinkRule()
    peak = 100 * MIN_PEAK
    rule.due(peak)
    assert not rule.due(peak // SHRINK_FACTOR)  # not yet: exactly 1/SHRINK_FACTOR of the peak
    assert rule.due(peak // SHRINK_FACTOR - 1)
    assert rule.peak == peak // SHRINK_FACTOR - 1 and rule.rebuilds == 1
    assert not rule.due(peak // SHRINK_FACTOR - 2)  # the next rebuild needs another 8-fold drop
    assert rule.due(peak // SHRINK_FACTOR // SHRINK_FACTOR - 1)
    assert rule.rebuilds == 2


def test_tables_whose_peak_stayed_small_are_left_alone() -> None:
    rule = ShrinkRule()
    rule.due(MIN_PEAK - 1)
    assert not rule.due(0)
    assert rule.rebuilds == 0


def test_a_rebuilt_dict_or_set_keeps_its_entries_and_identity_and_gives_its_table_back() -> None:
    table = {number: str(number) for number in range(100_000)}
    members = set(range(100_000))
    for number in range(99_000):
        del table[number]
        members.discard(number)
    same_table, same_members = table, members
    full_dict, full_set = sys.getsizeof(table), sys.getsizeof(members)
    rebuild(table)
    rebuild(members)
    assert table is same_table and members is same_members
    assert table == {number: str(number) for number in range(99_000, 100_000)}
    assert members == set(range(99_000, 100_000))
    assert sys.getsizeof(table) * 20 < full_dict and sys.getsizeof(members) * 20 < full_set
    table[7] = "7"  # still an ordinary dict and set
    members.add(7)
    assert table[7] == "7" and 7 in members


# ---------------------------------------------------------------- the tables that use it


def test_the_task_table_rebuilds_its_containers_and_still_holds_and_runs_every_live_task() -> None:
    sim = SimulatedCluster()
    first, second = sim.add_client("a"), sim.add_client("b")
    total = 3 * MIN_PEAK
    sim.submit(first, [task(first.peer, number) for number in range(0, total, 2)])
    sim.submit(second, [task(second.peer, number) for number in range(1, total, 2)])
    table = sim.core.tasks
    records, owned = table.records, table._by_client[ClientID(first.peer)]
    full_records, full_owned = sys.getsizeof(records), sys.getsizeof(owned)
    worker = sim.add_worker(capacity=50)
    while len(table) > 300:
        sim.finish(worker)
    assert table.shrink.rebuilds >= 1
    assert table.records is records and table._by_client[ClientID(first.peer)] is owned
    assert sys.getsizeof(records) * 4 < full_records and sys.getsizeof(owned) * 4 < full_owned
    answered = {task_id for client in (first, second) for task_id, answers in client.answers.items() if answers}
    live = {tid(number) for number in range(total)} - answered
    assert set(records) == live
    for client in (first, second):
        assert table.owned_by(ClientID(client.peer)) == sorted(t for t in live if t in client.answers)
    sim.check_invariants()
    order = []
    while table.records:
        order.append(worker.held[0])
        sim.finish(worker)
    assert all(client.answers[t] == [("result", "success")] for client in (first, second) for t in client.answers)
    for client in (first, second):  # each client's tasks still ran in submission order
        mine = [t for t in order if t in client.answers]
        assert mine == sorted(mine)


def test_the_reattachment_tables_are_rebuilt_once_their_entries_are_forgotten() -> None:
    reattachment = Reattachment(keep_seconds=10.0)
    worker = PeerID(b"Worker|w")
    reattachment.worker_holds(worker, tuple(tid(number) for number in range(2 * MIN_PEAK)), now=0.0)
    held = reattachment._held
    full = sys.getsizeof(held)
    reattachment.worker_holds(worker, (tid(10**9),), now=20.0)
    reattachment.release(now=20.0)  # the first ones are older than keep_seconds: forgotten
    assert reattachment._held is held and sys.getsizeof(held) * 20 < full
    adoption = reattachment.take(tid(10**9))
    assert adoption is not None and adoption.worker == worker
    assert reattachment.take(tid(1)) is None


def test_the_graph_table_is_rebuilt_once_its_graphs_have_ended() -> None:
    registry = GraphRegistry()
    client = ClientID(b"Client|c")
    graphs = []
    for number in range(2 * MIN_PEAK):
        node = m.Task(tid(number), client, b"body", "f", graph_id=GraphID(number.to_bytes(8, "big")))
        graphs.append(registry.register(m.GraphTask(node.graph_id, client, (node,), (node.task_id,))))
    full = sys.getsizeof(registry.graphs)
    for number, graph in enumerate(graphs[:-10]):
        registry.ended(graph, tid(number))
    assert len(registry) == 10 and sys.getsizeof(registry.graphs) * 4 < full
    assert [registry.get(graph.graph_id) for graph in graphs[-10:]] == graphs[-10:]


def test_a_drained_queues_records_are_gone_and_its_kept_stories_are_frozen_as_one_object() -> None:
    """Issue 58: once a big queue has run and its client left, nothing of its tasks is held but the stories the
    retention keeps, all of them one object once the table is empty (a story's many small values, made among the
    queue's tasks, would pin the memory they filled; `freeze`, without which the first assertion on the book fails),
    each a tuple once made back: the table, the by-client sets, the dispatch queue's heaps and its per-client entries,
    the counts of the gone client, the live stories. Fails with the kept stories left as lists in `StoryBook.ended`,
    and with `forget_client` switched off (the gone client's counts stay)."""
    sim = SimulatedCluster()
    client = sim.add_client()
    total = 3 * MIN_PEAK
    sim.submit(client, [task(client.peer, number) for number in range(total)])
    table, book = sim.core.tasks, sim.core.tasks.stories
    worker = sim.add_worker(capacity=50)
    while table.records:
        sim.finish(worker)
    sim.send(client.peer, m.ClientDisconnect())
    gone = ClientID(client.peer)
    assert not table.records and not table._by_client and not len(table.queue)
    assert not any(table.queue._heaps.values()) and not table.queue.client_queued and gone not in table.queue.shares
    assert gone not in table.client_counts and not sim.core.clients
    assert not book._live and table.shrink.rebuilds >= 1
    assert book._frozen is not None and not book._finished and len(book) == min(total, book.retention_tasks)
    assert book.story(tid(total - 1)).known and not book.story(tid(0)).known
    kept = list(book._finished.values())  # asked for: made back, each one tuple
    assert len(kept) == min(total, book.retention_tasks) and {type(story) for story in kept} == {tuple}
