"""#38 finding 4, on the simulation tier: the real scheduler server and core, real worker agents and the real client
core on simulated time. A client with no worker and no manager gets, within a few seconds, the scheduler's warning
on the stderr stream of one of its tasks (which every client prints); a capability task with only plain workers fails
with NO_WORKER naming it at the grace period; and a scheduler killed and started again does not fail the tasks its
clients submit again while a worker that can run them is still connecting (the grace starts when the new instance
first finds them unserved).

Checked by switching the mechanism off: with `UnservedWork.on_tick` returning at once, the first two fail (no warning;
the task never ends); with the grace counted from the instance's clock origin (`_Episode(now)` replaced by
`_Episode(0.0)`), the restart test fails (the tasks fail at the new instance's first tick)."""

from __future__ import annotations

import dataclasses

from scaler.policy.capability import parse_capabilities
from scaler.policy.content import Allocation
from scaler.protocol import messages as m
from scaler.scheduler.core.unserved_work import warning_text
from scaler_rehearsal.testing.simulated_stack import SimulatedStack

GPU = parse_capabilities("gpu")


def test_a_client_alone_is_warned_within_seconds() -> None:
    stack = SimulatedStack()

    async def scenario() -> None:
        stack.start_storage()
        stack.start_scheduler()
        client = await stack.client()
        futures = client.submit([stack.task(client, seconds=1.0) for _ in range(2)])
        await stack.until(lambda: bool(client.logs), "the scheduler's warning", within=10)
        (log,) = client.logs
        assert log.stream is m.LogStream.STDERR and log.task_id == futures[0].task_id
        assert warning_text(log).startswith("2 task(s) of this client wait: no worker and no worker manager")
        assert 5 <= stack.clock.now() < 7, "within a few seconds"
        stack.add_worker("w1")
        await stack.until(lambda: all(future.done() for future in futures), "the tasks, once a worker connects")
        assert [future.result.status for future in futures if future.result] == [m.ResultStatus.SUCCESS] * 2

    stack.run(scenario())


def test_a_capability_no_worker_offers_fails_naming_it() -> None:
    stack = SimulatedStack()

    async def scenario() -> None:
        stack.start_storage()
        stack.start_scheduler(allocate=Allocation.CAPABILITY, unrunnable_grace_seconds=20)
        stack.add_worker("plain")
        await stack.until(lambda: stack.registered_workers() == 1, "the plain worker")
        client = await stack.client()
        submitted = stack.clock.now()
        (future,) = client.submit([dataclasses.replace(stack.task(client, seconds=1.0), capabilities=GPU)])
        await stack.until(future.done, "the task to fail", within=60)
        answer = future.result
        assert answer is not None and answer.status is m.ResultStatus.NO_WORKER
        assert "no worker has the capabilities gpu and no worker manager declares them" in answer.error_message
        assert 20 <= stack.clock.now() - submitted < 22
        assert any("they fail in" in warning_text(log) for log in client.logs), "warned before"

    stack.run(scenario())


def test_tasks_submitted_again_after_a_restart_wait_for_a_worker_that_connects_within_the_grace() -> None:
    """The scheduler and the gpu worker are killed together; the scheduler comes back 15 s later, its client submits
    its tasks again, and a new gpu worker connects 5 s after that (a manager replacing it): nothing fails, since
    the new instance's grace (10 s) starts when it first finds the tasks unserved."""
    stack = SimulatedStack()

    async def scenario() -> None:
        stack.start_storage()
        stack.start_scheduler(allocate=Allocation.CAPABILITY, unrunnable_grace_seconds=10)
        stack.add_worker("plain")
        stack.add_worker("gpu", capabilities=GPU)
        await stack.until(lambda: stack.registered_workers() == 2, "both workers")
        client = await stack.client()
        futures = client.submit([dataclasses.replace(stack.task(client, seconds=2.0), capabilities=GPU)
                                 for _ in range(3)])  # fmt: skip
        await stack.until(lambda: len(stack.log.runs) >= 1, "a task running")
        stack.kill_scheduler()
        stack.kill_worker("gpu")
        await stack.clock.sleep(15.0)
        core = stack.start_scheduler(allocate=Allocation.CAPABILITY, unrunnable_grace_seconds=10)
        await stack.until(lambda: len(core.tasks.queue) == 3, "the client's tasks submitted again")
        await stack.clock.sleep(5.0)
        stack.add_worker("gpu2", capabilities=GPU)
        await stack.until(lambda: all(future.done() for future in futures), "every future", within=120)
        assert [future.result.status for future in futures if future.result] == [m.ResultStatus.SUCCESS] * 3

    stack.run(scenario())
