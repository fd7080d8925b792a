"""Events, as the scheduler and the kubelet record them: core v1 Events about an object (`involvedObject`), the same
event again counted (`count`, `lastTimestamp`) instead of repeated, as client-go's event recorder does."""

from __future__ import annotations

import threading
from typing import Any

from scaler_rehearsal.fake_kubernetes.object_rules import timestamp
from scaler_rehearsal.fake_kubernetes.store import Store

Object = dict[str, Any]


class EventRecorder:
    """The events of the control plane's components, and of one node's kubelet (`on_node`: the same record, its
    kubelet's events naming its node as their host)."""

    def __init__(self, store: Store, node_name: str, _shared: EventRecorder | None = None) -> None:
        self._store = store
        self._node_name = node_name
        self._lock: threading.Lock = _shared._lock if _shared is not None else threading.Lock()
        #: (uid, reason, message, component) -> (namespace, event name)
        self._recorded: dict[tuple[str, str, str, str], tuple[str, str]] = (
            _shared._recorded if _shared is not None else {}
        )
        self._counter: list[int] = _shared._counter if _shared is not None else [0]

    def on_node(self, node_name: str) -> EventRecorder:
        return EventRecorder(self._store, node_name, self)

    def record(
        self, involved: Object, reason: str, message: str, event_type: str = "Normal", component: str = "kubelet"
    ) -> None:
        meta = involved["metadata"]
        namespace = meta.get("namespace") or "default"
        key = (meta.get("uid", ""), reason, message, component)
        now = timestamp(self._store.now())
        with self._lock:
            known = self._recorded.get(key)
            if known is not None:
                counted = self._store.mutate("events", known[0], known[1], _counted_again(now))
                if counted is not None:
                    return
            self._counter[0] += 1
            name = f"{meta['name']}.{int(self._store.now() * 1e9) + self._counter[0]:x}"
            event: Object = {
                "metadata": {"name": name, "namespace": namespace},
                "involvedObject": {
                    "kind": involved.get("kind", "Pod"),
                    "namespace": meta.get("namespace", ""),
                    "name": meta["name"],
                    "uid": meta.get("uid", ""),
                    "apiVersion": involved.get("apiVersion", "v1"),
                    "resourceVersion": meta.get("resourceVersion", ""),
                },
                "reason": reason,
                "message": message,
                "type": event_type,
                "count": 1,
                "source": {"component": component, **({"host": self._node_name} if component == "kubelet" else {})},
                "firstTimestamp": now,
                "lastTimestamp": now,
                "reportingComponent": component,
                "reportingInstance": self._node_name if component == "kubelet" else "",
            }
            try:
                self._store.create("events", namespace, event)
            except Exception:  # the namespace is going away: an event about it is of no use to anyone
                return
            self._recorded[key] = (namespace, name)


def _counted_again(now: str) -> Any:
    def change(event: Object) -> bool:
        event["count"] = int(event.get("count", 1)) + 1
        event["lastTimestamp"] = now
        return True

    return change
