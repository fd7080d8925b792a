"""Upload admission: the storage server gives host caches turns for their large uploads, so that, when its own link is
what limits them, they are stored one after another rather than all at the end (docs/architecture.md, "Uploads
admitted in turn"). Pure: no I/O, no clock; the service passes the times in (seconds, any monotonic origin).

Why: each host cache uploads its large results one at a time, but several hosts upload side by side. When they share
the storage host's link, k uploads sharing it are all stored at the end of the k: a result's task is reported, and its
reader served, only once it is stored, so the first results wait for the last. One after another, the first is stored
in 1/k of that time and the last no later. When the storage host's link is fatter than the hosts' own, uploads side by
side are faster in aggregate, so the number admitted at once (the window) is learnt, not fixed.

Rules:

A1 `ask`: a peer (a host cache's connection for large uploads) asks for the turn to put an object of `total_bytes`.
   One turn per peer: an ask ends the peer's earlier turn or ask. It is granted at once when fewer turns than the
   window are held and nobody waits, else it waits; waiters are granted first come, first served.
A2 `done`: the peer's put of the object arrived (whatever its outcome): its turn ends (an ask not granted yet is
   withdrawn: its cache stopped waiting and put). A turn that ends so gives a sample of the aggregate arrival rate:
   its bytes over the time from its grant, times the mean number of turns held meanwhile (k uploads sharing a link of
   rate C each see C/k: the sample is C; k uploads each limited by its own link c see c: the sample is k c).
A3 The window starts at 1 and moves on the samples taken while it was full (the mean held rounds to the window w),
   once w of them came since it became w: their rate is their mean weighted by each upload's time (uploads that share
   a link unfairly, one done early, the other late, then give the link's rate, not the early one's). With no rate
   known at w - 1, or a rate at w that adds at least WIDEN_SHARE of what one more upload would add were the storage
   host's link not the limit (rate(w - 1) times 1 + WIDEN_SHARE / (w - 1): a fixed gain would stop the window at a few
   uploads however fat the link), it widens to w + 1 (at most MAX_WINDOW); otherwise it narrows to w - 1, and w is not
   tried again before REPROBE_UPLOADS more turns ended (the links may have changed).
A4 Bounded: an ask that waited MAX_WAIT_SECONDS is granted even when the window is full (no starvation, no hang: a
   holder that stalls costs the others that long at most), and a turn held longer than its lease (LEASE_FACTOR times
   the time its bytes take at the learnt rate, at least MAX_WAIT_SECONDS) lapses: its slot is free (its put, when it
   comes, still ends it, without a sample).
A5 `ended`: the peers' connection ended (a cache that died or disconnected): their turns and asks are forgotten.
A6 `ahead`: a reader waits at the storage server for an object its host holds and has not uploaded yet
   (held_results.py H2): its ask, waiting or still to come, is the next granted (before those that asked earlier).

Every call returns the asks granted by it, in the order granted; `tick` grants what the bound (A4) lets go by `now`.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field

#: The share of the rate one more upload at once would add (were the storage host's link not the limit) that it must
#: add to be kept (A3).
WIDEN_SHARE = 0.5
#: The most uploads admitted at once by the window (A3); more only by the bound (A4).
MAX_WINDOW = 16
#: Turns ended before a window that brought too little is tried again (A3).
REPROBE_UPLOADS = 32
#: The longest an ask waits for a turn (A4): under the storage timeout a cache's connection waits for an answer (60 s
#: by default), so that a cache is granted rather than giving up.
MAX_WAIT_SECONDS = 45.0
#: A turn lapses after this many times the time its bytes take at the learnt rate per turn (A4).
LEASE_FACTOR = 4.0
#: Objects whose ask, still to come, goes ahead (A6); beyond this the oldest are forgotten.
MAX_AHEAD = 4096


@dataclass(frozen=True, slots=True)
class Grant:
    """An ask granted: answer the peer's request."""

    peer: bytes
    request_id: int


@dataclass(frozen=True, slots=True)
class Finished:
    """A turn that ended with its put (A2), for the log: its upload's bytes, when it was asked for, granted and ended,
    the mean number of turns held while it went up, and the window when it ended."""

    object_id: bytes
    total_bytes: int
    asked_at: float
    granted_at: float
    ended_at: float
    mean_held: float
    window: int


@dataclass(slots=True)
class _Turn:
    peer: bytes
    request_id: int
    object_id: bytes
    total_bytes: int
    asked_at: float
    granted_at: float = -1.0  #: < 0: waiting
    area_at_grant: float = 0.0  #: the held-turns integral when granted (A2's mean held)
    lease_until: float = 0.0
    lapsed: bool = False


@dataclass(slots=True)
class UploadAdmission:
    """Turns for large uploads (the rules above). `window` is how many are admitted at once now."""

    window: int = 1
    #: the last aggregate arrival rate sampled at each window (bytes per second)
    rates: dict[int, float] = field(default_factory=dict)
    #: turns ended with their puts, taken by the shell for its log (`take_finished`)
    finished: list[Finished] = field(default_factory=list)
    #: window changes, (when, from, to, why), taken by the shell for its log
    changes: list[tuple[float, int, int, str]] = field(default_factory=list)
    _turns: dict[bytes, _Turn] = field(default_factory=dict)  #: by peer: held or waiting
    _waiting: collections.deque[_Turn] = field(default_factory=collections.deque)
    _held: int = 0  #: turns granted and not ended nor lapsed
    _area: float = 0.0  #: the integral of `_held` over time, up to `_at`
    _at: float = 0.0
    _round: list[tuple[float, float]] = field(default_factory=list)  #: the window's samples: (rate x seconds, seconds)
    _ceiling: int = 0  #: a window that brought too little (A3); 0: none
    _ceiling_left: int = 0  #: turns to end before it is tried again
    _ahead: dict[bytes, None] = field(default_factory=dict)  #: objects whose ask, still to come, goes ahead (A6)

    @property
    def held(self) -> int:
        return self._held

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    def asked(self, peer: bytes) -> bool:
        """Whether the peer holds or waits for a turn."""
        return peer in self._turns

    def ask(self, peer: bytes, request_id: int, object_id: bytes, total_bytes: int, now: float) -> list[Grant]:
        """A1."""
        self._advance(now)
        self._drop(peer)
        turn = _Turn(peer, request_id, object_id, total_bytes, now)
        self._turns[peer] = turn
        if object_id in self._ahead:
            del self._ahead[object_id]
            self._waiting.appendleft(turn)
        else:
            self._waiting.append(turn)
        return self._grant(now)

    def ahead(self, object_id: bytes) -> None:
        """A6: the object's ask goes first, whether it waits already or comes later."""
        for turn in self._waiting:
            if turn.object_id == object_id:
                self._waiting.remove(turn)
                self._waiting.appendleft(turn)
                return
        if any(turn.object_id == object_id for turn in self._turns.values()):
            return  # granted already
        self._ahead[object_id] = None
        while len(self._ahead) > MAX_AHEAD:
            del self._ahead[next(iter(self._ahead))]

    def done(self, peer: bytes, object_id: bytes, now: float) -> list[Grant]:
        """A2: a put of `object_id` from `peer` arrived."""
        turn = self._turns.get(peer)
        if turn is None or turn.object_id != object_id:
            return []
        self._advance(now)
        del self._turns[peer]
        if turn.granted_at < 0:
            self._waiting.remove(turn)
            return self._grant(now)
        if turn.lapsed:
            return self._grant(now)
        self._held -= 1
        seconds = now - turn.granted_at
        if seconds > 0:
            mean_held = (self._area - turn.area_at_grant) / seconds
            self.finished.append(
                Finished(object_id, turn.total_bytes, turn.asked_at, turn.granted_at, now, mean_held, self.window)
            )
            self._sampled(round(mean_held), mean_held * turn.total_bytes, seconds, now)
        return self._grant(now)

    def ended(self, peers: list[bytes], now: float) -> list[Grant]:
        """A5."""
        self._advance(now)
        for peer in peers:
            self._drop(peer)
        return self._grant(now)

    def tick(self, now: float) -> list[Grant]:
        """A4: the turns whose lease ran out lapse; the asks that waited long enough are granted."""
        self._advance(now)
        for turn in self._turns.values():
            if turn.granted_at >= 0 and not turn.lapsed and now >= turn.lease_until:
                turn.lapsed = True
                self._held -= 1
        return self._grant(now)

    def take_finished(self) -> list[Finished]:
        finished, self.finished = self.finished, []
        return finished

    def take_changes(self) -> list[tuple[float, int, int, str]]:
        changes, self.changes = self.changes, []
        return changes

    def _advance(self, now: float) -> None:
        if now > self._at:
            self._area += self._held * (now - self._at)
            self._at = now

    def _drop(self, peer: bytes) -> None:
        turn = self._turns.pop(peer, None)
        if turn is None:
            return
        if turn.granted_at < 0:
            self._waiting.remove(turn)
        elif not turn.lapsed:
            self._held -= 1

    def _grant(self, now: float) -> list[Grant]:
        grants = []
        while self._waiting and (self._held < self.window or now - self._waiting[0].asked_at >= MAX_WAIT_SECONDS):
            turn = self._waiting.popleft()
            turn.granted_at, turn.area_at_grant = now, self._area
            turn.lease_until = now + self._lease(turn.total_bytes)
            self._held += 1
            grants.append(Grant(turn.peer, turn.request_id))
        return grants

    def _lease(self, total_bytes: int) -> float:
        rate = self.rates.get(self.window)
        if not rate:
            return MAX_WAIT_SECONDS
        return max(MAX_WAIT_SECONDS, LEASE_FACTOR * total_bytes * self.window / rate)

    def _sampled(self, level: int, weighted_bytes: float, seconds: float, now: float) -> None:
        """A3: a sample of the aggregate rate with `level` uploads at once (`weighted_bytes` over `seconds`)."""
        if self._ceiling_left > 0:
            self._ceiling_left -= 1
            if self._ceiling_left == 0:
                self.rates.pop(self._ceiling, None)
                self._ceiling = 0
        if level != self.window:
            return
        self._round.append((weighted_bytes, seconds))
        if len(self._round) < level:
            return
        rate = sum(weighted for weighted, _ in self._round) / sum(taken for _, taken in self._round)
        self._round.clear()
        self.rates[level] = rate
        below = self.rates.get(level - 1)
        if level == 1 or below is None or rate >= below * (1 + WIDEN_SHARE / (level - 1)):
            if level + 1 <= MAX_WINDOW and level + 1 != self._ceiling:
                self._change(now, level + 1, f"{_rate(rate)} at {level}" + (f", {_rate(below)} at {level - 1}"
                                                                              if below else ""))  # fmt: skip
            return
        self._ceiling, self._ceiling_left = level, REPROBE_UPLOADS
        self._change(now, level - 1, f"{_rate(rate)} at {level}, {_rate(below)} at {level - 1}")

    def _change(self, now: float, window: int, why: str) -> None:
        self.changes.append((now, self.window, window, why))
        self.window = window
        self._round.clear()


def _rate(bytes_per_second: float) -> str:
    return f"{bytes_per_second / 1e6:.1f} MB/s"
