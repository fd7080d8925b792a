"""What the control plane does about nodes that stop answering, as kube-controller-manager does it:

- the node lifecycle controller: a node whose kubelet has not renewed its Lease for `grace_seconds`
  (--node-monitor-grace-period, 50 s) gets its conditions Unknown (`NodeStatusUnknown`, "Kubelet stopped posting node
  status."), the taint `node.kubernetes.io/unreachable` (NoSchedule, and NoExecute with the time it was added; a
  node whose kubelet says Ready=False gets `node.kubernetes.io/not-ready` instead), a `NodeNotReady` event, and its
  pods' Ready condition False (with a `NodeNotReady` event each); once its kubelet posts Ready again the taints go;
- the taint eviction controller: a pod on a node with NoExecute taints it does not tolerate is deleted at once; one
  that tolerates them for `tolerationSeconds` (300 s, from the API server's DefaultTolerationSeconds admission) is
  deleted that long after the taint came, unless it went first; before the delete it gets the condition
  `DisruptionTarget` (DeletionByTaintManager). The delete is a graceful one: on a node whose kubelet is gone, the pod
  stays Terminating until the node comes back (its kubelet confirms) or is deleted;
- the pod garbage collector: a pod bound to a node that no longer exists, still so after `quarantine_seconds` (40 s),
  is marked Failed with `DisruptionTarget` (DeletionByPodGC, "PodGC: node no longer exists") and force-deleted.

Rules: the rehearsal's one clock (`store.now()`) decides every delay; a step reads the store and writes what
changed, so that steps can run at any pace.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from scaler_rehearsal.fake_kubernetes.events import EventRecorder
from scaler_rehearsal.fake_kubernetes.failures import ApiFailure
from scaler_rehearsal.fake_kubernetes.nodes import LEASE_NAMESPACE, condition
from scaler_rehearsal.fake_kubernetes.object_rules import NOT_READY_TAINT, UNREACHABLE_TAINT, timestamp
from scaler_rehearsal.fake_kubernetes.scheduling import is_terminal, set_condition, tolerates
from scaler_rehearsal.fake_kubernetes.store import Store

Object = dict[str, Any]
#: kube-controller-manager's --node-monitor-grace-period (40 s before Kubernetes 1.32).
GRACE_SECONDS = 50.0
#: The pod garbage collector's wait before it believes a node is gone.
QUARANTINE_SECONDS = 40.0
#: The conditions the controller sets Unknown when the kubelet stops posting (not NetworkUnavailable).
WATCHED_CONDITIONS = ("Ready", "MemoryPressure", "DiskPressure", "PIDPressure")
#: Ready's status -> the taint key the node gets
TAINT_OF_READY = {"False": NOT_READY_TAINT, "Unknown": UNREACHABLE_TAINT}
NODE_CONTROLLER = "node-controller"
TAINT_CONTROLLER = "taint-eviction-controller"


class NodeLifecycle:
    def __init__(
        self,
        store: Store,
        recorder: EventRecorder,
        grace_seconds: float = GRACE_SECONDS,
        quarantine_seconds: float = QUARANTINE_SECONDS,
    ) -> None:
        self._store = store
        self._recorder = recorder
        self._grace_seconds = grace_seconds
        self._quarantine_seconds = quarantine_seconds
        #: node name -> (its kubelet's latest signs of life: lease renewal, status heartbeat; when first seen): silence
        #: is measured on the controller's own clock, from when it saw the latest sign, as the real one does
        self._heard: dict[str, tuple[tuple[str, str], float]] = {}
        self._evictions: dict[str, float] = {}  #: pod uid -> when its deletion was scheduled (a tolerated taint)
        self._missing: dict[str, float] = {}  #: node name -> when pods were first seen bound to it, it not existing

    def step(self) -> None:
        now = self._store.now()
        registered = self._store.items("nodes")
        names = {node["metadata"]["name"] for node in registered}
        self._heard = {name: seen for name, seen in self._heard.items() if name in names}
        for node in registered:
            self._monitor(node, now)
        nodes = {node["metadata"]["name"]: node for node in self._store.items("nodes")}
        pods = self._store.items("pods")
        self._mark_pods_not_ready(nodes, pods)
        self._evict(nodes, pods, now)
        self._collect_orphans(nodes, pods, now)

    # ------------------------------------------------------------ the node lifecycle controller

    def _monitor(self, node: Object, now: float) -> None:
        name = node["metadata"]["name"]
        ready = condition(node, "Ready") or {}
        was = ready.get("status", "Unknown")
        silent = now > self._last_heard(node, ready, now) + self._grace_seconds
        stamp = timestamp(now)

        def change(edited: Object) -> bool:
            changed = False
            if silent:
                for kind in WATCHED_CONDITIONS:
                    found = condition(edited, kind)
                    if found is not None and found.get("status") != "Unknown":
                        found.update(
                            status="Unknown",
                            reason="NodeStatusUnknown",
                            message="Kubelet stopped posting node status.",
                            lastTransitionTime=stamp,
                        )
                        changed = True
            status = (condition(edited, "Ready") or {}).get("status", "Unknown")
            return _set_taints(edited, TAINT_OF_READY.get(status), stamp) or changed

        if self._store.mutate("nodes", "", name, change) is None:
            return
        after = condition(self._store.find("nodes", "", name) or {}, "Ready") or {}
        if was == "True" and after.get("status") != "True":
            self._recorder.record(
                node, "NodeNotReady", f"Node {name} status is now: NodeNotReady", component=NODE_CONTROLLER
            )

    def _last_heard(self, node: Object, ready: Object, now: float) -> float:
        """When the controller last saw a sign of life of the node's kubelet (a lease renewed, a status posted; the
        first look counts as one), so that a pause of the controller itself never makes a node look silent."""
        name = node["metadata"]["name"]
        lease = self._store.find("leases", LEASE_NAMESPACE, name)
        signs = (
            str(((lease or {}).get("spec") or {}).get("renewTime") or ""),
            str(ready.get("lastHeartbeatTime") or ""),
        )
        seen = self._heard.get(name)
        if seen is None or seen[0] != signs:
            seen = self._heard[name] = (signs, now)
        return seen[1]

    def _mark_pods_not_ready(self, nodes: dict[str, Object], pods: list[Object]) -> None:
        for pod in pods:
            node = nodes.get(pod["spec"].get("nodeName", ""))
            if node is None or (condition(node, "Ready") or {}).get("status") == "True":
                continue
            ready = next(
                (c for c in (pod.get("status") or {}).get("conditions") or [] if c.get("type") == "Ready"), None
            )
            if ready is None or ready.get("status") != "True":
                continue
            meta = pod["metadata"]
            marked = self._store.mutate("pods", meta["namespace"], meta["name"], _not_ready(self._store.now()))
            if marked is not None:
                self._recorder.record(marked, "NodeNotReady", "Node is not ready", "Warning", NODE_CONTROLLER)

    # ------------------------------------------------------------ the taint eviction controller

    def _evict(self, nodes: dict[str, Object], pods: list[Object], now: float) -> None:
        scheduled: set[str] = set()
        for pod in pods:
            node = nodes.get(pod["spec"].get("nodeName", ""))
            taints = [t for t in ((node or {}).get("spec") or {}).get("taints") or [] if t.get("effect") == "NoExecute"]
            uid = pod["metadata"]["uid"]
            if not taints or "deletionTimestamp" in pod["metadata"]:
                continue
            seconds = _tolerated_seconds(taints, pod["spec"].get("tolerations") or [])
            if seconds is None:
                continue  # tolerated for ever
            scheduled.add(uid)
            if now >= self._evictions.setdefault(uid, now) + seconds:
                self._delete(pod)
        for uid in set(self._evictions) - scheduled:
            del self._evictions[uid]  # its taints went, or it did

    def _delete(self, pod: Object) -> None:
        meta = pod["metadata"]
        namespace, name = meta["namespace"], meta["name"]
        stamp = timestamp(self._store.now())
        self._store.mutate(
            "pods",
            namespace,
            name,
            lambda edited: set_condition(
                edited,
                "DisruptionTarget",
                "True",
                stamp,
                "DeletionByTaintManager",
                "Taint manager: deleting due to NoExecute taint",
            ),
        )
        self._recorder.record(
            pod, "TaintManagerEviction", f"Marking for deletion Pod {namespace}/{name}", component=TAINT_CONTROLLER
        )
        try:
            self._store.delete("pods", namespace, name)
        except ApiFailure:
            pass  # gone meanwhile
        self._evictions.pop(meta["uid"], None)

    # ------------------------------------------------------------ the pod garbage collector

    def _collect_orphans(self, nodes: dict[str, Object], pods: list[Object], now: float) -> None:
        orphaned = {pod["spec"]["nodeName"] for pod in pods if pod["spec"].get("nodeName", "") not in ("", *nodes)}
        self._missing = {name: since for name, since in self._missing.items() if name in orphaned}
        for pod in pods:
            node_name = pod["spec"].get("nodeName", "")
            if node_name not in orphaned or now < self._missing.setdefault(node_name, now) + self._quarantine_seconds:
                continue
            meta = pod["metadata"]
            self._store.mutate("pods", meta["namespace"], meta["name"], _failed_by_gc(now))
            try:
                self._store.delete("pods", meta["namespace"], meta["name"], grace_seconds=0)
            except ApiFailure:
                continue


def _not_ready(now: float) -> Callable[[Object], bool]:
    """MarkPodsNotReady: the pod's Ready condition False (its reason stays: only the status moves)."""

    def change(pod: Object) -> bool:
        found = next(c for c in pod["status"]["conditions"] if c.get("type") == "Ready")
        found.update(status="False", lastTransitionTime=timestamp(now))
        return True

    return change


def _failed_by_gc(now: float) -> Callable[[Object], bool]:
    """What the pod garbage collector writes before it force-deletes a pod whose node is gone."""

    def change(pod: Object) -> bool:
        if not is_terminal(pod):
            pod["status"]["phase"] = "Failed"
        set_condition(
            pod, "DisruptionTarget", "True", timestamp(now), "DeletionByPodGC", "PodGC: node no longer exists"
        )
        return True

    return change


def _set_taints(node: Object, key: str | None, stamp: str) -> bool:
    """The controller's own taints as Ready's status wants them (`key` NoSchedule and NoExecute, the other one gone);
    whether that changed anything. A NoExecute taint keeps the time it was first added."""
    spec = node.setdefault("spec", {})
    taints: list[Object] = spec.get("taints") or []
    ours = (NOT_READY_TAINT, UNREACHABLE_TAINT)
    kept = [t for t in taints if t.get("key") not in ours or (t.get("key") == key)]
    for effect in ("NoSchedule", "NoExecute") if key else ():
        if not any(t.get("key") == key and t.get("effect") == effect for t in kept):
            kept.append({"key": key, "effect": effect, **({"timeAdded": stamp} if effect == "NoExecute" else {})})
    if kept == taints:
        return False
    if kept:
        spec["taints"] = kept
    else:
        spec.pop("taints", None)
    return True


def _tolerated_seconds(taints: list[Object], tolerations: list[Object]) -> float | None:
    """How long a pod may stay on a node with these NoExecute taints: 0 when one is not tolerated, the shortest
    tolerationSeconds of the tolerations used (for each taint, the first that tolerates it), None when they are
    tolerated for ever."""
    shortest: float | None = None
    for taint in taints:
        used = next((t for t in tolerations if tolerates(t, taint)), None)  # the first that tolerates it
        if used is None:
            return 0.0
        if used.get("tolerationSeconds") is not None:
            seconds = max(0.0, float(used["tolerationSeconds"]))
            shortest = seconds if shortest is None else min(shortest, seconds)
    return shortest
