"""What the core publishes on the monitor feed: status, bounded transition batches, scaling decisions,
and nothing for topics nobody reads."""

from __future__ import annotations

from scaler.protocol import messages as m
from scaler.protocol.feed import (
    FEED_VERSION,
    FeedMessage,
    FeedTopic,
    ScalingDecision,
    SchedulerView,
    TaskStatus,
    TransitionBatch,
)
from scaler.protocol.ids import TaskID
from scaler.scheduler.core.effects import Effect, Publish
from scaler.scheduler.core.events import FeedSubscriptions, Tick
from scaler.scheduler.core.scheduler_core import CoreSettings
from scaler.scheduler.scaling_hook import make_scaling_hook
from scaler.testing.simulation import PYTHON, SimulatedCluster, hello, task


def published(effects: list[Effect]) -> list[FeedMessage]:
    return [effect.message for effect in effects if isinstance(effect, Publish)]


def of_topic(effects: list[Effect], topic: FeedTopic) -> list[FeedMessage]:
    return [message for message in published(effects) if message.topic is topic]


def tid(number: int) -> TaskID:
    return TaskID(number.to_bytes(16, "big"))


def test_a_tasks_transitions_reach_the_feed_in_order_with_worker_and_wall_time() -> None:
    sim = SimulatedCluster()
    sim.feed(Tick(0.0, wall_time=5000.0))
    client, worker = sim.add_client(), sim.add_worker()
    sim.submit(client, [task(client.peer, 1)])
    sim.advance(0.5)
    sim.finish(worker)
    (message,) = of_topic(sim.advance(0.25), FeedTopic.TRANSITIONS)
    assert message.version == FEED_VERSION and message.wall_time == 5000.75
    batch = message.body
    assert isinstance(batch, TransitionBatch) and batch.dropped == 0
    assert [(t.task_id, t.status, t.worker_id, t.wall_time) for t in batch.transitions] == [
        (tid(1), TaskStatus.SUCCESS, worker.peer, 5000.5),
    ]
    (first,) = [m.body for m in published(sim.effects) if m.topic is FeedTopic.TRANSITIONS][:1]
    assert isinstance(first, TransitionBatch)
    assert [(t.status, t.worker_id) for t in first.transitions] == [
        (TaskStatus.QUEUED, b""),
        (TaskStatus.RUNNING, worker.peer),
    ]


def test_a_batch_is_bounded_and_counts_what_it_dropped() -> None:
    sim = SimulatedCluster(CoreSettings("s", "o", PYTHON, feed_transitions_per_batch=10))
    client = sim.add_client()
    sim.submit(client, [task(client.peer, n) for n in range(25)])
    (message,) = of_topic(sim.advance(0.25), FeedTopic.TRANSITIONS)
    assert isinstance(message.body, TransitionBatch)
    assert (len(message.body.transitions), message.body.dropped) == (10, 15)
    assert [t.task_id for t in message.body.transitions] == [tid(n) for n in range(10)]  # the oldest first
    assert not of_topic(sim.advance(0.25), FeedTopic.TRANSITIONS), "nothing new: no batch"


def test_nothing_is_built_for_topics_nobody_reads() -> None:
    sim = SimulatedCluster()
    sim.feed(FeedSubscriptions(frozenset()))
    client = sim.add_client()
    sim.add_worker()
    sim.submit(client, [task(client.peer, 1)])
    assert not published(sim.advance(5.0))
    assert sim.core.tasks.log is None and not sim.core.feed.transitions.entries

    sim.feed(FeedSubscriptions(frozenset({FeedTopic.STATUS})))
    effects = sim.advance(0.25)
    assert [message.topic for message in published(effects)] == [FeedTopic.STATUS], "a new reader gets a status"
    assert not published(sim.advance(0.25)), "then one per status interval"
    assert of_topic(sim.advance(1.0), FeedTopic.STATUS)


def test_the_status_is_the_view() -> None:
    sim = SimulatedCluster()
    sim.add_worker()
    (message,) = of_topic(sim.advance(1.0), FeedTopic.STATUS)
    assert isinstance(message.body, SchedulerView)
    assert message.body == sim.core.view()


def test_each_scaling_decision_is_published_as_it_is_made() -> None:
    sim = SimulatedCluster(scaling=make_scaling_hook("simple", "allocate=even_load; scaling=work"))
    sim.send(b"manager", hello(m.ManagerInfo("native")))
    client = sim.add_client()
    sim.submit(client, [task(client.peer, n) for n in range(3)])
    (message,) = of_topic(sim.advance(0.25), FeedTopic.DECISIONS)
    decision = message.body
    assert isinstance(decision, ScalingDecision)
    assert (decision.manager_id, decision.workers_before, decision.workers_after) == ("native", 0, 3)
    assert "3 tasks" in decision.reason
    sim.feed(FeedSubscriptions(frozenset({FeedTopic.STATUS})))
    sim.submit(client, [task(client.peer, n) for n in range(3, 5)])
    assert not of_topic(sim.advance(0.25), FeedTopic.DECISIONS), "nobody reads decisions"
    assert [d.workers_after for d in sim.core.view().decisions] == [0, 3, 5], "the view keeps them anyway"
