"""What the scheduler core publishes on the monitor feed, and the little it keeps for it.

Three topics (`scaler.protocol.feed.FeedTopic`): the status (the `SchedulerView`) every status
interval, the task transitions of the last tick in one bounded batch, and each scaling decision as it
is made. The shell says which topics have subscribers (`FeedSubscriptions`); nothing is recorded or
built for a topic nobody reads, so an unobserved scheduler pays nothing for the feed. Until the shell
says otherwise every topic counts as read (tests and simulations see everything).

Bounded in rate: a batch carries at most `transitions_per_batch` transitions, the rest of the tick is
only counted (`TransitionBatch.dropped`), so a 100k-task map costs subscribers a few thousand
transitions per second at most.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from scaler.protocol.feed import (
    FEED_VERSION,
    FeedBody,
    FeedMessage,
    FeedTopic,
    ScalingDecision,
    SchedulerView,
    TaskStatus,
    TaskTransition,
    TransitionBatch,
)
from scaler.protocol.ids import PeerID, TaskID
from scaler.scheduler.core.effects import Publish

#: The latest scaling decisions kept for the status (new subscribers see them too).
DECISIONS_KEPT = 20


class TransitionLog:
    """Transitions since the last batch, up to `limit`; the rest are only counted."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.entries: list[tuple[TaskID, TaskStatus, PeerID | None, float]] = []
        self.dropped = 0

    def add(self, task_id: TaskID, status: TaskStatus, worker: PeerID | None, now: float) -> None:
        if len(self.entries) < self.limit:
            self.entries.append((task_id, status, worker, now))
        else:
            self.dropped += 1

    def take(self, wall_offset: float) -> TransitionBatch | None:
        """The batch since the previous one (monotonic times made wall-clock), or None when empty."""
        if not self.entries and not self.dropped:
            return None
        batch = TransitionBatch(
            tuple(
                TaskTransition(task_id, status, worker or b"", now + wall_offset)
                for task_id, status, worker, now in self.entries
            ),
            self.dropped,
        )
        self.entries, self.dropped = [], 0
        return batch


class MonitorFeed:
    def __init__(self, status_interval_seconds: float, transitions_per_batch: int) -> None:
        self.status_interval_seconds = status_interval_seconds
        self.wanted: frozenset[FeedTopic] = frozenset(FeedTopic)
        self.transitions = TransitionLog(transitions_per_batch)
        self.decisions: deque[ScalingDecision] = deque(maxlen=DECISIONS_KEPT)
        self._last_status_at: float | None = None

    def wants(self, topic: FeedTopic) -> bool:
        return topic in self.wanted

    def subscribed(self, topics: frozenset[FeedTopic]) -> TransitionLog | None:
        """The shell reports the topics read now; returns the log transitions go to (None: record none)."""
        if FeedTopic.TRANSITIONS not in topics:
            self.transitions.entries, self.transitions.dropped = [], 0
        if FeedTopic.STATUS in topics and FeedTopic.STATUS not in self.wanted:
            self._last_status_at = None  # a new reader gets a status at the next tick
        self.wanted = topics
        return self.transitions if FeedTopic.TRANSITIONS in topics else None

    def on_tick(self, now: float, wall_offset: float, view: Callable[[], SchedulerView]) -> list[Publish]:
        published: list[Publish] = []
        if self.wants(FeedTopic.TRANSITIONS):
            batch = self.transitions.take(wall_offset)
            if batch is not None:
                published.append(_publish(batch, now + wall_offset))
        is_due = self._last_status_at is None or now - self._last_status_at >= self.status_interval_seconds
        if self.wants(FeedTopic.STATUS) and is_due:
            self._last_status_at = now
            published.append(_publish(view(), now + wall_offset))
        return published

    def decided(self, decision: ScalingDecision) -> Publish | None:
        self.decisions.append(decision)
        return _publish(decision, decision.wall_time) if self.wants(FeedTopic.DECISIONS) else None


def _publish(body: FeedBody, wall_time: float) -> Publish:
    return Publish(FeedMessage(FEED_VERSION, wall_time, body))
