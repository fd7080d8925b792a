"""Silence deadlines: when each peer's silence is next judged, kept in a heap, so that a tick looks at the peers
whose deadline passed instead of comparing every peer's last message with `now` (10,000 workers, four ticks a
second: 40,000 comparisons a second, most of a scheduler's idle work after its heartbeats).

Each peer has its own timeout, read when it is judged: a worker's is the configured one, or three of the heartbeat
periods it was given when longer (scaler/protocol/heartbeat_period.py, rule 4), so a worker told to beat every 51 s
is not dead after 60 s of silence.

Rules:
1. Any message from a peer refreshes its `last_seen` (a store into its record: all a heartbeat costs here); its
   entry in the heap is left as it is.
2. A peer has one entry, (deadline, peer), from its registration on: the `last_seen` it had then plus its timeout.
3. A tick pops the entries whose deadline passed (`deadline < now`) and judges each peer against its `last_seen`
   and its timeout now, as a scan would: silent for more than its timeout (`now - last_seen > timeout`), it is
   reported silent (and keeps no entry: it is dropped); heard from since, its entry goes back at its new deadline
   (`last_seen + timeout`). So a peer silent past its deadline is reported on the first tick after it, exactly when
   a scan of every peer would report it, and a talking peer's entry comes up once per timeout: peers / timeout heap
   operations a second, none per message. A peer whose timeout grew meanwhile is judged by the new one (its entry
   goes back); one whose timeout shrank is judged when its entry, made with the longer one, comes up: never
   early, at most the difference late (a shorter timeout comes with a shorter period, told at its next heartbeat).
4. A peer that is gone (dropped, left) when its entry comes up loses its entry; one that registers again before
   that keeps the entry it had (judged against its new record).
Pure: the caller hands `now` and each peer's `last_seen` and timeout.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable

from scaler.protocol.ids import PeerID

#: A peer's last message's time and its timeout, None when it is gone (rule 4).
SeenOf = Callable[[PeerID], "tuple[float, float] | None"]


class SilenceDeadlines:
    def __init__(self) -> None:
        self._heap: list[tuple[float, PeerID]] = []
        #: the peers with an entry in the heap (rule 2: one each)
        self._armed: set[PeerID] = set()

    def __len__(self) -> int:
        return len(self._heap)

    def arm(self, peer: PeerID, last_seen: float, timeout_seconds: float) -> None:
        """The peer registered (rule 2); a peer that has an entry already keeps it (rule 4)."""
        if peer not in self._armed:
            self._armed.add(peer)
            heapq.heappush(self._heap, (last_seen + timeout_seconds, peer))

    def silent(self, now: float, seen_of: SeenOf) -> list[PeerID]:
        """The peers silent for more than their timeout at `now`, in the order their deadlines passed (rule 3);
        `seen_of(peer)`: its last message's time and its timeout, None when it is gone (rule 4)."""
        heap = self._heap
        found: list[PeerID] = []
        while heap and heap[0][0] < now:
            _deadline, peer = heapq.heappop(heap)
            seen = seen_of(peer)
            if seen is not None and now - seen[0] <= seen[1]:
                heapq.heappush(heap, (seen[0] + seen[1], peer))
                continue
            self._armed.discard(peer)
            if seen is not None:
                found.append(peer)
        return found
