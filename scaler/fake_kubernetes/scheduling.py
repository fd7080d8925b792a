"""The scheduler of the rehearsal's one node: a pod whose requests fit what the node has left (its allocatable less
the requests of the pods bound to it and not finished), whose node selector the node's labels match and whose
tolerations cover the node's taints is bound to it; any other stays Pending with `PodScheduled=False`, reason
`Unschedulable`, and a `FailedScheduling` event saying why in the real scheduler's words (`0/1 nodes are available:
1 Insufficient cpu.`). It looks again whenever something changed, so a pod is bound as soon as capacity frees.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from scaler.fake_kubernetes.events import EventRecorder
from scaler.fake_kubernetes.object_rules import timestamp
from scaler.fake_kubernetes.quantity import QuantityError, parse_quantity
from scaler.fake_kubernetes.store import Store

Object = dict[str, Any]
SCHEDULER_NAME = "default-scheduler"


@dataclass(frozen=True, slots=True)
class Resources:
    cpu: Fraction = Fraction(0)  #: cores
    memory: Fraction = Fraction(0)  #: bytes
    pods: int = 0

    def __add__(self, other: Resources) -> Resources:
        return Resources(self.cpu + other.cpu, self.memory + other.memory, self.pods + other.pods)


def _quantity(values: Mapping[str, Any], name: str) -> Fraction:
    try:
        return parse_quantity(values[name]) if name in values else Fraction(0)
    except QuantityError:
        return Fraction(0)


def pod_requests(pod: Object) -> Resources:
    total = Resources(pods=1)
    for container in (pod.get("spec") or {}).get("containers") or []:
        requests = (container.get("resources") or {}).get("requests") or {}
        total = total + Resources(_quantity(requests, "cpu"), _quantity(requests, "memory"))
    return total


def node_allocatable(node: Object) -> Resources:
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    return Resources(_quantity(allocatable, "cpu"), _quantity(allocatable, "memory"), int(allocatable.get("pods", 110)))


def is_terminal(pod: Object) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def _tolerated(taint: Object, tolerations: list[Object]) -> bool:
    for toleration in tolerations:
        if toleration.get("effect") not in (None, "", taint.get("effect")):
            continue
        if toleration.get("operator") == "Exists" and toleration.get("key") in (None, "", taint.get("key")):
            return True
        if toleration.get("key") == taint.get("key") and toleration.get("value", "") == taint.get("value", ""):
            return True
    return False


def unschedulable_reasons(pod: Object, node: Object, used: Resources) -> list[str]:
    """Why the pod cannot go on the node (the scheduler's words, without the count); [] when it fits."""
    spec = pod.get("spec") or {}
    if (node.get("spec") or {}).get("unschedulable"):
        return ["node(s) were unschedulable"]
    labels = (node.get("metadata") or {}).get("labels") or {}
    if any(labels.get(key) != value for key, value in (spec.get("nodeSelector") or {}).items()):
        return ["node(s) didn't match Pod's node affinity/selector"]
    for taint in (node.get("spec") or {}).get("taints") or []:
        if taint.get("effect") in ("NoSchedule", "NoExecute") and not _tolerated(taint, spec.get("tolerations") or []):
            shown = f"{taint.get('key')}: {taint.get('value')}" if taint.get("value") else str(taint.get("key"))
            return [f"node(s) had untolerated taint {{{shown}}}"]
    wanted, allocatable = pod_requests(pod), node_allocatable(node)
    reasons = []
    if used.pods + 1 > allocatable.pods:
        reasons.append("Too many pods")
    if wanted.cpu > 0 and used.cpu + wanted.cpu > allocatable.cpu:
        reasons.append("Insufficient cpu")
    if wanted.memory > 0 and used.memory + wanted.memory > allocatable.memory:
        reasons.append("Insufficient memory")
    return reasons


def unschedulable_message(reasons: list[str]) -> str:
    return f"0/1 nodes are available: {', '.join(f'1 {reason}' for reason in reasons)}."


class Scheduler:
    def __init__(self, store: Store, recorder: EventRecorder, node_name: str) -> None:
        self._store = store
        self._recorder = recorder
        self._node_name = node_name

    def step(self) -> None:
        node = self._store.find("nodes", "", self._node_name)
        if node is None:
            return
        pods = self._store.items("pods")
        used = Resources()
        for pod in pods:
            if pod["spec"].get("nodeName") == self._node_name and not is_terminal(pod):
                used = used + pod_requests(pod)
        waiting = [
            pod
            for pod in pods
            if not pod["spec"].get("nodeName")
            and "deletionTimestamp" not in pod["metadata"]
            and not is_terminal(pod)
            and pod["spec"].get("schedulerName", SCHEDULER_NAME) == SCHEDULER_NAME
        ]
        waiting.sort(
            key=lambda pod: (
                -int(pod["spec"].get("priority", 0)),
                pod["metadata"]["creationTimestamp"],
                pod["metadata"]["name"],
            )
        )
        for pod in waiting:
            reasons = unschedulable_reasons(pod, node, used)
            if reasons:
                self._unschedulable(pod, unschedulable_message(reasons))
            elif self._bind(pod):
                used = used + pod_requests(pod)

    def _bind(self, pod: Object) -> bool:
        meta = pod["metadata"]
        now = timestamp(self._store.now())
        node_name = self._node_name

        def bind(edited: Object) -> bool:
            if edited["spec"].get("nodeName"):
                return False
            edited["spec"]["nodeName"] = node_name
            set_condition(edited, "PodScheduled", "True", now)
            return True

        bound = self._store.mutate("pods", meta["namespace"], meta["name"], bind)
        if bound is not None:
            self._recorder.record(
                bound,
                "Scheduled",
                f"Successfully assigned {meta['namespace']}/{meta['name']} to {node_name}",
                component=SCHEDULER_NAME,
            )
        return bound is not None

    def _unschedulable(self, pod: Object, message: str) -> None:
        current: Object = next(
            (c for c in pod.get("status", {}).get("conditions") or [] if c.get("type") == "PodScheduled"), {}
        )
        if current.get("reason") == "Unschedulable" and current.get("message") == message:
            return  # said already; said again only when the reason changes
        meta = pod["metadata"]
        now = timestamp(self._store.now())

        def mark(edited: Object) -> bool:
            set_condition(edited, "PodScheduled", "False", now, "Unschedulable", message)
            return True

        marked = self._store.mutate("pods", meta["namespace"], meta["name"], mark)
        if marked is not None:
            self._recorder.record(marked, "FailedScheduling", message, "Warning", component=SCHEDULER_NAME)


def set_condition(pod: Object, kind: str, status: str, now: str, reason: str = "", message: str = "") -> bool:
    """Set one of the pod's conditions; whether it changed (its transition time moves only when its status does)."""
    conditions = pod.setdefault("status", {}).setdefault("conditions", [])
    found = next((c for c in conditions if c.get("type") == kind), None)
    wanted: Object = {"type": kind, "status": status}
    if reason:
        wanted["reason"] = reason
    if message:
        wanted["message"] = message
    if found is not None:
        if all(found.get(key) == value for key, value in wanted.items()) and (reason or "reason" not in found):
            return False
        wanted["lastProbeTime"] = None
        wanted["lastTransitionTime"] = found.get("lastTransitionTime") if found.get("status") == status else now
        conditions[conditions.index(found)] = wanted
    else:
        wanted["lastProbeTime"] = None
        wanted["lastTransitionTime"] = now
        conditions.append(wanted)
    return True
