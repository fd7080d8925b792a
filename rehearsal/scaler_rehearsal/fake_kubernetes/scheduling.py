"""The scheduler of the rehearsal's nodes: a pod whose requests fit what a node has left (its allocatable less the
requests of the pods bound to it and not finished), whose node selector the node's labels match and whose
tolerations cover the node's NoSchedule and NoExecute taints is bound to the least allocated such node; any other
stays Pending with `PodScheduled=False`, reason `Unschedulable`, and a `FailedScheduling` event saying why in the
real scheduler's words: how many nodes failed for each reason (`0/2 nodes are available: 1 Insufficient cpu, 1
node(s) had untolerated taint {node.kubernetes.io/unreachable: }.`). It looks again whenever something changed, so
a pod is bound as soon as capacity frees.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from scaler_rehearsal.fake_kubernetes.events import EventRecorder
from scaler_rehearsal.fake_kubernetes.object_rules import timestamp
from scaler_rehearsal.fake_kubernetes.quantity import QuantityError, parse_quantity
from scaler_rehearsal.fake_kubernetes.store import Store

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


def tolerates(toleration: Object, taint: Object) -> bool:
    """A toleration tolerates a taint: its effect (if it names one) and key (if it names one) are the taint's, and
    it either only asks the key to exist or names the taint's value."""
    if toleration.get("effect") not in (None, "", taint.get("effect")):
        return False
    if toleration.get("key") not in (None, "", taint.get("key")):
        return False
    operator = toleration.get("operator") or "Equal"
    if operator == "Exists":
        return True
    return operator == "Equal" and str(toleration.get("value") or "") == str(taint.get("value") or "")


def unschedulable_reasons(pod: Object, node: Object, used: Resources) -> list[str]:
    """Why the pod cannot go on the node (the scheduler's words, without the count); [] when it fits."""
    spec = pod.get("spec") or {}
    if (node.get("spec") or {}).get("unschedulable"):
        return ["node(s) were unschedulable"]
    tolerations = spec.get("tolerations") or []
    for taint in (node.get("spec") or {}).get("taints") or []:
        if taint.get("effect") in ("NoSchedule", "NoExecute") and not any(tolerates(t, taint) for t in tolerations):
            return [f"node(s) had untolerated taint {{{taint.get('key')}: {taint.get('value', '')}}}"]
    labels = (node.get("metadata") or {}).get("labels") or {}
    if any(labels.get(key) != value for key, value in (spec.get("nodeSelector") or {}).items()):
        return ["node(s) didn't match Pod's node affinity/selector"]
    wanted, allocatable = pod_requests(pod), node_allocatable(node)
    reasons = []
    if used.pods + 1 > allocatable.pods:
        reasons.append("Too many pods")
    if wanted.cpu > 0 and used.cpu + wanted.cpu > allocatable.cpu:
        reasons.append("Insufficient cpu")
    if wanted.memory > 0 and used.memory + wanted.memory > allocatable.memory:
        reasons.append("Insufficient memory")
    return reasons


def unschedulable_message(reasons: Counter[str], nodes: int) -> str:
    """The scheduler's words: how many of the nodes failed for each reason (a node may count for several)."""
    counted = sorted(f"{count} {reason}" for reason, count in reasons.items())
    return f"0/{nodes} nodes are available: {', '.join(counted)}."


class Scheduler:
    def __init__(self, store: Store, recorder: EventRecorder) -> None:
        self._store = store
        self._recorder = recorder

    def step(self) -> None:
        nodes = self._store.items("nodes")
        if not nodes:
            return
        pods = self._store.items("pods")
        used = {node["metadata"]["name"]: Resources() for node in nodes}
        for pod in pods:
            bound = pod["spec"].get("nodeName")
            if bound in used and not is_terminal(pod):
                used[bound] = used[bound] + pod_requests(pod)
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
            reasons: Counter[str] = Counter()
            fitting = []
            for node in nodes:
                why = unschedulable_reasons(pod, node, used[node["metadata"]["name"]])
                reasons.update(why)
                if not why:
                    fitting.append(node)
            if not fitting:
                self._unschedulable(pod, unschedulable_message(reasons, len(nodes)))
                continue
            chosen = min(
                fitting, key=lambda node: (_allocated(node, used[node["metadata"]["name"]]), node["metadata"]["name"])
            )
            name = chosen["metadata"]["name"]
            if self._bind(pod, name):
                used[name] = used[name] + pod_requests(pod)

    def _bind(self, pod: Object, node_name: str) -> bool:
        meta = pod["metadata"]
        now = timestamp(self._store.now())

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


def _allocated(node: Object, used: Resources) -> Fraction:
    """The share of the node's CPU and memory its pods asked for (the least allocated node is preferred)."""
    allocatable = node_allocatable(node)
    cpu = used.cpu / allocatable.cpu if allocatable.cpu else Fraction(0)
    memory = used.memory / allocatable.memory if allocatable.memory else Fraction(0)
    return cpu + memory


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
