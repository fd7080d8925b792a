"""The Kubernetes rehearsal losing a node as Kubernetes does, with real processes and the client library the manager
uses: a node lost (through the fault route) kills its pods' processes at once and silences its kubelet; the control
plane marks it unreachable (taints, its pods not ready), deletes its pods once their toleration ran out (they stay
Terminating: no kubelet confirms), schedules new pods elsewhere or keeps them Unschedulable saying why; a node back
confirms its pods' end; a node deleted has its pods collected by the pod garbage collector."""

from __future__ import annotations

import ssl
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

from tests.integration.conftest import DEADLINE_SECONDS, pid_is_alive, wait_for
from tests.integration.kubernetes_harness import (  # noqa: F401 - the fixtures are used by name
    KUBECTL,
    UNREACHABLE,
    client_fixture,
    create,
    namespace_fixture,
    pod_manifest,
    pod_state,
    running_rehearsal,
)

pytestmark = [pytest.mark.integration, pytest.mark.kubernetes, pytest.mark.timeout(120)]
#: Each pod asks for 3 of a node's 4 CPUs: one pod a node.
BIG = {"requests": {"cpu": "3"}}


@pytest.fixture(scope="module", name="rehearsal")
def two_nodes() -> Iterator[Any]:
    """Two nodes; a kubelet silent for 1 s makes its node unreachable; a deleted node's pods are collected 1 s later."""
    with running_rehearsal(nodes=2, node_monitor_grace_seconds=1.0, pod_gc_seconds=1.0) as cluster:
        yield cluster


def fault(rehearsal: Any, name: str, node: str) -> str:
    """POST /rehearsal/<name>?name=<node>, as a test outside the process would (the kubeconfig's token)."""
    import urllib.request

    context = ssl.create_default_context(cadata=rehearsal.certificates.ca_pem)
    request = urllib.request.Request(
        f"{rehearsal.server_url}/rehearsal/{name}?name={node}",
        method="POST",
        headers={"Authorization": f"Bearer {rehearsal.admin_token}"},
    )
    with urllib.request.urlopen(request, context=context, timeout=DEADLINE_SECONDS) as answer:
        return str(answer.read().decode())


def node_of(client: Any, name: str, namespace: str) -> str:
    from lightkube.resources.core_v1 import Pod

    return str(client.get(Pod, name, namespace=namespace).spec.nodeName)


def conditions(obj: Any) -> dict[str, str]:
    return {c.type: c.status for c in obj.status.conditions or []}


def test_a_lost_node_s_pods_die_at_once_and_the_control_plane_follows_until_it_is_back(
    rehearsal: Any, client: Any, namespace: str
) -> None:
    first, lost = rehearsal.node_names
    on_lost = {"nodeSelector": {"kubernetes.io/hostname": lost}, "restartPolicy": "Never"}
    quick = [{"key": UNREACHABLE, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 1}]
    manifests = {
        "filler-": pod_manifest(
            "filler-", ["sleep", "300"], resources=BIG, nodeSelector={"kubernetes.io/hostname": first}
        ),
        "patient-": pod_manifest("patient-", ["sleep", "300"], terminationGracePeriodSeconds=1, **on_lost),
        "quick-": pod_manifest(
            "quick-", ["sleep", "300"], tolerations=quick, terminationGracePeriodSeconds=1, **on_lost
        ),
    }
    names = {prefix: create(client, manifest, namespace).metadata.name for prefix, manifest in manifests.items()}
    for name in names.values():
        wait_for(lambda name=name: "running" in pod_state(client, name, namespace), f"{name} to run")
    before = set(rehearsal.container_pids())
    try:
        lose_and_restore(rehearsal, client, namespace, lost, names, before)
    finally:
        rehearsal.restore_node(lost)  # a no-op when the test did it: the namespace's pods on it can end


def lose_and_restore(
    rehearsal: Any, client: Any, namespace: str, lost: str, names: dict[str, str], before: set[int]
) -> None:
    from lightkube.resources.core_v1 import Event, Node, Pod

    patient, quick_pod = names["patient-"], names["quick-"]
    assert fault(rehearsal, "lose-node", lost) == f"lose-node: {lost}\n"
    dead = before - set(rehearsal.container_pids())
    assert len(dead) == 2 and not any(pid_is_alive(pid) for pid in dead)  # the machine is gone: at once

    def unreachable() -> bool:
        node = client.get(Node, lost)
        taints = {(t.key, t.effect) for t in node.spec.taints or []}
        return conditions(node).get("Ready") == "Unknown" and taints == {
            (UNREACHABLE, "NoSchedule"),
            (UNREACHABLE, "NoExecute"),
        }

    wait_for(unreachable, f"{lost} to be unreachable")
    if KUBECTL is not None:  # as kubectl shows it
        listed = subprocess.run(
            [KUBECTL, "--kubeconfig", str(rehearsal.kubeconfig_path), "get", "nodes", "--no-headers"],
            capture_output=True,
            text=True,
            timeout=DEADLINE_SECONDS,
        )
        statuses = {line.split()[0]: line.split()[1] for line in listed.stdout.splitlines() if line.strip()}
        assert statuses == dict.fromkeys(rehearsal.node_names, "Ready") | {lost: "NotReady"}, listed
    # the pod tolerating it for 1 s is deleted, and stays Terminating past its grace period: no kubelet confirms
    terminating = wait_for(
        lambda: (pod := client.get(Pod, quick_pod, namespace=namespace)).metadata.deletionTimestamp and pod,
        "the taint eviction of the pod tolerating 1 s",
    )
    assert conditions(terminating)["DisruptionTarget"] == "True" and conditions(terminating)["Ready"] == "False"
    assert conditions(terminating)["ContainersReady"] == "True" and terminating.status.phase == "Running"
    deadline = terminating.metadata.deletionTimestamp.timestamp()
    wait_for(lambda: rehearsal.store.now() > deadline + 1, "its deletion deadline to pass")
    assert client.get(Pod, quick_pod, namespace=namespace).metadata.deletionTimestamp is not None
    remaining = client.get(Pod, patient, namespace=namespace)  # tolerates it 300 s: Running, not ready
    assert remaining.metadata.deletionTimestamp is None and conditions(remaining)["Ready"] == "False"
    reasons = {(e.involvedObject.name, e.reason) for e in client.list(Event, namespace=namespace)}
    assert {(patient, "NodeNotReady"), (quick_pod, "TaintManagerEviction")} <= reasons
    # a new pod fits no node: the lost one is tainted, the other one full
    waiting = create(client, pod_manifest("waiting-", ["sleep", "300"], resources=BIG), namespace).metadata.name

    def unschedulable() -> str:
        conditions = client.get(Pod, waiting, namespace=namespace).status.conditions or []
        return next((c.message for c in conditions if c.type == "PodScheduled"), "")

    assert wait_for(unschedulable, "the new pod to be Unschedulable") == (
        f"0/2 nodes are available: 1 Insufficient cpu, 1 node(s) had untolerated taint {{{UNREACHABLE}: }}."
    )
    assert fault(rehearsal, "restore-node", lost) == f"restore-node: {lost}\n"
    # back: its kubelet confirms the deleted pod's end, and says what became of the other one's container
    wait_for(lambda: quick_pod not in {p.metadata.name for p in client.list(Pod, namespace=namespace)}, "its end")
    wait_for(lambda: "terminated" in pod_state(client, patient, namespace), "what became of the patient pod")
    terminated = pod_state(client, patient, namespace)["terminated"]
    assert (terminated["reason"], terminated["exitCode"]) == ("ContainerStatusUnknown", 137)
    assert client.get(Pod, patient, namespace=namespace).status.phase == "Failed"  # restartPolicy: Never
    node = client.get(Node, lost)
    assert conditions(node)["Ready"] == "True" and not node.spec.taints
    wait_for(lambda: "running" in pod_state(client, waiting, namespace), "the waiting pod to run on the node back")
    assert node_of(client, waiting, namespace) == lost


def test_a_deleted_node_s_pods_are_collected(rehearsal: Any, client: Any, namespace: str) -> None:
    from lightkube.resources.core_v1 import Pod

    name = create(client, pod_manifest("orphan-", ["sleep", "300"], resources=BIG), namespace).metadata.name
    wait_for(lambda: "running" in pod_state(client, name, namespace), "the pod to run")
    node = node_of(client, name, namespace)
    listed = client.list(Pod, namespace=namespace)
    list(listed)
    since = listed.resourceVersion
    try:
        fault(rehearsal, "delete-node", node)
        wait_for(lambda: not list(client.list(Pod, namespace=namespace)), "the pod garbage collector", DEADLINE_SECONDS)
        store_events = rehearsal.store.watch("pods", namespace, resource_version=since)
        changes = [store_events.next(0) for _ in range(10)]
        failed = [
            obj for kind, obj in filter(None, changes) if kind == "MODIFIED" and obj["status"]["phase"] == "Failed"
        ]
        assert (
            failed
            and {"type": "DisruptionTarget", "status": "True", "reason": "DeletionByPodGC"}.items()
            <= next(c for c in failed[-1]["status"]["conditions"] if c["type"] == "DisruptionTarget").items()
        )
    finally:
        rehearsal.restore_node(node)  # registered again, for the module's next tests
