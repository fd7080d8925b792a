"""Large results reported before they were stored (pure): a host cache answers its processor's put of a large result
once the storage server recorded that the cache holds it and will upload it (object_storage/held_results.py), so a
task may be reported done while its result is on its host alone. Until the storage server says the result is stored,
the scheduler keeps what it needs to make it again from its task (docs/guide/failures.md). Rules:

U1 `kept`: a task ended with a large result (RESULT_FROM_BYTES or more): the Task its worker was sent (a graph node's
   inputs included) is kept under the result's object id. A result kept already keeps its entry.
U2 `asked`: the objects whose fates the shell asks the storage server (`fates`), at most ASK_AT_ONCE, oldest first.
U3 `told`: the server's answer. An object with nothing to wait for (stored, or deleted, or never held) is forgotten.
   One lost more times than it was made again is made again: its Task, with `result_id` set to the object's id (its
   readers wait for that id at the storage server), is returned to be queued; an object lost more than MAX_RERUNS
   times is forgotten instead (its readers' reads then fail by the storage timeout).
U4 `client_gone`: a client that left has its entries forgotten (its objects are deleted).
U5 Bounded: at most MAX_KEPT entries; beyond, the oldest are forgotten (`dropped` counts them, for the log).
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

from scaler.protocol.ids import ClientID, ObjectID
from scaler.protocol.messages import Task

#: A result from this size on may be reported before it is stored (the size host caches hold from: cache_rules.py).
RESULT_FROM_BYTES = 1 << 20
#: The most results kept at once (U5).
MAX_KEPT = 10_000
#: The most objects one ask names (U2).
ASK_AT_ONCE = 4096
#: The most times one result is made again (U3).
MAX_RERUNS = 3


@dataclass(slots=True)
class _Kept:
    task: Task
    reruns: int = 0


class UnstoredResults:
    """The large results reported and not known to be stored yet (module docstring), by object id."""

    def __init__(self, max_kept: int = MAX_KEPT) -> None:
        self._kept: OrderedDict[ObjectID, _Kept] = OrderedDict()
        self._max_kept = max_kept
        self.dropped = 0  #: entries forgotten by the bound (U5), or past MAX_RERUNS (U3)

    def __len__(self) -> int:
        return len(self._kept)

    def __contains__(self, object_id: bytes) -> bool:
        return object_id in self._kept

    def kept(self, object_id: ObjectID, task: Task) -> None:
        """U1."""
        if object_id in self._kept:
            return
        self._kept[object_id] = _Kept(task)
        while len(self._kept) > self._max_kept:
            self._kept.popitem(last=False)
            self.dropped += 1

    def asked(self) -> tuple[ObjectID, ...]:
        """U2."""
        asked: list[ObjectID] = []
        for object_id in self._kept:
            if len(asked) >= ASK_AT_ONCE:
                break
            asked.append(object_id)
        return tuple(asked)

    def told(self, object_ids: Sequence[ObjectID], losses: Sequence[int]) -> list[Task]:
        """U3: the Tasks to run again."""
        again: list[Task] = []
        for object_id, lost in zip(object_ids, losses, strict=False):
            kept = self._kept.get(object_id)
            if kept is None:
                continue
            if lost < 0:
                del self._kept[object_id]
            elif lost > kept.reruns:
                if lost > MAX_RERUNS:
                    del self._kept[object_id]
                    self.dropped += 1
                    continue
                kept.reruns = lost
                again.append(dataclasses.replace(kept.task, result_id=object_id))
        return again

    def client_gone(self, client: ClientID) -> None:
        """U4."""
        for object_id in [object_id for object_id, kept in self._kept.items() if kept.task.client_id == client]:
            del self._kept[object_id]
