"""What the core publishes on the monitor feed (docs/protocol.md section 2.3) and the little it keeps for it.

Every status interval: the read model (topic `status`), the task transitions noted since the previous
publication (topic `tasks`, bounded by the task table), and the scaling decisions made since then (topic
`scaling`). The latest `DECISIONS_KEPT` decisions are kept so that a new reader sees recent ones too.

Only watched topics are published (`events.Watchers`: the shell knows from its publisher which topics have a
subscriber): nobody reads the status, no view is built for it. A topic that gains a subscriber is published at the
next tick, from the whole core (a late subscriber sees every worker, not what changed since it came); decisions
made while nobody read them go out then, the latest `DECISIONS_KEPT`.
"""

from __future__ import annotations

import collections

from scaler.protocol import messages as m
from scaler.protocol.feed import SCALING_TOPIC, STATUS_TOPIC, TASKS_TOPIC
from scaler.scheduler.core.effects import Publish

#: Scaling decisions kept for the monitor feed.
DECISIONS_KEPT = 50


class MonitorFeed:
    def __init__(self, status_interval_seconds: float) -> None:
        self.status_interval_seconds = status_interval_seconds
        #: the latest changes of managers' targets with their reasons, oldest first
        self.decisions: collections.deque[m.ScalingDecision] = collections.deque(maxlen=DECISIONS_KEPT)
        self._decisions_made = 0
        self._decisions_published = 0
        self._last_status_at: float | None = None
        #: the topics with a subscriber (None: never told, everything is published)
        self.watched: frozenset[bytes] | None = None

    def watch(self, topics: frozenset[bytes]) -> None:
        """The topics with a subscriber now; a newly watched one is published at the next tick."""
        before = self.watched
        self.watched = topics
        if before is not None and any(self.is_watched(topic) and not _covered(topic, before) for topic in _TOPICS):
            self._last_status_at = None

    def is_watched(self, topic: bytes) -> bool:
        return self.watched is None or _covered(topic, self.watched)

    def is_due(self, now: float) -> bool:
        """True once per status interval (the first tick included); the caller then publishes."""
        if self._last_status_at is not None and now - self._last_status_at < self.status_interval_seconds:
            return False
        self._last_status_at = now
        return True

    def decided(self, decision: m.ScalingDecision) -> None:
        self.decisions.append(decision)
        self._decisions_made += 1

    def publications(
        self, view: m.StatusSnapshot | None, transitions: tuple[m.TaskTransition, ...], dropped: int, wall_time: float
    ) -> list[Publish]:
        """The status (`view`: None when its topic is not watched), then transitions and decisions when there is
        something new and someone watches them."""
        published = [Publish(view)] if view is not None else []
        if (transitions or dropped) and self.is_watched(TASKS_TOPIC):
            published.append(Publish(m.TaskTransitions(transitions, dropped, wall_time)))
        if self._decisions_made != self._decisions_published and self.is_watched(SCALING_TOPIC):
            fresh = min(self._decisions_made - self._decisions_published, len(self.decisions))
            self._decisions_published = self._decisions_made
            published.append(Publish(m.ScalingDecisions(tuple(self.decisions)[-fresh:], wall_time)))
        return published


_TOPICS = (STATUS_TOPIC, TASKS_TOPIC, SCALING_TOPIC)


def _covered(topic: bytes, subscriptions: frozenset[bytes]) -> bool:
    """Whether a subscription receives `topic` (ZeroMQ matches subscriptions as prefixes)."""
    return any(topic.startswith(subscription) for subscription in subscriptions)
