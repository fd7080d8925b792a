"""Batching between the scheduler's shell (`zmq_async.Outbox`) and a processor's link, with the real scheduler server
and worker agent on the in-memory network, whose traffic shows every multipart message: the tasks the scheduler sends
a processor in one loop turn leave as one message, in one part. The offload path's batch window is in
test_offload_executor.py; a processor's results held to leave together are in tests/unit/worker/
test_processor_link.py."""

from __future__ import annotations

import pytest

from scaler.io.zmq_async import Outbox
from scaler.protocol import codec
from scaler.protocol import messages as m
from scaler.scheduler.core import client_sessions
from scaler_rehearsal.testing.memory_network import Delivery
from scaler_rehearsal.testing.simulated_stack import SCHEDULER_ADDRESS, SimulatedStack

LINK = "Worker|SIM|w1/w1-0"  #: the link of the worker's processor
SCHEDULER = f"router@{SCHEDULER_ADDRESS}"


def most_per_message(traffic: list[Delivery], sender: str, receiver: str, kind: type) -> int:
    """The most messages of `kind` that one multipart message from `sender` to `receiver` carried."""
    counts = [
        sum(isinstance(codec.decode(part), kind) for frame in delivery.frames for part in codec.split(frame))
        for delivery in traffic
        if delivery.sender == sender and delivery.receiver == receiver
    ]
    return max(counts, default=0)


@pytest.mark.parametrize("coalescing", [True, False], ids=["coalescing", "coalescing-off"])
def test_tasks_leave_the_scheduler_together(coalescing: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """200 tiny tasks on one worker. Checked with the mechanism off (`coalescing-off`: every frame an Outbox is given
    leaves at once, as a message of its own): one task per message."""
    if not coalescing:
        send = Outbox.send

        def send_at_once(self: Outbox, peer: bytes, frame: bytes, may_wait: bool = False) -> None:
            send(self, peer, frame)
            self.flush()

        monkeypatch.setattr(Outbox, "send", send_at_once)
    stack = SimulatedStack()

    async def scenario() -> None:
        await stack.start(workers=1)
        client = await stack.client()
        futures = client.submit([stack.task(client, seconds=0.0001, function="tiny") for _ in range(200)])
        await stack.until(lambda: all(future.done() for future in futures), "every result")
        assert all(future.result is not None for future in futures)

    stack.run(scenario())
    tasks_together = most_per_message(stack.network.traffic, SCHEDULER, LINK, m.Task)
    if coalescing:
        assert tasks_together > 10, "the tasks the worker has credit for leave in one message"
        # and in one part: ZeroMQ's and CURVE's costs are per part (codec.split reads the messages back)
        batches = [d for d in stack.network.traffic if d.sender == SCHEDULER and d.receiver == LINK]
        assert max(len(codec.split(d.frames[0])) for d in batches) > 10 and all(len(d.frames) == 1 for d in batches)
    else:
        assert tasks_together == 1


def answers_per_message(traffic: list[Delivery], receiver: str) -> list[int]:
    """How many answers (TaskResults) each message from the scheduler to `receiver` carried, in order."""
    counts = [
        sum(isinstance(codec.decode(part), m.TaskResult) for frame in delivery.frames for part in codec.split(frame))
        for delivery in traffic
        if delivery.sender == SCHEDULER and delivery.receiver == receiver
    ]
    return [count for count in counts if count]


@pytest.mark.parametrize("waiting", [True, False], ids=["answers-wait", "answers-wait-off"])
def test_a_client_with_many_tasks_live_gets_its_answers_joined(waiting: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """100 tasks of a millisecond, one after another on one processor: each result reaches the scheduler alone. While
    the client has at least `ANSWERS_WAIT_AT_LIVE` tasks live, its answers wait for each other (10 ms: several leave
    together); its last ones leave one by one, at once. Checked with the rule off (`answers-wait-off`)."""
    if not waiting:
        monkeypatch.setattr(client_sessions, "ANSWERS_WAIT_AT_LIVE", 1 << 30)
    stack = SimulatedStack()

    async def scenario() -> None:
        await stack.start(workers=1)
        client = await stack.client()
        futures = client.submit([stack.task(client, seconds=0.001, function="ms") for _ in range(100)])
        await stack.until(lambda: all(future.done() for future in futures), "every result")

    stack.run(scenario())
    receivers = {d.receiver for d in stack.network.traffic if d.sender == SCHEDULER and d.receiver.startswith("Client")}
    assert len(receivers) == 1
    counts = answers_per_message(stack.network.traffic, receivers.pop())
    assert sum(counts) == 100
    if waiting:
        assert max(counts) > 3, counts
        assert counts[-client_sessions.ANSWERS_WAIT_AT_LIVE + 1 :] == [1] * (client_sessions.ANSWERS_WAIT_AT_LIVE - 1)
    else:
        assert max(counts) == 1, counts
