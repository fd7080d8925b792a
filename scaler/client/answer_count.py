"""The client's count of the answers it received, by epoch: what its heartbeats acknowledge, and what its
`ClientResume` says after a lost connection (docs/protocol.md 5.15; the scheduler's side is
scaler/scheduler/core/client_answers.py). Pure.

An answer is a TaskResult or a TaskCancelConfirm, counted whether or not this client still waits for its task (the
scheduler counts what it sent). Between a ClientResume and its ClientResumed nothing is counted: answers may still
come from the old epoch; the ClientResumed starts the new one.
"""

from __future__ import annotations

from collections.abc import Sequence

from scaler.protocol import messages as m
from scaler.protocol.ids import TaskID


class AnswerCount:
    def __init__(self) -> None:
        self.epoch = 0
        self.received = 0  #: answers received in `epoch`
        self.counting = True  #: False while a resume is unanswered
        self.resuming = False  #: a ClientResume is unanswered

    def answered(self) -> None:
        if self.counting:
            self.received += 1

    def heartbeat(self, round_trip_seconds: float) -> m.Heartbeat:
        return m.Heartbeat(
            round_trip_seconds=round_trip_seconds, answers_epoch=self.epoch, answers_received=self.received
        )

    def resume(self, unfinished: Sequence[TaskID]) -> m.ClientResume:
        """The connection was lost: what to ask the scheduler (counting stops until it answers)."""
        self.counting, self.resuming = False, True
        return m.ClientResume(self.epoch, self.received, tuple(unfinished))

    def resumed(self, reply: m.ClientResumed) -> None:
        self.epoch, self.received, self.counting, self.resuming = reply.answers_epoch, 0, True, False

    def restart(self) -> None:
        """Registered (again): a scheduler that did not know this client counts from zero."""
        self.epoch, self.received, self.counting, self.resuming = 0, 0, True, False
