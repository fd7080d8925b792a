"""The results a worker sent that its scheduler may not have read (pure): kept until a heartbeat sent after them
is answered, and sent again to a scheduler that restarted, since one that died may never have read them."""

from __future__ import annotations

import collections
from collections.abc import Iterator

from scaler.protocol import messages as m
from scaler.protocol.ids import TaskID

#: Results kept for sending again after a scheduler restart, at most (the oldest go first).
MAX_UNACKNOWLEDGED_RESULTS = 100_000


class ResultJournal:
    """Results by send order, and the heartbeat whose echo proves which of them the scheduler read."""

    def __init__(self, limit: int = MAX_UNACKNOWLEDGED_RESULTS) -> None:
        self._limit = limit
        #: (send number, result) since the last heartbeat the scheduler answered, oldest first
        self._unacknowledged: collections.deque[tuple[int, m.TaskResult]] = collections.deque()
        self._sent = 0
        self._heartbeat_marker: int | None = None  #: results sent before the heartbeat in flight

    def sent(self, result: m.TaskResult) -> None:
        """A result left for the scheduler."""
        self._unacknowledged.append((self._sent, result))
        self._sent += 1
        if len(self._unacknowledged) > self._limit:
            self._unacknowledged.popleft()

    def heartbeat_sent(self) -> None:
        """A heartbeat left: the oldest one in flight marks the results before it (its echo is proof enough)."""
        if self._heartbeat_marker is None:
            self._heartbeat_marker = self._sent

    def acknowledged(self) -> None:
        """The scheduler answered a heartbeat: every result sent before that heartbeat reached it."""
        marker = self._heartbeat_marker
        if marker is None:
            return
        self._heartbeat_marker = None
        while self._unacknowledged and self._unacknowledged[0][0] < marker:
            self._unacknowledged.popleft()

    def unacknowledged(self) -> Iterator[m.TaskResult]:
        """The results the scheduler may not have read, in the order they were sent."""
        return (result for _, result in self._unacknowledged)

    def task_ids(self) -> Iterator[TaskID]:
        return (result.task_id for _, result in self._unacknowledged)

    def __len__(self) -> int:
        return len(self._unacknowledged)
