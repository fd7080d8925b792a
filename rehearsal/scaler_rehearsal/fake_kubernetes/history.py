"""The store's history, as etcd keeps it: every change in resourceVersion order, which a watch replays from a
resourceVersion and then follows; compacted (its oldest changes dropped) past a limit or on demand, after which a
watch or a continued list from before is answered 410 Gone.

Rules: the store calls every method under its one lock, in the order of its writes; a change offered here is never
changed afterwards (the store writes a new dict each time).
"""

from __future__ import annotations

from collections import deque

from scaler_rehearsal.fake_kubernetes import failures
from scaler_rehearsal.fake_kubernetes.watches import Change, Watch

#: How many changes the history keeps before the oldest are compacted away.
HISTORY_LIMIT = 20000


class History:
    def __init__(self, limit: int = HISTORY_LIMIT) -> None:
        self._changes: deque[Change] = deque()
        self._limit = limit
        self.compacted = 0  #: changes up to this revision are gone from the history
        self._watches: set[Watch] = set()

    def record(self, change: Change) -> None:
        """A new change: kept (the oldest dropped past the limit) and offered to every open watch."""
        self._changes.append(change)
        while len(self._changes) > self._limit:
            self.compacted = self._changes.popleft().revision
        for watch in list(self._watches):
            watch.offer(change)
            if watch.is_closed:
                self._watches.discard(watch)

    def follow(self, watch: Watch, since: int | None) -> None:
        """`watch` follows the changes from now on, after those since `since` (None: none replayed); one from a
        compacted revision gets an ERROR 410 instead, and ends."""
        if since is not None:
            if since < self.compacted:
                watch.fail(failures.expired(f"too old resource version: {since} ({self.compacted + 1})").status())
                return
            for change in self._changes:
                if change.revision > since:
                    watch.offer(change)
        self._watches.add(watch)

    def stop(self, watch: Watch) -> None:
        self._watches.discard(watch)

    def close_watches(self) -> int:
        """End every open watch (what a restarting API server does); how many there were."""
        watches, self._watches = list(self._watches), set()
        for watch in watches:
            watch.close()
        return len(watches)

    def compact(self, revision: int) -> None:
        """Drop every change up to `revision` (etcd's compaction)."""
        self._changes.clear()
        self.compacted = revision
