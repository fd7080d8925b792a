"""A client's answers (TaskResults and TaskCancelConfirms) on their way to it: sent and not acknowledged yet, or held
while it is away, in memory and then in object storage. Pure: no clock is needed.

Rules:
1. Every answer for a client passes here, in the order the core makes them (`ClientSessions.answer`). While the
   client is present it is sent at once and kept until acknowledged; while it is away it is held, not sent.
2. A client acknowledges by count: its heartbeats carry (epoch, answers received in that epoch). One connection
   delivers in order, so the first N answers sent in an epoch are the ones it has; they are forgotten. A count of
   another epoch acknowledges nothing (it was counted on a connection that is gone).
3. A client whose connection closed (or changed) cannot know what was lost in it: its `ClientResume` says how many
   answers of the epoch it received, and every later one is sent again, after a `ClientResumed` that starts a new
   epoch (so the client counts from there). Answers sent twice are harmless: the client ignores an answer for a task
   it no longer waits for.
4. Held answers are kept in memory up to `held_answers_memory_bytes`; past it, the ones in memory are written to object
   storage as one bundle (an object owned by the client, so that its objects' deletion takes the bundle too); only
   the bundle's id, count and the task ids it answers stay here (their bytes, 20 per answer). A bundle is read back
   and its answers sent once the client is present again, then deleted. A bundle that could not be written is held in
   memory again (and nothing more is written for that client: the store is full or gone).
5. At most `MAX_UNACKNOWLEDGED` answers are kept unacknowledged: a client that never acknowledges (an older client)
   costs no more; past it the oldest are forgotten (they were sent).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

from scaler.protocol.ids import ObjectID, TaskID
from scaler.protocol.messages import TaskCancelConfirm, TaskResult

Answer = TaskResult | TaskCancelConfirm

#: What one answer costs in memory beyond its bytes (the Python objects that hold it), for the held budget.
ANSWER_OVERHEAD_BYTES = 200
#: Answers sent and not acknowledged, kept at most per client (rule 5).
MAX_UNACKNOWLEDGED = 262_144


def answer_bytes(answer: Answer) -> int:
    """What an answer costs to keep: its frame (a forwarded result keeps the worker's) and the objects around it."""
    if isinstance(answer, TaskResult):
        wire = answer.wire
        size = len(wire) if wire is not None else len(answer.payload) + len(answer.error_message)
        return size + ANSWER_OVERHEAD_BYTES
    return ANSWER_OVERHEAD_BYTES


@dataclass(slots=True)
class Bundle:
    """Held answers written to object storage as one object (rule 4)."""

    object_id: ObjectID
    task_ids: bytes  #: the ids of the tasks its answers are for, each prefixed with its length
    count: int
    #: its answers, while the write is not confirmed (None once it is: they live in storage only)
    answers: tuple[Answer, ...] | None
    loading: bool = False  #: a read is on its way
    retry_at: float = 0.0  #: after a failed read: not read again before this time


@dataclass(slots=True)
class AnswerLog:
    epoch: int = 0  #: the current answer epoch (rule 3); the client learns a new one from ClientResumed
    #: answers sent in this epoch and not acknowledged, oldest first
    sent: deque[Answer] = field(default_factory=deque)
    acknowledged: int = 0  #: answers of this epoch acknowledged (and forgotten) so far
    held: list[Answer] = field(default_factory=list)  #: answers not sent (the client is away), oldest first
    held_bytes: int = 0
    bundles: deque[Bundle] = field(default_factory=deque)  #: held answers in object storage, oldest first
    may_spill: bool = True  #: False once a bundle could not be written (rule 4)
    #: task id -> answers for it in `sent` and `held` (a task answered twice, once sent again, counts twice)
    _ids: dict[TaskID, int] = field(default_factory=dict)

    # ------------------------------------------------------------ queries

    @property
    def waiting_count(self) -> int:
        """Answers the client has not been sent: held in memory or in bundles."""
        return len(self.held) + sum(bundle.count for bundle in self.bundles)

    def has_answer_for(self, task_id: TaskID) -> bool:
        """Whether an answer for this task is sent and unacknowledged, or held in memory (not in bundles)."""
        return task_id in self._ids

    def answered(self) -> set[TaskID]:
        """Every task with an answer here, bundles included (built on demand: a resume asks once)."""
        found = set(self._ids)
        for bundle in self.bundles:
            found.update(unpack_task_ids(bundle.task_ids))
        return found

    # ------------------------------------------------------------ rule 1: answers made

    def sent_one(self, answer: Answer) -> None:
        """An answer sent now (`_count` and `_append_sent` inline: once per task)."""
        ids, task_id = self._ids, answer.task_id
        ids[task_id] = ids.get(task_id, 0) + 1
        sent = self.sent
        sent.append(answer)
        if len(sent) > MAX_UNACKNOWLEDGED:
            self._count(sent.popleft().task_id, -1)
            self.acknowledged += 1

    def hold(self, answer: Answer) -> None:
        """An answer for an away client: not sent."""
        self.held.append(answer)
        self.held_bytes += answer_bytes(answer)
        self._count(answer.task_id, 1)

    def release_held(self) -> list[Answer]:
        """The client is present again: the answers held in memory, to send now (they count as sent)."""
        released, self.held, self.held_bytes = self.held, [], 0
        for answer in released:
            self._append_sent(answer)
        return released

    # ------------------------------------------------------------ rule 2: acknowledgements

    def acknowledge(self, epoch: int, received: int) -> None:
        if epoch != self.epoch:
            return
        sent, ids = self.sent, self._ids
        forgotten = min(received - self.acknowledged, len(sent))
        if forgotten <= 0:
            return
        self.acknowledged += forgotten
        for _ in range(forgotten):  # `_count(task_id, -1)` inline: once per task
            task_id = sent.popleft().task_id
            count = ids.get(task_id, 0) - 1
            if count > 0:
                ids[task_id] = count
            else:
                ids.pop(task_id, None)

    # ------------------------------------------------------------ rule 3: a resume

    def resume(self, epoch: int, received: int) -> list[Answer]:
        """The client lost a connection: the answers to send again (those after what it received in `epoch`, then
        the held ones); a new epoch begins with them."""
        skip = max(0, received - self.acknowledged) if epoch == self.epoch else 0
        for _ in range(min(skip, len(self.sent))):
            self._count(self.sent.popleft().task_id, -1)
        again = list(self.sent)
        again.extend(self.held)
        self.held, self.held_bytes = [], 0
        self.epoch += 1
        self.acknowledged = 0
        self.sent = deque(again)
        return again

    # ------------------------------------------------------------ rule 4: bundles

    def take_bundle(self, object_id: ObjectID) -> tuple[Answer, ...]:
        """The answers held in memory become a bundle being written (kept here until the write is confirmed)."""
        answers, self.held, self.held_bytes = tuple(self.held), [], 0
        for answer in answers:
            self._count(answer.task_id, -1)
        self.bundles.append(
            Bundle(object_id, pack_task_ids(answer.task_id for answer in answers), len(answers), answers)
        )
        return answers

    def stored(self, object_id: ObjectID, ok: bool) -> bool:
        """The write of a bundle ended: True when it is kept in storage (its answers leave memory); on a failure its
        answers are held in memory again and nothing more is written (rule 4). False for a bundle no longer here."""
        bundle = self._bundle(object_id)
        if bundle is None or bundle.answers is None:
            return False
        if ok:
            bundle.answers = None
            return True
        self.bundles.remove(bundle)
        self.may_spill = False
        for answer in bundle.answers:
            self.hold(answer)
        return False

    def release_written(self) -> list[Answer]:
        """The client is present again: the answers of bundles still being written are in memory; they are sent now
        (the written object is deleted when its write is confirmed, `stored` being False)."""
        released: list[Answer] = []
        for bundle in [bundle for bundle in self.bundles if bundle.answers is not None]:
            self.bundles.remove(bundle)
            assert bundle.answers is not None
            for answer in bundle.answers:
                self.sent_one(answer)
            released.extend(bundle.answers)
        return released

    def loadable(self, now: float) -> list[Bundle]:
        """Bundles in storage to read back now (they are marked as being read)."""
        found = [b for b in self.bundles if b.answers is None and not b.loading and b.retry_at <= now]
        for bundle in found:
            bundle.loading = True
        return found

    def load_failed(self, object_id: ObjectID, retry_at: float) -> None:
        bundle = self._bundle(object_id)
        if bundle is not None:
            bundle.loading, bundle.retry_at = False, retry_at

    def loaded(self, object_id: ObjectID, answers: Iterable[Answer], present: bool) -> list[Answer]:
        """A bundle was read back: it leaves; its answers are to be sent now when the client is `present` (returned),
        else they are held again."""
        bundle = self._bundle(object_id)
        if bundle is None:
            return []
        self.bundles.remove(bundle)
        if not present:
            for answer in answers:
                self.hold(answer)
            return []
        sent = list(answers)
        for answer in sent:
            self.sent_one(answer)
        return sent

    # ------------------------------------------------------------ helpers

    def _bundle(self, object_id: ObjectID) -> Bundle | None:
        for bundle in self.bundles:
            if bundle.object_id == object_id:
                return bundle
        return None

    def _append_sent(self, answer: Answer) -> None:
        sent = self.sent
        sent.append(answer)
        if len(sent) > MAX_UNACKNOWLEDGED:
            self._count(sent.popleft().task_id, -1)
            self.acknowledged += 1

    def _count(self, task_id: TaskID, change: int) -> None:
        ids = self._ids
        count = ids.get(task_id, 0) + change
        if count > 0:
            ids[task_id] = count
        else:
            ids.pop(task_id, None)


def pack_task_ids(task_ids: Iterable[TaskID]) -> bytes:
    """Task ids as one bytes value (each prefixed with its length, 4 bytes): kept ids cost their bytes, not
    objects."""
    return b"".join(len(task_id).to_bytes(4, "big") + task_id for task_id in task_ids)


def unpack_task_ids(packed: bytes) -> list[TaskID]:
    ids, index = [], 0
    while index < len(packed):
        size = int.from_bytes(packed[index : index + 4], "big")
        ids.append(TaskID(packed[index + 4 : index + 4 + size]))
        index += 4 + size
    return ids
