"""What the shell feeds the core. Every event carries `now` (monotonic seconds): the core has no clock."""

from __future__ import annotations

from dataclasses import dataclass, field

from scaler.protocol.frozen_values import constructor, quick_init
from scaler.protocol.ids import ClientID, ObjectID, PeerID
from scaler.protocol.messages import Message, MessageCount, TaskCancelConfirm, TaskResult
from scaler.protocol.storage_messages import StorageTraffic
from scaler.scheduler.core.pace import BUSY, LATE_BEAT_SECONDS

#: The longest a run of beats behind on the reads asks nothing back (`Beats`): twice the time a task computes before
#: what is staged behind it is asked back (scaler/protocol/staging.py).
READS_BEHIND_SECONDS = 2.0


@quick_init
@dataclass(frozen=True, slots=True)
class Received:
    """A decoded message from a peer."""

    peer: PeerID
    message: Message
    now: float


#: A Received made as `Received(...)` makes it, without the class's call (its type's, then its `__init__`'s): the shell
#: makes one for every message it reads
new_received = constructor(Received)


@dataclass(frozen=True, slots=True)
class Undecodable:
    """A frame from a peer that is not a valid message."""

    peer: PeerID
    reason: str
    now: float


@dataclass(frozen=True, slots=True)
class PeerLost:
    """The transport says this peer is gone (connection closed, unroutable). `final`: it may not come back (its key
    was revoked, its identity taken): a client is dropped whatever its resume window."""

    peer: PeerID
    reason: str
    now: float
    final: bool = False


@dataclass(frozen=True, slots=True)
class Tick:
    """The shell's clock beat: timeouts, status snapshots and scaling are judged against `now`.
    `wall_time` (seconds since the epoch) only stamps what the monitor feed shows; nothing is decided on it.
    `on_time` False: the beat came late (`Beats`): the scheduler itself did not run for a while, so the messages its
    peers sent meanwhile may not be read yet, and no peer's silence is judged on this beat (the next one judges).
    `reads_behind` True: the beat came while the shell was behind on its reads (a full burst read, more waiting): the
    answers the picture waits for may be among them, and nothing is asked back from behind a long task on this beat
    (processor_links.py rule 3)."""

    now: float
    wall_time: float = 0.0
    on_time: bool = True
    reads_behind: bool = False


class Beats:
    """The shell's clock beats as Ticks, each told whether it came on time (within LATE_BEAT_SECONDS of when it was
    due: the interval the shell slept, `pace.py`). A scheduler stalled for seconds (a loaded machine, a long pause of
    its process) wakes with its beat and the peers' heartbeats due together; judged on that beat, live workers were
    dropped as silent (seen with a 3 s worker timeout at load 11: both workers dropped in the same second, each
    answering at once when told).

    And each told whether the shell is behind on its reads, for at most READS_BEHIND_SECONDS in a row: a beat judges the
    scheduler's picture of its links, which lags by what waits unread. A client's 20,000 tasks sent to 10,000 workers
    come back as 10,000 messages, read over a second or more; beats judged before them would ask a fifth of the tasks
    back from behind "long" tasks that have ended. A scheduler that stays behind longer
    judges anyway: what is staged behind a task that truly runs long is not kept there while the reads never catch up.
    """

    def __init__(self) -> None:
        self._last: float | None = None
        self._behind_since: float | None = None  #: since when the beats found the shell behind on its reads, in a row

    def tick(
        self, now: float, wall_time: float, interval: float = BUSY.tick_seconds, reads_behind: bool = False
    ) -> Tick:
        """The beat at `now`, `interval` seconds after the one before was given; `reads_behind`: whether the shell has
        more messages waiting than its last burst read."""
        on_time = self._last is None or now - self._last <= interval + LATE_BEAT_SECONDS
        self._last = now
        if not reads_behind:
            self._behind_since = None
        elif self._behind_since is None:
            self._behind_since = now
        elif now - self._behind_since > READS_BEHIND_SECONDS:
            reads_behind = False
        return Tick(now, wall_time, on_time, reads_behind)


@dataclass(frozen=True, slots=True)
class ShellStats:
    """Measurements only the shell can take, shown in status snapshots."""

    cpu_percent: float
    rss_bytes: int
    object_count: int
    object_bytes: int
    messages_received: int
    messages_sent: int
    message_counts: tuple[MessageCount, ...] = ()  #: per message type, sent and received
    #: where objects live and move, as the object storage server answered its info (bounded there)
    storage: StorageTraffic = field(default_factory=StorageTraffic)


@dataclass(frozen=True, slots=True)
class Watchers:
    """Which topics of the monitor feed have a subscriber now, as the shell's publisher says (a ZeroMQ XPUB passes on
    a topic's first subscription and its last unsubscription; b"" is every topic). The core builds and publishes only
    what is watched: the status view of 10,000 workers costs a tenth of a core a second to build and encode. A core
    never told (tests, simulations) publishes everything."""

    topics: frozenset[bytes]


@dataclass(frozen=True, slots=True)
class AnswersStored:
    """The outcome of a `StoreAnswers`: the bundle is in object storage (`ok`), or could not be written."""

    client: ClientID
    object_id: ObjectID
    ok: bool
    now: float


@dataclass(frozen=True, slots=True)
class AnswersLoaded:
    """The outcome of a `LoadAnswers`: the bundle's answers, in order, or None when it could not be read."""

    client: ClientID
    object_id: ObjectID
    answers: tuple[TaskResult | TaskCancelConfirm, ...] | None
    now: float


@dataclass(frozen=True, slots=True)
class FatesTold:
    """The storage server's `fates` of large results reported before they were stored (unstored_results.py): per
    object, -1 nothing to wait for, else how many times it was lost with its host."""

    object_ids: tuple[ObjectID, ...]
    losses: tuple[int, ...]
    now: float


Event = Received | Undecodable | PeerLost | Tick | ShellStats | AnswersStored | AnswersLoaded | Watchers | FatesTold
