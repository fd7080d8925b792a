"""The scheduler core and a worker's processors' own links (docs/protocol.md section 3.7): a processor registers
while its worker is registered, what it sends counts as its worker's, the worker's next heartbeat echo names the
results read from it, and the link goes with its worker.

Checked with each mechanism off, by hand: with `WorkerSessions.on_processor_result` not appending to
`results_read`, the echo test fails; with `_register_processor` accepting any worker id, the refusal test fails;
with `drop_worker` keeping the worker's processors, the test of a worker that dies fails."""

from __future__ import annotations

from scaler.protocol import messages as m
from scaler.protocol.ids import PeerID
from scaler.scheduler.core.effects import Send
from scaler.scheduler.core.events import PeerLost
from scaler.testing.simulation import FakeWorker, SimulatedCluster, hello, success, task


def sent_to(sim: SimulatedCluster, peer: bytes, kind: type) -> list:  # type: ignore[type-arg]
    return [e.message for e in sim.effects if isinstance(e, Send) and e.peer == peer and isinstance(e.message, kind)]


def link_of(sim: SimulatedCluster, worker: FakeWorker, processor: bytes = b"p1") -> bytes:
    """A processor of `worker` says hello on its own link; its identity."""
    peer = worker.peer + b"/" + processor
    sim.send(peer, hello(m.ProcessorInfo(processor, worker.peer)))
    return peer


def test_a_processor_result_counts_as_its_workers_and_the_next_echo_names_it() -> None:
    sim = SimulatedCluster()
    client = sim.add_client()
    worker = sim.add_worker(capacity=2)
    link = link_of(sim, worker)
    (reply,) = sent_to(sim, link, m.HelloReply)
    assert reply.accepted
    sim.submit(client, [task(client.peer, 1), task(client.peer, 2)])
    first, second = worker.held
    sim.send(link, success(first))
    assert client.answers[first] == [("result", "success")]
    assert sim.core.workers[worker.peer].assigned == {second}, "its slot is free again"
    sim.send(worker.peer, m.Heartbeat())
    echo = sent_to(sim, worker.peer, m.HeartbeatEcho)[-1]
    assert echo.results_read == (first,)
    sim.send(worker.peer, m.Heartbeat())
    assert sent_to(sim, worker.peer, m.HeartbeatEcho)[-1].results_read == (), "each is named once"
    sim.check_invariants()


def test_a_result_already_had_from_the_processor_is_ignored_when_the_agent_sends_it_again() -> None:
    sim = SimulatedCluster()
    client = sim.add_client()
    worker = sim.add_worker()
    link = link_of(sim, worker)
    sim.submit(client, [task(client.peer, 1)])
    (task_id,) = worker.held
    sim.send(link, success(task_id))
    sim.send(worker.peer, success(task_id))
    assert client.answers[task_id] == [("result", "success")]
    sim.check_invariants()


def test_a_processor_of_a_worker_not_registered_is_refused_and_its_messages_get_unknown_peer() -> None:
    sim = SimulatedCluster()
    sim.add_client()
    link = b"Worker|SIM|ghost/p1"
    sim.send(link, hello(m.ProcessorInfo(b"p1", b"Worker|SIM|ghost")))
    (reply,) = sent_to(sim, link, m.HelloReply)
    assert not reply.accepted and "not registered" in reply.reason
    sim.send(link, success(task(b"Client|c", 1).task_id))
    (error,) = sent_to(sim, link, m.ProtocolError)
    assert error.kind is m.ProtocolErrorKind.UNKNOWN_PEER
    assert not sim.core.processors


def test_a_processor_link_goes_with_its_worker() -> None:
    sim = SimulatedCluster()
    client = sim.add_client()
    worker = sim.add_worker()
    link = link_of(sim, worker)
    sim.submit(client, [task(client.peer, 1)])
    (task_id,) = worker.held
    sim.kill(worker)
    assert not sim.core.processors
    sim.send(link, success(task_id))  # too late: the task went back to the queue
    assert sent_to(sim, link, m.ProtocolError)[-1].kind is m.ProtocolErrorKind.UNKNOWN_PEER
    assert client.answers[task_id] == []
    sim.check_invariants()


def test_a_processor_link_that_closes_leaves_its_worker_registered() -> None:
    sim = SimulatedCluster()
    worker = sim.add_worker()
    link = link_of(sim, worker)
    sim.feed(PeerLost(PeerID(link), "closed", sim.now))
    assert not sim.core.processors and worker.peer in sim.core.workers
    assert not sim.core.workers[worker.peer].processors


def test_a_connection_registered_as_a_worker_cannot_say_it_is_a_processor() -> None:
    sim = SimulatedCluster()
    worker = sim.add_worker()
    sim.send(worker.peer, hello(m.ProcessorInfo(b"p1", worker.peer)))
    reply = sent_to(sim, worker.peer, m.HelloReply)[-1]
    assert not reply.accepted and "already registered as a worker" in reply.reason


def test_a_processor_link_carries_results_and_logs_only() -> None:
    sim = SimulatedCluster()
    lent = {m.ProcessorBlocked, m.ProcessorResumeRequest, m.TaskReturn, m.TaskCancelConfirm, m.WorkerLeaving}
    assert set(sim.core._processor_handlers) == {m.TaskResult, m.TaskLog} | lent
    worker = sim.add_worker()
    link = link_of(sim, worker)
    sim.send(link, m.Heartbeat())
    error = sent_to(sim, link, m.ProtocolError)[-1]
    assert error.kind is m.ProtocolErrorKind.UNEXPECTED and worker.peer in sim.core.workers
