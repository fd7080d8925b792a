"""One watch of the API server: the changes of one kind (in one namespace or all) that its label and field
selectors let through, as the events a client reads (ADDED, MODIFIED, DELETED, BOOKMARK, ERROR).

An object that starts matching a watch's selectors arrives as ADDED, one that stops matching as DELETED, as from the
real server; a deleted object arrives with the resourceVersion of its deletion.
"""

from __future__ import annotations

import queue
from dataclasses import dataclass
from typing import Any

from scaler_rehearsal.fake_kubernetes.selectors import FieldRequirement, Requirement, fields_match, labels_match

Object = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Change:
    """One write of the store: `after` is the object as written, or (`deleted`) as it was when it went, with the
    resourceVersion of the deletion."""

    revision: int
    plural: str
    before: Object | None
    after: Object
    deleted: bool = False


#: What `Watch.next` returns when the watch is over (closed by the server, or after an ERROR event).
CLOSED: tuple[str, Object] = ("CLOSED", {})


class Watch:
    def __init__(
        self,
        plural: str,
        namespace: str | None,
        labels: tuple[Requirement, ...],
        fields: tuple[FieldRequirement, ...],
    ) -> None:
        self.plural = plural
        self.namespace = namespace  #: None: every namespace
        self._labels = labels
        self._fields = fields
        self._events: queue.SimpleQueue[tuple[str, Object]] = queue.SimpleQueue()
        self.is_closed = False

    def selects(self, obj: Object | None) -> bool:
        if obj is None:
            return False
        if self.namespace is not None and obj.get("metadata", {}).get("namespace") != self.namespace:
            return False
        return labels_match(self._labels, obj) and fields_match(self._fields, obj)

    def offer(self, change: Change) -> None:
        if change.plural != self.plural or self.is_closed:
            return
        was = self.selects(change.before)
        if change.deleted:
            if was:
                self._events.put(("DELETED", change.after))
            return
        now = self.selects(change.after)
        if was and now:
            self._events.put(("MODIFIED", change.after))
        elif now:
            self._events.put(("ADDED", change.after))
        elif was:
            self._events.put(("DELETED", change.after))

    def put(self, event_type: str, obj: Object) -> None:
        self._events.put((event_type, obj))

    def fail(self, status: Object) -> None:
        """An ERROR event (a Status), after which the watch ends."""
        self._events.put(("ERROR", status))
        self.close()

    def close(self) -> None:
        if not self.is_closed:
            self.is_closed = True
            self._events.put(CLOSED)

    def next(self, timeout_seconds: float) -> tuple[str, Object] | None:
        """The next event, CLOSED once the watch is over, or None when nothing came within the timeout."""
        try:
            return self._events.get(timeout=timeout_seconds)
        except queue.Empty:
            return None
