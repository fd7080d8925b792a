"""The results of a worker that its scheduler may not have read (pure), kept so that none is lost when the scheduler
restarts, a processor dies, or a processor's link drops one; sent again when that may be needed.

A result reaches the scheduler one of two ways: the agent sends it (a processor without an open route, or a report
the agent makes itself), or a processor sends it on its own link and tells the agent with a ResultSent
(processor/result_route.py). Rules:

1. A result the agent sent is kept until a heartbeat sent after it is answered: the echo comes on the same
   connection, after the scheduler read the result.
2. A result a processor sent on its own link (another connection: no echo proves anything about it) is kept until
   the scheduler names it in a HeartbeatEcho (`results_read`).
3. The agent sends it again itself, and from then on keeps it as in rule 1:
   a. when its processor exits (the processor may have died before its message left);
   b. when two echoes came without naming it, the first of them answering a heartbeat sent after the agent heard
      of it (the scheduler answered the agent and did not read the processor's message: it dropped it, having
      forgotten the processor; a message still on its way is sent twice, and the scheduler ignores the second);
   c. when the agent registers again (a restarted scheduler never read it), as every result kept.
4. At most `limit` results of each kind are kept; the oldest go first.

The scheduler ignores a result for a task that has ended, so sending one again is always safe; losing one is not
(its task would wait at the worker until the worker dies).
"""

from __future__ import annotations

import collections
from collections.abc import Iterator

from scaler.protocol import messages as m
from scaler.protocol.ids import TaskID

#: Results kept for sending again after a scheduler restart, at most (the oldest go first).
MAX_UNACKNOWLEDGED_RESULTS = 100_000

#: A result as the journal keeps it: one the agent sent (a TaskResult, or a processor's frame it sent again).
Kept = m.TaskResult | m.ResultSent


class ResultJournal:
    """Results by send order, the heartbeat whose echo proves which of them the scheduler read, and the results
    processors sent on their own links until the scheduler names them."""

    def __init__(self, limit: int = MAX_UNACKNOWLEDGED_RESULTS) -> None:
        self._limit = limit
        #: (send number, result) the agent sent since the last heartbeat the scheduler answered, oldest first
        self._unacknowledged: collections.deque[tuple[int, Kept]] = collections.deque()
        self._sent = 0
        self._heartbeat_marker: int | None = None  #: results sent before the heartbeat in flight
        #: results processors sent on their own links, by task: (the processor, the number it was heard as, it)
        self._direct: dict[TaskID, tuple[bytes, int, m.ResultSent]] = {}
        self._heard = 0  #: ResultSents heard so far
        self._direct_marker: int | None = None  #: ResultSents heard before the heartbeat in flight
        self._overdue_before = 0  #: those heard before this number are sent again if the next echo does not name them

    def sent(self, result: Kept) -> None:
        """A result left for the scheduler on the agent's connection (rule 1)."""
        self._unacknowledged.append((self._sent, result))
        self._sent += 1
        if len(self._unacknowledged) > self._limit:
            self._unacknowledged.popleft()

    def sent_by_processor(self, processor_id: bytes, sent: m.ResultSent) -> None:
        """A processor sent a result on its own link (rule 2)."""
        self._direct[sent.task_id] = (processor_id, self._heard, sent)
        self._heard += 1
        if len(self._direct) > self._limit:
            del self._direct[next(iter(self._direct))]

    def heartbeat_sent(self) -> None:
        """A heartbeat left: the oldest one in flight marks the results before it (its echo is proof enough)."""
        if self._heartbeat_marker is None:
            self._heartbeat_marker = self._sent
            self._direct_marker = self._heard

    def acknowledged(self, read: tuple[TaskID, ...] = ()) -> list[m.ResultSent]:
        """The scheduler answered a heartbeat, naming the results it read from this worker's processors since the
        previous echo: every result the agent sent before that heartbeat reached it, and so did the named ones.
        Returns the processors' results to send again now (rule 3b); they are kept as the agent's from now on."""
        for task_id in read:
            self._direct.pop(task_id, None)
        marker = self._heartbeat_marker
        if marker is None:
            return []
        self._heartbeat_marker = None
        while self._unacknowledged and self._unacknowledged[0][0] < marker:
            self._unacknowledged.popleft()
        overdue = [task_id for task_id, (_, heard, _) in self._direct.items() if heard < self._overdue_before]
        if self._direct_marker is not None:
            self._overdue_before, self._direct_marker = self._direct_marker, None
        return self._take_over(overdue)

    def processor_gone(self, processor_id: bytes) -> list[m.ResultSent]:
        """A processor exited: its results the scheduler has not named, to send again now (rule 3a)."""
        if not self._direct:
            return []
        return self._take_over([task_id for task_id, (owner, _, _) in self._direct.items() if owner == processor_id])

    def send_all_again(self) -> list[Kept]:
        """Every result the scheduler may not have read, to send again now, in the order they were sent (rule 3c)."""
        kept = [result for _, result in self._unacknowledged]
        return kept + list(self._take_over(list(self._direct)))

    def task_ids(self) -> Iterator[TaskID]:
        yield from (result.task_id for _, result in self._unacknowledged)
        yield from self._direct

    def __len__(self) -> int:
        return len(self._unacknowledged) + len(self._direct)

    def _take_over(self, task_ids: list[TaskID]) -> list[m.ResultSent]:
        """Processors' results the agent sends again itself: kept as its own from now on."""
        taken = []
        for task_id in task_ids:
            _, _, sent = self._direct.pop(task_id)
            self.sent(sent)
            taken.append(sent)
        return taken
