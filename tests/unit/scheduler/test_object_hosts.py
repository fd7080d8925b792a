"""Placement that follows data (scheduler/core/object_hosts.py, issue 74 item 4): the record of which hosts hold which
large inputs, bounded and forgotten with a host's last worker; and the core's dispatch, which sends a task naming
large inputs to a free worker of a host that holds them, and places it at once elsewhere when every holding host is
busy.

Checked with the mechanism off: with `ObjectHosts.nearer` returning None (dispatch places by load alone) the tests of
the core's dispatch fail (the later readers go to the least loaded worker, on the other host); with `placed` doing
nothing, so do they, and the record's tests fail."""

from __future__ import annotations

from dataclasses import replace

from scaler.protocol.ids import ObjectID, PeerID, TaskID
from scaler.scheduler.core.object_hosts import MAX_HOSTS, MAX_OBJECTS, Busy, ObjectHosts
from scaler.scheduler.core.peers import WorkerRecord
from scaler.scheduler.core.settings import CoreSettings
from scaler_rehearsal.testing.simulation import PYTHON, FakeWorker, SimulatedCluster, task

X, Y = ObjectID(b"x" * 16), ObjectID(b"y" * 16)
MB = 1_000_000


def worker_of(host: str, name: str) -> WorkerRecord:
    return WorkerRecord(PeerID(name.encode()), (), frozenset(), 1, "", "", host, 0, 0.0, 0.0)


def test_a_host_holds_what_was_placed_on_it_most_recent_last_and_bounded() -> None:
    hosts = ObjectHosts()
    hosts.placed((X, Y), "a")
    hosts.placed((X,), "b")
    hosts.placed((X,), "a")
    assert hosts.hosts_of(X) == ("b", "a") and hosts.hosts_of(Y) == ("a",)
    for number in range(MAX_HOSTS + 3):
        hosts.placed((X,), f"h{number}")
    assert len(hosts.hosts_of(X)) == MAX_HOSTS and hosts.hosts_of(X)[-1] == f"h{MAX_HOSTS + 2}"
    for number in range(MAX_OBJECTS):
        hosts.placed((ObjectID(number.to_bytes(16, "big")),), "c")
    assert len(hosts) == MAX_OBJECTS and hosts.hosts_of(Y) == ()  # the least recently placed went first


def test_what_a_host_holds_is_forgotten_with_its_last_worker() -> None:
    hosts = ObjectHosts()
    first, second, other = worker_of("a", "a1"), worker_of("a", "a2"), worker_of("b", "b1")
    for worker in (first, second, other):
        hosts.joined(worker)
    hosts.placed((X,), "a")
    hosts.placed((X, Y), "b")
    hosts.left(first)
    assert hosts.hosts_of(X) == ("a", "b")
    hosts.left(second)
    assert hosts.hosts_of(X) == ("b",) and hosts.hosts_of(Y) == ("b",)
    hosts.left(other)
    assert len(hosts) == 0


def test_the_choice_keeps_an_offered_worker_on_a_holding_host_else_takes_a_free_one_there() -> None:
    hosts = ObjectHosts()
    a1, b1 = worker_of("a", "a1"), worker_of("b", "b1")
    hosts.joined(a1)
    hosts.joined(b1)
    hosts.placed((Y,), "a")
    assert hosts.nearer((X,), b1, (), 0.0) is None  # nobody holds X: placed as by load
    assert hosts.nearer((X, Y), a1, (), 0.0) is None and hosts.near_data == 1  # the offered worker holds Y
    # b1 is offered, a holds Y, a1 has no link with room (no processor said hello): host a is busy, for the caller to
    # weigh (data_waits.py), which counts the task away once it places it
    assert hosts.nearer((X, Y), b1, (), 0.0) == Busy(("a",)) and hosts.away_from_data == 0


def data_task(client: bytes, number: int, *inputs: ObjectID):  # type: ignore[no-untyped-def]
    return replace(task(client, number), large_inputs=inputs)


def tid(number: int) -> TaskID:
    return TaskID(number.to_bytes(16, "big"))


def hosts_cluster() -> tuple[SimulatedCluster, list[FakeWorker], list[FakeWorker]]:
    """Two hosts of two workers each, a's joined first (so load alone puts the first task on a)."""
    sim = SimulatedCluster()
    on_a = [sim.add_worker(f"a{n}", host="host-a") for n in range(2)]
    on_b = [sim.add_worker(f"b{n}", host="host-b") for n in range(2)]
    return sim, on_a, on_b


def test_later_readers_of_an_object_go_to_the_host_that_read_it_first_while_it_has_a_free_slot() -> None:
    sim, on_a, on_b = hosts_cluster()
    client = sim.add_client()
    sim.submit(client, [task(client.peer, 0)])  # a0 busy
    sim.submit(client, [task(client.peer, 1), task(client.peer, 2)])  # a1 and b0 busy too
    sim.submit(client, [data_task(client.peer, 3, X)])  # the only free worker: b1, on host b
    assert on_b[1].held == [tid(3)]
    for worker in (on_a[0], on_a[1], on_b[0], on_b[1]):
        sim.finish(worker)
    # all free: load alone would give the next reader a0 (joined first); X is on host b
    sim.submit(client, [data_task(client.peer, 4, X)])
    assert [tid(4)] in (on_b[0].held, on_b[1].held), [w.held for w in on_a + on_b]
    sim.submit(client, [data_task(client.peer, 5, X)])
    assert on_b[0].held + on_b[1].held == [tid(4), tid(5)] or on_b[0].held + on_b[1].held == [tid(5), tid(4)]
    assert on_a[0].held == [] and on_a[1].held == []
    sim.submit(client, [task(client.peer, 6)])  # a task without inputs: by load, as always
    assert on_a[0].held == [tid(6)]
    assert sim.core.state.object_hosts.near_data == 2
    sim.check_invariants()


def test_a_reader_whose_holding_host_is_busy_goes_elsewhere_at_once() -> None:
    sim, on_a, on_b = hosts_cluster()
    client = sim.add_client()
    sim.submit(client, [data_task(client.peer, 1, X), data_task(client.peer, 2, X)])  # both on host a (a0, a1)
    assert on_a[0].held == [tid(1)] and on_a[1].held == [tid(2)]
    sim.submit(client, [data_task(client.peer, 3, X)])  # host a is busy: not held back for it
    assert on_b[0].held == [tid(3)]
    assert sim.core.state.object_hosts.hosts_of(X) == ("host-a", "host-b")
    assert sim.core.state.object_hosts.away_from_data == 1
    sim.check_invariants()


def test_a_holding_host_whose_slots_all_compute_is_busy_though_it_has_room_to_stage() -> None:
    """Its workers take a prefetched task each beyond their slot: a reader staged there would wait behind the running
    one, so it goes to an idle worker of another host."""
    sim = SimulatedCluster()
    on_a = sim.add_worker("a0", capacity=2, host="host-a")
    on_b = sim.add_worker("b0", capacity=2, host="host-b")
    client = sim.add_client()
    sim.submit(client, [data_task(client.peer, 1, X)])
    assert on_a.held == [tid(1)]
    sim.submit(client, [data_task(client.peer, 2, X)])
    assert on_b.held == [tid(2)] and on_a.held == [tid(1)]
    sim.check_invariants()


def test_readers_whose_inputs_are_spread_alike_over_the_hosts_spread_over_them() -> None:
    """A shuffle's reducers: each names one input held on each of four hosts, so every host holds as many of its inputs
    as any other. Hosts b, c and d still run a maker on one of their two slots when the reducers come; host a runs
    nothing, and its worker joined first, so load alone offers it the first two. The best host whose workers hold the
    fewest readers takes each: one on each host (checked with the tie-break off, `nearer` keeping the offered worker
    on any best host: host a takes two, and host d none)."""
    sim = SimulatedCluster()
    names = ["a", "b", "c", "d"]
    workers = [sim.add_worker(f"{name}0", capacity=2, slots=2, host=f"host-{name}") for name in names]
    client = sim.add_client()
    sim.submit(client, [task(client.peer, 100 + number) for number in range(4)])  # a maker on each host
    sim.finish(workers[0])  # host a's ended
    hosts = sim.core.state.object_hosts
    inputs = [tuple(ObjectID(f"{name}{reader}".encode() * 8) for name in names) for reader in range(4)]
    for reader_inputs in inputs:
        for name, object_id in zip(names, reader_inputs, strict=True):
            hosts.made(object_id, f"host-{name}")
    sim.submit(client, [data_task(client.peer, reader, *inputs[reader]) for reader in range(4)])
    readers = [[held for held in worker.held if held in {tid(reader) for reader in range(4)}] for worker in workers]
    assert [len(each) for each in readers] == [1, 1, 1, 1], readers
    assert hosts.near_data == 4 and hosts.away_from_data == 0
    assert [record.readers for record in sim.core.state.workers.values()] == [1, 1, 1, 1]
    for worker in workers:
        while worker.held:
            sim.finish(worker)
    assert [record.readers for record in sim.core.state.workers.values()] == [0, 0, 0, 0]  # counted until released
    sim.check_invariants()


def test_a_host_whose_link_still_brings_in_a_readers_inputs_does_not_take_a_second_though_it_holds_more() -> None:
    """A shuffle's reducers on 10 MB partitions: the first names one held on each of four hosts and goes where load
    puts it (host a, whose worker joined first); the second names two held on host a and one on b and c. Host a holds
    the most of them, but its link still brings in the first reducer's three (its backlog, 2.4 s at 100 Mbit/s):
    fetching the second's two after them costs more than host b's fetching three now. Checked with the backlog
    off (`reading` doing nothing): the second goes to host a too, whose link then carries five partitions."""
    sim = SimulatedCluster(CoreSettings("tcp://sim:1", "tcp://sim:2", PYTHON, placement_link_mbit=100.0))
    names = ["a", "b", "c", "d"]
    workers = [sim.add_worker(f"{name}0", capacity=2, slots=2, host=f"host-{name}") for name in names]
    client = sim.add_client()
    hosts = sim.core.state.object_hosts
    first = tuple(ObjectID(f"1{name}".encode() * 8) for name in names)
    second = tuple(ObjectID(f"2{name}".encode() * 8) for name in "aabc")
    for object_id, name in [*zip(first, names, strict=True), *zip(second, "aabc", strict=True)]:
        hosts.made(object_id, f"host-{name}", 10 * MB)
    sim.submit(client, [data_task(client.peer, 1, *first)])
    assert workers[0].held == [tid(1)]
    sim.submit(client, [data_task(client.peer, 2, *second)])
    assert workers[0].held == [tid(1)] and tid(2) in workers[1].held + workers[2].held, [w.held for w in workers]
    sim.check_invariants()


def test_of_the_hosts_holding_a_task_s_inputs_the_one_holding_the_most_takes_it() -> None:
    sim, on_a, on_b = hosts_cluster()
    client = sim.add_client()
    hosts = sim.core.state.object_hosts
    hosts.made(X, "host-a")
    hosts.made(Y, "host-b")
    hosts.made(ObjectID(b"z" * 16), "host-b")
    sim.submit(client, [data_task(client.peer, 1, X, Y, ObjectID(b"z" * 16))])  # load alone: a0; b holds two
    assert on_b[0].held + on_b[1].held == [tid(1)] and on_a[0].held == on_a[1].held == []
    sim.check_invariants()


def test_a_reader_whose_worker_died_is_counted_by_no_worker_until_placed_again() -> None:
    """A reader placed by its inputs counts among its worker's readers; when that worker dies the task is queued again,
    counted by none, and counted by the worker it is placed on next (checked with the count cleared only when the
    worker is still known: check_invariants finds the queued task still counted)."""
    sim, on_a, on_b = hosts_cluster()
    client = sim.add_client()
    sim.core.state.object_hosts.made(X, "host-a")
    sim.submit(client, [data_task(client.peer, 1, X)])
    (holder,) = [worker for worker in on_a if tid(1) in worker.held]
    sim.submit(client, [task(client.peer, 10 + number) for number in range(3)])  # every other worker busy
    assert all(worker.held for worker in [*on_a, *on_b])
    sim.check_invariants()
    sim.kill(holder)
    assert all(tid(1) not in worker.held for worker in [*on_a, *on_b])  # queued: no worker has room
    sim.check_invariants()
    sim.finish(on_b[0])
    assert on_b[0].held == [tid(1)]
    sim.check_invariants()
    for worker in [*on_a, *on_b]:
        while worker.alive and worker.held:
            sim.finish(worker)
    assert all(record.readers == 0 for record in sim.core.state.workers.values())
    sim.check_invariants()
