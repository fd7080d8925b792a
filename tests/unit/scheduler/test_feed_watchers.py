"""The monitor feed publishes only what someone reads (events.Watchers, monitor_feed.py; issue 58): no status view is
built while nobody subscribes, and a subscriber that comes late gets the whole cluster at the next tick."""

from __future__ import annotations

from scaler.protocol import messages as m
from scaler.protocol.feed import SCALING_TOPIC, STATUS_TOPIC, TASKS_TOPIC
from scaler.scheduler.core.effects import Publish
from scaler.scheduler.core.events import Watchers
from scaler.scheduler.core.scheduler_core import CoreSettings
from scaler_rehearsal.testing.simulation import PYTHON, SimulatedCluster, task


def published(effects: list[object], kind: type) -> list[object]:
    return [effect.message for effect in effects if isinstance(effect, Publish) and isinstance(effect.message, kind)]


def test_nothing_is_built_or_published_while_nobody_watches() -> None:
    """Fails with the status built and published whatever the watchers (the core's tick before issue 58)."""
    sim = SimulatedCluster(CoreSettings("s", "o", PYTHON))
    sim.feed(Watchers(frozenset()))
    client = sim.add_client()
    for number in range(3):
        sim.add_worker(f"w{number}")
    sim.submit(client, [task(client.peer, 1)])
    built = sim.core.views._cached
    effects = sim.advance(1) + sim.advance(1)
    assert not [effect for effect in effects if isinstance(effect, Publish)]
    assert sim.core.views._cached is built, "no view was built for the feed"


def test_a_late_subscriber_sees_the_whole_cluster_at_the_next_tick() -> None:
    sim = SimulatedCluster(CoreSettings("s", "o", PYTHON))
    sim.feed(Watchers(frozenset()))
    client = sim.add_client()
    workers = [sim.add_worker(f"w{number}") for number in range(5)]
    sim.submit(client, [task(client.peer, number) for number in range(3)])
    sim.advance(1)
    sim.feed(Watchers(frozenset({STATUS_TOPIC})))
    (status,) = published(sim.advance(0.25), m.StatusSnapshot)  # at once, not an interval later
    assert {worker.worker_id for worker in status.workers} == {worker.peer for worker in workers}
    assert status.scheduler.running == 3 and [c.client_id for c in status.clients] == [client.peer]


def test_topics_follow_their_subscriptions_as_prefixes() -> None:
    sim = SimulatedCluster(CoreSettings("s", "o", PYTHON))
    sim.feed(Watchers(frozenset({TASKS_TOPIC})))
    client = sim.add_client()
    sim.add_worker()
    sim.submit(client, [task(client.peer, 1)])
    effects = sim.advance(1)
    assert published(effects, m.TaskTransitions) and not published(effects, m.StatusSnapshot)
    sim.feed(Watchers(frozenset({b""})))  # every topic (ZeroMQ matches by prefix)
    sim.submit(client, [task(client.peer, 2)])
    effects = sim.advance(1)
    assert published(effects, m.StatusSnapshot) and published(effects, m.TaskTransitions)
    assert SCALING_TOPIC.startswith(b"")


def test_a_core_never_told_publishes_everything() -> None:
    sim = SimulatedCluster(CoreSettings("s", "o", PYTHON))
    sim.add_worker()
    assert published(sim.advance(1), m.StatusSnapshot)
