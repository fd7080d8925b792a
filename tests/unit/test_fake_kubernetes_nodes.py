"""The Kubernetes rehearsal's node lifecycle on a clock of the test's: a node whose kubelet stops renewing its lease
turns Unknown and unreachable (taints, its pods not ready), its pods are deleted by the taint eviction controller once
their toleration ran out (DisruptionTarget, Terminating since no kubelet confirms), a node back loses its taints, a
node deleted has its pods collected by the pod garbage collector; and the scheduler spreads pods over the nodes and
says why none fits."""

from __future__ import annotations

from typing import Any

from scaler_rehearsal.fake_kubernetes.events import EventRecorder
from scaler_rehearsal.fake_kubernetes.node_lifecycle import NodeLifecycle
from scaler_rehearsal.fake_kubernetes.nodes import (
    LEASE_NAMESPACE,
    NodeShape,
    healthy_conditions,
    lease_manifest,
    micro_time,
    node_manifest,
)
from scaler_rehearsal.fake_kubernetes.scheduling import Scheduler
from scaler_rehearsal.fake_kubernetes.store import Store

START = 1_700_000_000.0
GRACE = 50.0
UNREACHABLE = "node.kubernetes.io/unreachable"


class Cluster:
    """A store with nodes and their leases, the node lifecycle controllers and a scheduler, on a clock of its own."""

    def __init__(self, *names: str) -> None:
        self.now = START
        self.store = Store(clock=lambda: self.now)
        recorder = EventRecorder(self.store, "n1")
        self.lifecycle = NodeLifecycle(self.store, recorder, grace_seconds=GRACE, quarantine_seconds=40.0)
        self.scheduler = Scheduler(self.store, recorder)
        for namespace in ("default", "ns", LEASE_NAMESPACE):
            self.store.create("namespaces", "", {"metadata": {"name": namespace}})
        self.store.create("serviceaccounts", "ns", {"metadata": {"name": "default"}})
        for name in names:
            node = self.store.create("nodes", "", node_manifest(name, NodeShape(cpu="2", memory="4Gi"), self.now))
            self.store.create("leases", LEASE_NAMESPACE, lease_manifest(node, self.now))
        self.lifecycle.step()  # the controller's first look: silence counts from here

    def renew(self, name: str) -> None:
        """What the node's kubelet does: its lease renewed, and (back from silence) its node posted healthy."""
        self.store.mutate(
            "leases",
            LEASE_NAMESPACE,
            name,
            lambda lease: bool(lease["spec"].update(renewTime=micro_time(self.now))) or True,
        )

        def healthy(node: dict[str, Any]) -> bool:
            node["status"]["conditions"] = healthy_conditions(node["status"]["conditions"], self.now)
            return True

        self.store.mutate("nodes", "", name, healthy)

    def running_pod(self, name: str, node: str, tolerations: list[dict[str, Any]] | None = None) -> None:
        """A pod its kubelet runs: bound, Running, Ready and ContainersReady."""
        spec: dict[str, Any] = {"nodeName": node, "containers": [{"name": "c", "image": "busybox"}]}
        if tolerations is not None:
            spec["tolerations"] = tolerations
        self.store.create("pods", "ns", {"metadata": {"name": name}, "spec": spec})

        def running(pod: dict[str, Any]) -> bool:
            ready = [{"type": kind, "status": "True"} for kind in ("Ready", "ContainersReady")]
            pod["status"].update(phase="Running", conditions=ready)
            return True

        self.store.mutate("pods", "ns", name, running)

    def after(self, seconds: float) -> None:
        self.now += seconds
        self.lifecycle.step()

    def pod(self, name: str) -> dict[str, Any] | None:
        return self.store.find("pods", "ns", name)

    def node(self, name: str) -> dict[str, Any]:
        return self.store.get("nodes", "", name)


def conditions(obj: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c.get("reason", "")) for c in obj["status"].get("conditions") or []}


def taints(node: dict[str, Any]) -> list[tuple[str, str]]:
    return [(t["key"], t["effect"]) for t in node["spec"].get("taints") or []]


def reasons(store: Store, namespace: str) -> list[tuple[str, str]]:
    return [(e["involvedObject"]["name"], e["reason"]) for e in store.items("events", namespace)]


def test_a_silent_kubelet_makes_its_node_unreachable_and_its_pods_not_ready() -> None:
    cluster = Cluster("n1", "n2")
    cluster.running_pod("a", "n1")
    cluster.after(GRACE - 1)
    cluster.renew("n2")
    cluster.after(2)  # n1's kubelet said nothing for longer than the grace period; n2's renewed its lease
    assert conditions(cluster.node("n1"))["Ready"] == ("Unknown", "NodeStatusUnknown")
    assert conditions(cluster.node("n1"))["MemoryPressure"][0] == "Unknown"
    assert taints(cluster.node("n1")) == [(UNREACHABLE, "NoSchedule"), (UNREACHABLE, "NoExecute")]
    assert conditions(cluster.node("n2"))["Ready"] == ("True", "KubeletReady") and not taints(cluster.node("n2"))
    pod = cluster.pod("a")
    assert pod is not None and pod["status"]["phase"] == "Running"  # nobody knows what became of its process
    assert conditions(pod)["Ready"][0] == "False" and conditions(pod)["ContainersReady"][0] == "True"
    assert ("n1", "NodeNotReady") in reasons(cluster.store, "default")
    assert ("a", "NodeNotReady") in reasons(cluster.store, "ns")


def test_pods_go_once_their_toleration_ran_out_and_stay_terminating_while_no_kubelet_confirms() -> None:
    cluster = Cluster("n1")
    cluster.running_pod("patient", "n1")  # the admission gave it 300 s of toleration
    cluster.running_pod(
        "quick", "n1", [{"key": UNREACHABLE, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 5}]
    )
    cluster.running_pod(
        "intolerant", "n1", [{"key": UNREACHABLE, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 0}]
    )
    cluster.after(GRACE + 1)  # unreachable: a pod that does not tolerate it (for more than 0 s) is deleted at once
    gone = cluster.pod("intolerant")
    assert gone is not None and "deletionTimestamp" in gone["metadata"]
    assert conditions(gone)["DisruptionTarget"] == ("True", "DeletionByTaintManager")
    cluster.after(4)
    assert "deletionTimestamp" not in (cluster.pod("quick") or {})["metadata"]
    cluster.after(2)
    quick = cluster.pod("quick")
    assert quick is not None and "deletionTimestamp" in quick["metadata"]  # Terminating: its kubelet is gone
    assert ("quick", "TaintManagerEviction") in reasons(cluster.store, "ns")
    assert "deletionTimestamp" not in (cluster.pod("patient") or {})["metadata"]
    cluster.after(300)
    patient = cluster.pod("patient")
    assert patient is not None and "deletionTimestamp" in patient["metadata"]
    cluster.after(3600)
    assert cluster.pod("patient") is not None  # still Terminating an hour later: only the node's return or deletion


def test_a_node_back_loses_its_taints_and_its_pods_scheduled_deletions() -> None:
    cluster = Cluster("n1")
    cluster.running_pod("a", "n1")
    cluster.after(GRACE + 1)
    assert taints(cluster.node("n1"))
    cluster.renew("n1")
    cluster.after(1)
    assert not taints(cluster.node("n1")) and conditions(cluster.node("n1"))["Ready"] == ("True", "KubeletReady")
    cluster.after(400)  # the node kept answering: the 300 s toleration of the pod no longer counts
    cluster.renew("n1")
    cluster.after(1)
    assert "deletionTimestamp" not in (cluster.pod("a") or {})["metadata"]


def test_the_pods_of_a_deleted_node_are_failed_and_force_deleted_after_the_quarantine() -> None:
    cluster = Cluster("n1", "n2")
    cluster.running_pod("a", "n1")
    cluster.store.delete("nodes", "", "n1")
    watch = cluster.store.watch("pods", "ns", resource_version=cluster.store.list("pods", "ns")[1])
    cluster.after(0)  # the collector notices the pod bound to a node that is gone
    cluster.after(39)
    assert cluster.pod("a") is not None
    cluster.after(2)
    assert cluster.pod("a") is None  # force-deleted: no kubelet needed
    modified, deleted = watch.next(0), watch.next(0)
    assert modified is not None and deleted is not None and deleted[0] == "DELETED"
    assert modified[1]["status"]["phase"] == "Failed"
    assert conditions(modified[1])["DisruptionTarget"] == ("True", "DeletionByPodGC")


def test_the_scheduler_spreads_pods_and_counts_why_no_node_fits() -> None:
    cluster = Cluster("n1", "n2")
    for name in ("a", "b"):
        cluster.store.create(
            "pods",
            "ns",
            {
                "metadata": {"name": name},
                "spec": {"containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}]},
            },
        )
    cluster.scheduler.step()
    assert sorted((cluster.pod(name) or {})["spec"]["nodeName"] for name in ("a", "b")) == ["n1", "n2"]
    cluster.after(GRACE + 1)  # both silent: both unreachable
    cluster.renew("n2")
    cluster.after(1)
    cluster.store.create(
        "pods",
        "ns",
        {
            "metadata": {"name": "big"},
            "spec": {"containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "2"}}}]},
        },
    )
    cluster.scheduler.step()
    big = cluster.pod("big")
    assert big is not None and not big["spec"].get("nodeName")
    scheduled = next(c for c in big["status"]["conditions"] if c["type"] == "PodScheduled")
    assert scheduled["message"] == (
        "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) had untolerated taint "
        "{node.kubernetes.io/unreachable: }."
    )
