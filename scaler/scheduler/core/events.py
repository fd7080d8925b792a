"""What the shell feeds the core. Every event carries `now` (monotonic seconds): the core has no clock.

Wall-clock time comes in with `Tick` only; between ticks the core derives it from `now` and the
offset seen at the last tick (the monitor feed stamps its messages with it).
"""

from __future__ import annotations

from dataclasses import dataclass

from scaler.protocol.feed import FeedTopic
from scaler.protocol.ids import PeerID
from scaler.protocol.messages import Message


@dataclass(frozen=True, slots=True)
class Received:
    """A decoded message from a peer."""

    peer: PeerID
    message: Message
    now: float


@dataclass(frozen=True, slots=True)
class Undecodable:
    """A frame from a peer that is not a valid message."""

    peer: PeerID
    reason: str
    now: float


@dataclass(frozen=True, slots=True)
class PeerLost:
    """The transport says this peer is gone (connection closed, unroutable)."""

    peer: PeerID
    reason: str
    now: float


@dataclass(frozen=True, slots=True)
class Tick:
    """The shell's clock beat: timeouts, the monitor feed and scaling are judged against `now`.

    `wall_time` is Unix time at the same instant; None keeps the offset of the previous tick (0 before
    the first one, so that simulations on a fake clock see wall time = `now`)."""

    now: float
    wall_time: float | None = None


@dataclass(frozen=True, slots=True)
class ShellStats:
    """Measurements only the shell can take, shown in the monitor feed's status."""

    cpu_percent: float
    rss_bytes: int
    object_count: int
    object_bytes: int
    #: (message type name, messages since start), sorted by name
    received_by_type: tuple[tuple[str, int], ...] = ()
    sent_by_type: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True, slots=True)
class FeedSubscriptions:
    """The monitor feed topics someone subscribes to now (the shell sees the subscriptions)."""

    topics: frozenset[FeedTopic]


Event = Received | Undecodable | PeerLost | Tick | ShellStats | FeedSubscriptions
