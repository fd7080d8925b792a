"""The scheduler's monitor feed, read the way `scaler_top` and the dashboard read it: topics, the feed
version, wall-clock stamps, task transitions and scaling decisions with their reasons, on a real stack."""

from __future__ import annotations

import time

import pytest

from scaler import Client
from scaler.io.sockets import SocketFactory, bound_endpoint
from scaler.monitor.feed import FeedReader, FeedVersionError
from scaler.protocol import codec
from scaler.protocol import messages as m
from scaler.protocol.feed import STATUS_TOPIC
from tests.integration.conftest import COLD_START_SECONDS, Launcher, ProcessWatch, session_security, wait_for
from tests.integration.manager_harness import start_manager

pytestmark = pytest.mark.integration


def double(value: int) -> int:
    time.sleep(0.05)
    return value * 2


@pytest.mark.timeout(120)
def test_the_feed_shows_status_transitions_and_scaling_decisions_of_an_elastic_map(
    launcher: Launcher, processes: ProcessWatch
) -> None:
    addresses, _, _ = launcher.stack(workers=0, scheduler_args=("--policy-content", "allocate=even_load; scaling=work"))
    start_manager(launcher, addresses, "feed-test", "-mtc", "2")
    with (
        FeedReader(addresses.monitor, security=session_security("client")) as reader,
        Client(address=addresses.scheduler) as client,
    ):
        started = time.time()
        results = client.map(double, range(40))
        received = reader.messages(3.0)
        deadline = time.monotonic() + 30
        while not any(isinstance(x, m.ScalingDecisions) for x in received) and time.monotonic() < deadline:
            received += reader.messages(1.0)
    assert results == [n * 2 for n in range(40)]
    statuses = [x for x in received if isinstance(x, m.StatusSnapshot)]
    assert statuses and all(x.feed_version == m.FEED_VERSION for x in received)
    assert all(started - 60 < x.wall_time < time.time() + 60 for x in statuses), "not wall-clock time"
    assert any(function.name == "double" for status in statuses for function in status.functions)
    assert any(count.name == "Task" and count.received for status in statuses for count in status.message_counts)
    transitions = [t for x in received if isinstance(x, m.TaskTransitions) for t in x.transitions]
    states = {t.state for t in transitions}
    assert {"queued", "dispatched", "success"} <= states, states
    assert all(t.function_name == "double" for t in transitions)
    decisions = [d for x in received if isinstance(x, m.ScalingDecisions) for d in x.decisions]
    assert any(d.manager_id == "feed-test" and d.to_workers > d.from_workers for d in decisions), decisions
    assert all("work policy" in d.reason for d in decisions if d.to_workers > d.from_workers)


@pytest.mark.timeout(30)
def test_a_feed_of_another_version_is_refused_with_a_clear_message() -> None:
    sockets = SocketFactory()
    publisher = sockets.publisher("tcp://127.0.0.1:0")
    address = bound_endpoint(publisher)
    future_snapshot = m.StatusSnapshot(1.0, m.SchedulerStats(), feed_version=m.FEED_VERSION + 1)
    try:
        with FeedReader(address, topics=(STATUS_TOPIC,), security=None) as reader:  # a plain publisher
            deadline = time.monotonic() + 10
            while True:  # a subscription takes a moment to reach the publisher
                publisher.send_multipart([STATUS_TOPIC, codec.encode(future_snapshot)])
                try:
                    if reader.receive(0.1) is not None:
                        pytest.fail("a snapshot of another feed version was accepted")
                except FeedVersionError as error:
                    assert f"version {m.FEED_VERSION + 1}" in str(error) and "same scaler version" in str(error)
                    break
                assert time.monotonic() < deadline, "nothing reached the reader"
    finally:
        publisher.close()
        sockets.close()


def inc(value: int) -> int:
    return value + 1


@pytest.mark.timeout(180)
def test_a_flood_of_tasks_gives_subscribers_bounded_batches_and_a_stalled_subscriber_only_loses_messages(
    launcher: Launcher,
) -> None:
    from scaler.io.sockets import MONITOR_HIGH_WATER_MARK
    from scaler.scheduler.core.task_table import TRANSITIONS_PER_PUBLICATION

    addresses, _scheduler, _storage = launcher.stack(workers=2)
    stalled = FeedReader(
        addresses.monitor, security=session_security("client")
    )  # subscribes and never reads during the flood
    reader = FeedReader(addresses.monitor, security=session_security("client"))
    tasks = 20_000
    try:
        for subscriber in (stalled, reader):  # each subscription reached the publisher: a status arrives
            wait_for(lambda subscriber=subscriber: subscriber.receive(0.2) is not None, "a first message of the feed")
        with Client(address=addresses.scheduler) as client:
            futures = [client.submit(inc, x) for x in range(tasks)]
            batches: list[m.TaskTransitions] = []
            while not all(future.done() for future in futures[-100:]):
                message = reader.receive(0.05)
                if isinstance(message, m.TaskTransitions):
                    batches.append(message)
            assert [future.result() for future in futures] == [x + 1 for x in range(tasks)]
        deadline, quiet_since = time.monotonic() + 10, time.monotonic()
        while time.monotonic() < deadline and time.monotonic() - quiet_since < 1.5:  # until the feed is quiet
            message = reader.receive(0.2)
            if isinstance(message, m.TaskTransitions):
                batches.append(message)
                quiet_since = time.monotonic()
        assert batches, "the flood was reported"
        assert max(len(batch.transitions) for batch in batches) <= TRANSITIONS_PER_PUBLICATION
        shown = sum(len(batch.transitions) for batch in batches)
        dropped = sum(batch.dropped for batch in batches)
        assert dropped > 0 and shown + dropped >= 3 * tasks, "queued, dispatched, success: each shown or counted"
        held = 0
        while stalled.receive(0.2) is not None:
            held += 1
        assert held <= 2 * MONITOR_HIGH_WATER_MARK, "a stalled subscriber's backlog is bounded (it loses old ones)"
    finally:
        stalled.close()
        reader.close()


@pytest.mark.timeout(120)
def test_a_subscriber_that_comes_when_nobody_read_the_feed_sees_every_worker(
    launcher: Launcher, processes: ProcessWatch
) -> None:
    """The scheduler builds the status only while someone subscribes (an XPUB tells it, issue 58): a reader that comes
    after the last one left gets a status of the whole cluster, the workers that registered meanwhile included."""
    addresses, _, _ = launcher.stack(workers=1)  # waits for it with a reader of its own, which then leaves
    launcher.cluster(addresses.scheduler, 1, "-his", "0.5")  # another registers while nobody reads
    with Client(address=addresses.scheduler) as client:  # told the count at each heartbeat's echo, not by the feed
        wait_for(lambda: client.session.worker_count == 2, "two workers registered", COLD_START_SECONDS)
    with FeedReader(addresses.monitor, topics=(STATUS_TOPIC,), security=session_security("client")) as reader:
        first = None
        deadline = time.monotonic() + 30
        while first is None and time.monotonic() < deadline:
            message = reader.receive(1.0)
            if isinstance(message, m.StatusSnapshot):
                first = message
    assert first is not None, "no status came to a subscriber"
    assert len(first.workers) == 2, [worker.worker_id for worker in first.workers]
