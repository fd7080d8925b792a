"""What the core asks the shell to do. A small, closed set; the shell performs them in order."""

from __future__ import annotations

from dataclasses import dataclass

from scaler.protocol.frozen_values import constructor, quick_init
from scaler.protocol.ids import ClientID, ObjectID, PeerID
from scaler.protocol.messages import (
    Message,
    ScalingDecisions,
    StatusSnapshot,
    TaskCancelConfirm,
    TaskResult,
    TaskTransitions,
)


@quick_init
@dataclass(frozen=True, slots=True)
class Send:
    """A message for a peer. `may_wait`: it may leave a few milliseconds late, joined with the peer's next ones
    (the shell's `Outbox`, wait_seconds): an answer for a client with many tasks still live."""

    peer: PeerID
    message: Message
    may_wait: bool = False


#: A Send made as `Send(...)` makes it, without the class's call (its type's, then its `__init__`'s): the core makes one
#: for every message it sends
new_send = constructor(Send)


@dataclass(frozen=True, slots=True)
class Publish:
    """A message of the monitor feed (its topic follows from its type: docs/protocol.md, monitor feed)."""

    message: StatusSnapshot | TaskTransitions | ScalingDecisions


@dataclass(frozen=True, slots=True)
class DeleteObjects:
    object_ids: tuple[ObjectID, ...]


@dataclass(frozen=True, slots=True)
class DeleteOwnerObjects:
    """Delete every object a (departed) client owns."""

    owner: ClientID


@dataclass(frozen=True, slots=True)
class StoreAnswers:
    """Write answers held for an away client to object storage as one object owned by it (client_answers.py, rule
    4); the shell reports the outcome with `AnswersStored`."""

    client: ClientID
    object_id: ObjectID
    answers: tuple[TaskResult | TaskCancelConfirm, ...]


@dataclass(frozen=True, slots=True)
class LoadAnswers:
    """Read a bundle of held answers back; the shell reports them with `AnswersLoaded`."""

    client: ClientID
    object_id: ObjectID


@dataclass(frozen=True, slots=True)
class StopScheduler:
    reason: str


Effect = Send | Publish | DeleteObjects | DeleteOwnerObjects | StoreAnswers | LoadAnswers | StopScheduler
