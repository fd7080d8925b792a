"""What the shell feeds the core. Every event carries `now` (monotonic seconds): the core has no clock."""

from __future__ import annotations

from dataclasses import dataclass

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
    """The shell's clock beat: timeouts, status snapshots and scaling are judged against `now`."""

    now: float


@dataclass(frozen=True, slots=True)
class ShellStats:
    """Measurements only the shell can take, shown in status snapshots."""

    cpu_percent: float
    rss_bytes: int
    object_count: int
    object_bytes: int
    messages_received: int
    messages_sent: int


Event = Received | Undecodable | PeerLost | Tick | ShellStats
