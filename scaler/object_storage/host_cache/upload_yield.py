"""When a host cache's large upload yields to the reads other hosts make of this host (pure: the shell measures, asks
and sleeps). Why: a result held by its host (held_results.py) is read by other hosts' caches from here while its
upload, and the uploads of this host's other results, go to the storage server on the same link. The uploads serve
durability and readers at the storage server; the reads are what other hosts' tasks wait for. Sharing the link, both
go at half its rate: a shuffle's maker host sends its partitions to the storage server and to the reducers' hosts at
once, and the reducers wait for both. So an upload waits while this host sends other hosts what they read, unless a
reader waits for it at the storage server. Rules, one upload's, looked at again after each step:

Y1 It goes when nothing this host sends other hosts waits to leave (the kernel's send queues of the connections it
   serves them on are empty).
Y2 It goes when a reader waits for it at the storage server (the client's `result()`: a reader there goes first, as
   its turn does, upload_admission A6).
Y3 It is not uploaded when the storage server neither holds it as held nor stores it: it was deleted meanwhile. Once
   its turn was granted it goes whatever (its put ends the turn: a turn left unused would hold other hosts' uploads
   back until it lapsed).
Y4 Bounded: it goes once it waited MAX_YIELD_SECONDS in all, whatever is being sent (a result's upload never starves
   behind a stream of reads; until it is stored, its host's death has it made again from its task).
Y5 An upload the storage server recorded as held asks it what is wanted of the object (`wanted`, held_results H8)
   before anything else (a graph's partitions are deleted once its last reader ended, often before their uploads
   came: those are not sent), then every ASK_SECONDS while it waits; one the server does not answer asks no more.
Y6 Otherwise it waits POLL_SECONDS (less when the bound is nearer) and looks again.
Y7 A fresh result settles first: a held upload (one the storage server recorded as held, whose put does not wait for
   it) does not go by Y1 before `settle` seconds (SETTLE_SECONDS from its put, less what it waited in the queue of
   this host's uploads): a result's readers on other hosts come once their tasks start, and in a graph those start
   only when their last input is made, a moment after the first; an upload begun before their reads holds the link
   half theirs until it ends (a put is one message), where waiting lets the reads go first (and the result is often
   deleted once they end, so never uploaded). Y2 and Y3 apply meanwhile, and Y4 counts it.

Reads may begin while an upload waits at the storage server for its turn (upload_admission.py), so the rules are
applied before it asks for its turn and again once it is granted, the bound counting both waits.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

#: How often a waiting upload looks again at what this host sends (Y6).
POLL_SECONDS = 0.05
#: How often a waiting upload asks the storage server whether a reader waits for it (Y5).
ASK_SECONDS = 0.5
#: The longest an upload waits for other hosts' reads (Y4): a few 10 MB partitions at 100 Mbit/s.
MAX_YIELD_SECONDS = 5.0
#: How long a fresh held result waits for its readers before its upload may go (Y7): the time a graph's next tasks
#: take to be placed and to begin their reads once their inputs are made, with room for a second wave of makers (on
#: the rig a shuffle's reducers read within 0.3 s of the first makers' ends; 0.5 s and 1 s gave the same shuffles, and
#: the longer one delayed the uploads a gather's reads then met).
SETTLE_SECONDS = 0.5


class Step(enum.Enum):
    GO = "go"  #: upload it now (Y1, Y2, Y4)
    SKIP = "skip"  #: do not upload it (Y3)
    ASK = "ask"  #: ask the storage server what is wanted of it, then look again (Y5)
    WAIT = "wait"  #: wait `seconds`, then look again (Y6)


@dataclass(slots=True)
class UploadYield:
    """One upload's yield. `held`: the storage server recorded that this cache holds the object (so it may be asked);
    `settle`: the seconds it waits for other hosts' reads to begin before Y1 lets it go (Y7)."""

    held: bool
    settle: float = 0.0
    waited: float = 0.0  #: seconds waited so far
    asked_at: float | None = None  #: `waited` when it last asked (None: never)
    wanted: bool = False  #: the last answer: a reader waits for it at the storage server
    gone: bool = False  #: the last answer: neither held nor stored there (deleted)
    turn_granted: bool = False  #: its turn was granted: it goes even when deleted (Y3)

    def step(self, queued_to_peers: int) -> tuple[Step, float]:
        """What to do now, while `queued_to_peers` bytes this host sends other hosts wait to leave."""
        if self.gone:
            return (Step.GO if self.turn_granted else Step.SKIP), 0.0
        if self.held and self.asked_at is None:
            self.asked_at = self.waited
            return Step.ASK, 0.0
        settled = self.waited >= self.settle
        if (queued_to_peers <= 0 and settled) or self.wanted or self.waited >= MAX_YIELD_SECONDS:
            return Step.GO, 0.0
        if self.held and self.asked_at is not None and self.waited - self.asked_at >= ASK_SECONDS:
            self.asked_at = self.waited
            return Step.ASK, 0.0
        until = MAX_YIELD_SECONDS if settled else min(self.settle, MAX_YIELD_SECONDS)
        return Step.WAIT, min(POLL_SECONDS, until - self.waited)

    def granted(self) -> None:
        """Its turn was granted: the rules apply again, and it is uploaded even if deleted meanwhile (Y3)."""
        self.turn_granted = True

    def slept(self, seconds: float) -> None:
        self.waited += seconds

    def answered(self, wanted: bool | None) -> None:
        """The storage server's answer: whether a reader waits for it there; None: it neither holds nor stores it."""
        if wanted is None:
            self.gone = True
        else:
            self.wanted = wanted

    def unanswered(self) -> None:
        """The storage server does not say (an older one, or the ask failed): it is asked no more (Y5)."""
        self.held = False
