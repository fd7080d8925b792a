"""What the core publishes on the monitor feed (docs/protocol.md section 2.3) and the little it keeps for it.

Every status interval: the read model (topic `status`), the task transitions noted since the previous
publication (topic `tasks`, bounded by the task table), and the scaling decisions made since then (topic
`scaling`). The latest `DECISIONS_KEPT` decisions are kept so that a new reader sees recent ones too.
"""

from __future__ import annotations

import collections

from scaler.protocol import messages as m
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
        self, view: m.StatusSnapshot, transitions: tuple[m.TaskTransition, ...], dropped: int, wall_time: float
    ) -> list[Publish]:
        """The status, then transitions and decisions when there is something new."""
        published = [Publish(view)]
        if transitions or dropped:
            published.append(Publish(m.TaskTransitions(transitions, dropped, wall_time)))
        if self._decisions_made != self._decisions_published:
            fresh = min(self._decisions_made - self._decisions_published, len(self.decisions))
            self._decisions_published = self._decisions_made
            published.append(Publish(m.ScalingDecisions(tuple(self.decisions)[-fresh:], wall_time)))
        return published
