"""Batching between the shells (`zmq_async.Outbox`), with the real scheduler server and worker agent on the in-memory
network, whose traffic shows every multipart message: the tasks the scheduler sends a worker in one loop turn leave
as one message, and a busy worker's results leave together (held up to 1 ms while more are coming). The worker's
processors send their results through it here (`direct_results=False`); results straight from processors are in
test_direct_results_stack.py. The offload path's batch window is in test_offload_executor.py."""

from __future__ import annotations

import pytest

from scaler.io.zmq_async import Outbox
from scaler.protocol import codec
from scaler.protocol import messages as m
from scaler.testing.memory_network import Delivery
from scaler.testing.simulated_stack import SCHEDULER_ADDRESS, SimulatedStack

WORKER = "Worker|SIM|w1"
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
def test_tasks_leave_the_scheduler_together_and_results_leave_the_worker_together(
    coalescing: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """200 tiny tasks on one worker. Checked with the mechanism off (`coalescing-off`: every frame an Outbox is given
    leaves at once, as a message of its own): one task and one result per message."""
    if not coalescing:
        send = Outbox.send

        def send_at_once(self: Outbox, peer: bytes, frame: bytes) -> None:
            send(self, peer, frame)
            self.flush()

        monkeypatch.setattr(Outbox, "send", send_at_once)
    stack = SimulatedStack()

    async def scenario() -> None:
        await stack.start(workers=1, direct_results=False)
        client = await stack.client()
        futures = client.submit([stack.task(client, seconds=0.0001, function="tiny") for _ in range(200)])
        await stack.until(lambda: all(future.done() for future in futures), "every result")
        assert all(future.result is not None for future in futures)

    stack.run(scenario())
    tasks_together = most_per_message(stack.network.traffic, SCHEDULER, WORKER, m.Task)
    results_together = most_per_message(stack.network.traffic, WORKER, SCHEDULER, m.TaskResult)
    if coalescing:
        assert tasks_together > 10, "the tasks the worker has credit for leave in one message"
        assert results_together > 1, "a busy worker's results leave together"
        # and in one part: ZeroMQ's and CURVE's costs are per part (codec.split reads the messages back)
        batches = [d for d in stack.network.traffic if d.sender == SCHEDULER and d.receiver == WORKER]
        assert max(len(codec.split(d.frames[0])) for d in batches) > 10 and all(len(d.frames) == 1 for d in batches)
    else:
        assert (tasks_together, results_together) == (1, 1)
