"""What a processor's link to the scheduler keeps (pure): the one way its tasks come and everything about them leaves
(docs/protocol.md section 3.7). Used by a forked processor's outlet (`outlet.py`, blocking) and by the links of
processors that live in the agent's process (`worker/executors/hosted_link.py`, asyncio).

Rules:
1. The link says hello when its agent configures the processor (the agent is registered with the scheduler: at its
   start, or again after a restart) and when the scheduler says it does not know the link (ProtocolError
   unknownPeer: it restarted, or dropped the worker). Each hello names the tasks held here: received and not
   answered, or answered with a result the scheduler has not named read (`ProcessorInfo.heldTasks`): a new scheduler
   instance adopts them instead of running them again.
2. Every result sent on the link is kept until the scheduler names it read (HeartbeatEcho.resultsRead on the link,
   after the worker's next heartbeat), at most MAX_KEPT (the oldest forgotten first). So a scheduler restart loses no
   result: what the old instance may not have read goes again.
3. When a hello is accepted, the kept results are sent again (a scheduler drops a result it has), then a
   ProcessorBlocked for each held task parked on nested futures (adopted, each yields its slot).
4. Tasks, cancels, TaskReturns, stream credits and actor stops read on the link are the task line's work.
"""

from __future__ import annotations

import enum
from dataclasses import replace

from scaler.protocol import messages as m
from scaler.protocol.ids import TaskID

#: The most results kept for the scheduler to name read (rule 2).
MAX_KEPT = 100_000
#: What the task line takes from the link (rule 4).
WORK = (m.Task, m.TaskCancel, m.TaskReturn, m.StreamCredit, m.ActorStop)


class Heard(enum.Enum):
    NOTHING = "nothing"
    WORK = "work"  #: for the task line
    HELLO = "hello"  #: say hello again (rule 1)
    ACCEPTED = "accepted"  #: a hello was accepted: send `again()` (rule 3)


class ProcessorLinkState:
    def __init__(self, hello: m.Hello, max_kept: int = MAX_KEPT) -> None:
        self._hello = hello
        self._max_kept = max_kept
        #: the frames of results sent and not named read, in sending order
        self.kept: dict[TaskID, bytes] = {}
        self.held: set[TaskID] = set()  #: tasks received and not answered
        self.parked: set[TaskID] = set()  #: those of them parked on nested futures

    def hello(self) -> m.Hello:
        """The hello to say now, naming the tasks held here (rule 1)."""
        if not self.held and not self.kept:
            return self._hello
        info = self._hello.info
        assert isinstance(info, m.ProcessorInfo)
        held = tuple(TaskID(t) for t in (*self.held, *self.kept))
        return replace(self._hello, info=replace(info, held_tasks=held))

    def received(self, message: m.Message) -> None:
        if isinstance(message, m.Task) and not message.actor_id:
            self.held.add(message.task_id)

    def sent(self, message: m.Message, frame: bytes) -> None:
        """A message left on the link (its frame)."""
        if isinstance(message, m.TaskResult):
            self.held.discard(message.task_id)
            self.parked.discard(message.task_id)
            kept = self.kept
            kept[message.task_id] = frame
            if len(kept) > self._max_kept:
                del kept[next(iter(kept))]
        elif isinstance(message, m.TaskCancelConfirm):
            self.held.discard(message.task_id)
            self.parked.discard(message.task_id)
        elif isinstance(message, m.TaskReturn):
            self.held.difference_update(message.task_ids)
        elif isinstance(message, m.ProcessorBlocked):
            self.parked.add(message.task_id)
        elif isinstance(message, m.ProcessorResumeRequest):
            self.parked.discard(message.task_id)

    def heard(self, message: m.Message) -> Heard:
        """Something read on the link."""
        if isinstance(message, WORK):
            self.received(message)
            return Heard.WORK
        if isinstance(message, m.HeartbeatEcho):
            for task_id in message.results_read:
                self.kept.pop(task_id, None)
        elif isinstance(message, m.HelloReply) and message.accepted:
            return Heard.ACCEPTED
        elif isinstance(message, m.ProtocolError) and message.kind is m.ProtocolErrorKind.UNKNOWN_PEER:
            return Heard.HELLO
        return Heard.NOTHING

    def again(self) -> tuple[list[bytes], list[m.Message]]:
        """What goes again once a hello is accepted (rule 3): the frames of the results kept, then a ProcessorBlocked
        for each parked task."""
        return list(self.kept.values()), [m.ProcessorBlocked(TaskID(t)) for t in self.parked]
