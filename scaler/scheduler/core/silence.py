"""Silence deadlines: when each peer's silence is next judged, kept in a heap, so that a tick looks at the peers
whose deadline passed instead of comparing every peer's last message with `now` (10,000 workers, four ticks a
second: 40,000 comparisons a second, most of a scheduler's idle work after its heartbeats).

Rules:
1. Any message from a peer refreshes its `last_seen` (a store into its record: all a heartbeat costs here); its
   entry in the heap is left as it is.
2. A peer has one entry, (deadline, peer), from its registration on: the `last_seen` it had then plus the timeout.
3. A tick pops the entries whose deadline passed (`deadline < now`) and judges each peer against its `last_seen`
   now, as a scan would: silent for more than the timeout (`now - last_seen > timeout`), it is reported silent (and
   keeps no entry: it is dropped); heard from since, its entry goes back at its new deadline. So a peer silent past
   its deadline is reported on the first tick after it, exactly when a scan of every peer would report it, and a
   talking peer's entry comes up once per timeout: peers / timeout heap operations a second, none per message.
4. A peer that is gone (dropped, left) when its entry comes up loses its entry; one that registers again before
   that keeps the entry it had (judged against its new record).
Pure: the caller hands `now` and each peer's `last_seen`.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable

from scaler.protocol.ids import PeerID


class SilenceDeadlines:
    def __init__(self, timeout_seconds: float) -> None:
        self.timeout_seconds = timeout_seconds
        self._heap: list[tuple[float, PeerID]] = []
        #: the peers with an entry in the heap (rule 2: one each)
        self._armed: set[PeerID] = set()

    def __len__(self) -> int:
        return len(self._heap)

    def arm(self, peer: PeerID, last_seen: float) -> None:
        """The peer registered (rule 2); a peer that has an entry already keeps it (rule 4)."""
        if peer not in self._armed:
            self._armed.add(peer)
            heapq.heappush(self._heap, (last_seen + self.timeout_seconds, peer))

    def silent(self, now: float, last_seen_of: Callable[[PeerID], float | None]) -> list[PeerID]:
        """The peers silent for more than the timeout at `now`, in the order their deadlines passed (rule 3);
        `last_seen_of(peer)`: its last message's time, None when it is gone (rule 4)."""
        heap, timeout = self._heap, self.timeout_seconds
        found: list[PeerID] = []
        while heap and heap[0][0] < now:
            _deadline, peer = heapq.heappop(heap)
            seen = last_seen_of(peer)
            if seen is not None and now - seen <= timeout:
                heapq.heappush(heap, (seen + timeout, peer))
                continue
            self._armed.discard(peer)
            if seen is not None:
                found.append(peer)
        return found
