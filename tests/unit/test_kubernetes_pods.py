"""The kubernetes manager's pods as data (scaler/worker_manager/kubernetes/pods.py): how a pod is made and what a
pod's status says of its unit. Pure: no API server."""

from __future__ import annotations

import json
from typing import Any

import pytest

pytest.importorskip("lightkube", reason="the kubernetes extra is not installed")

from scaler.config.sections import KubernetesWorkerManagerConfig, WorkerConfig
from scaler.security.curve import SECRET_KEY_TEXT_VARIABLE
from scaler.worker_manager.backend import LaunchSpec, UnitState
from scaler.worker_manager.kubernetes import pods


def config(**values: Any) -> KubernetesWorkerManagerConfig:
    return KubernetesWorkerManagerConfig(
        scheduler_address="tcp://10.0.0.1:8516", worker_manager_id="k8s", k8s_image="registry.example/w:1", **values
    )


SPEC = LaunchSpec(
    "k8s",
    WorkerConfig(
        scheduler_address="tcp://10.0.0.1:8516",
        worker_manager_id="k8s",
        worker_type="K8S",
        curve_secret_key="/home/me/w.key_secret",
    ),
)


def test_a_worker_pod_carries_the_labels_the_settings_and_no_key() -> None:
    pod = pods.worker_pod(
        config(k8s_cpu="2", k8s_memory="3Gi", k8s_node_selector="pool=cpu", k8s_tolerations="spot=yes:NoSchedule,gpu"),
        SPEC,
        "abc123",
        {},
        has_keys=True,
    )
    assert pod["metadata"]["name"] == "scaler-worker-abc123"
    assert pod["metadata"]["labels"]["scaler.io/worker-manager"] == "k8s"
    assert pod["metadata"]["labels"]["scaler.io/unit-id"] == "abc123"
    spec = pod["spec"]
    assert spec["restartPolicy"] == "Never" and spec["nodeSelector"] == {"pool": "cpu"}
    assert spec["tolerations"] == [
        {"key": "spot", "operator": "Equal", "value": "yes", "effect": "NoSchedule"},
        {"key": "gpu", "operator": "Exists"},
    ]
    (container,) = spec["containers"]
    assert container["command"] == ["python", "-m", "scaler.worker.process"]
    assert container["resources"] == {
        "requests": {"cpu": "2", "memory": "3Gi"},
        "limits": {"cpu": "2", "memory": "3Gi"},
    }
    settings = json.loads(container["args"][0])
    assert settings["worker_type"] == "K8S-abc123" and settings["curve_secret_key"] is None  # no key path
    assert "key_secret" not in json.dumps(container["args"])
    env = {variable["name"]: variable for variable in container["env"]}
    assert env[SECRET_KEY_TEXT_VARIABLE]["valueFrom"]["secretKeyRef"]["name"] == pods.keys_secret_name("k8s")


def test_the_template_goes_under_the_settings() -> None:
    template = {
        "metadata": {"labels": {"team": "a"}},
        "spec": {
            "securityContext": {"runAsNonRoot": True},
            "volumes": [{"name": "data", "emptyDir": {}}],
            "containers": [
                {"name": "worker", "image": "ignored", "volumeMounts": [{"name": "data", "mountPath": "/d"}]},
                {"name": "sidecar", "image": "busybox"},
            ],
        },
    }
    pod = pods.worker_pod(config(), SPEC, "u1", template, has_keys=False)
    assert pod["metadata"]["labels"]["team"] == "a" and pod["spec"]["securityContext"] == {"runAsNonRoot": True}
    worker, sidecar = pod["spec"]["containers"]
    assert worker["image"] == "registry.example/w:1" and worker["volumeMounts"] == [{"name": "data", "mountPath": "/d"}]
    assert sidecar == {"name": "sidecar", "image": "busybox"}
    assert template["spec"]["containers"][0]["image"] == "ignored"  # the template itself is left as it was


def test_a_manager_id_that_is_no_label_value_is_made_one() -> None:
    assert pods.label_value("k8s") == "k8s"
    value = pods.label_value("kubernetes@my host")
    assert value.startswith("kubernetes-my-host-") and len(value) <= 63
    assert pods.label_value("x" * 80) != pods.label_value("x" * 81)
    pod = {"metadata": {"labels": {pods.MANAGER_LABEL: value}, "annotations": {pods.MANAGER_ANNOTATION: "other"}}}
    assert not pods.is_ours(pod, "kubernetes@my host")  # the same label value, another manager


def test_bad_settings_are_named() -> None:
    assert pods.image_problem("Not An Image") is not None and pods.image_problem("ghcr.io/a/b:1.2") is None
    with pytest.raises(ValueError, match="--k8s-node-selector"):
        pods.parse_node_selector("pool")
    with pytest.raises(ValueError, match="--k8s-tolerations"):
        pods.parse_tolerations("a=b:Sometimes")


def status(phase: str, **extra: Any) -> dict[str, Any]:
    return {
        "metadata": {
            "name": "scaler-worker-u1",
            "labels": {pods.UNIT_LABEL: "u1"},
            "creationTimestamp": "2026-01-01T00:00:00Z",
        },
        "status": {"phase": phase, **extra},
    }


def test_what_a_pod_says_of_its_unit() -> None:
    unschedulable = status(
        "Pending",
        conditions=[
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": "0/3 nodes are available: 3 Insufficient cpu.",
            }
        ],
    )
    unit = pods.unit_of(unschedulable)
    assert unit.state is UnitState.PENDING and unit.wait is not None and not unit.wait.never_starts
    assert unit.wait.describe() == "Unschedulable: 0/3 nodes are available: 3 Insufficient cpu."
    pulling = status(
        "Pending",
        containerStatuses=[{"state": {"waiting": {"reason": "ImagePullBackOff", "message": "Back-off pulling image"}}}],
    )
    assert pods.unit_of(pulling).wait == pods.UnitWait("ImagePullBackOff", "Back-off pulling image", never_starts=True)
    assert pods.unit_of(status("Pending")).wait is None  # being started: booting, not waiting
    assert pods.unit_of(status("Running")).state is UnitState.RUNNING
    oom = status("Failed", containerStatuses=[{"state": {"terminated": {"reason": "OOMKilled", "exitCode": 137}}}])
    assert (pods.unit_of(oom).state, pods.unit_of(oom).detail) == (
        UnitState.GONE,
        "pod scaler-worker-u1: OOMKilled (exit code 137)",
    )
    evicted = status("Failed", reason="Evicted", message="The node was low on resource: memory.")
    assert pods.unit_of(evicted).detail == "pod scaler-worker-u1: Evicted: The node was low on resource: memory."
    deleting = status("Running")
    deleting["metadata"]["deletionTimestamp"] = "2026-01-01T00:01:00Z"
    assert pods.unit_of(deleting).state is UnitState.STOPPING


def test_a_pod_whose_node_stopped_answering_is_named_and_no_capacity() -> None:
    ready = [{"type": "Ready", "status": "False"}, {"type": "ContainersReady", "status": "True"}]
    lost = {**status("Running", conditions=ready), "spec": {"nodeName": "node-2"}}
    unit = pods.unit_of(lost)
    assert unit.state is UnitState.STOPPING and not unit.is_alive  # replaced: its worker is gone with the node
    assert (
        unit.detail
        == "pod scaler-worker-u1: NodeLost: Node node-2 which was running pod scaler-worker-u1 is unresponsive"
    )
    not_ready = [{"type": "Ready", "status": "False"}, {"type": "ContainersReady", "status": "False"}]
    assert pods.node_lost({**lost, "status": {"phase": "Running", "conditions": not_ready}}) is None  # its kubelet said
    gated = {**lost, "spec": {"nodeName": "node-2", "readinessGates": [{"conditionType": "example.com/ready"}]}}
    assert pods.node_lost(gated) is None
    deleted = {**lost, "metadata": {**lost["metadata"], "deletionTimestamp": "2026-01-01T00:01:00Z"}}
    deleted["status"] = {
        **lost["status"],
        "conditions": [
            *ready,
            {
                "type": "DisruptionTarget",
                "status": "True",
                "reason": "DeletionByTaintManager",
                "message": "Taint manager: deleting due to NoExecute taint",
            },
        ],
    }
    assert pods.unit_of(deleted).detail == (
        "pod scaler-worker-u1: being deleted (DeletionByTaintManager: Taint manager: deleting due to NoExecute taint)"
    )
    assert pods.deletion_deadline(deleted) == 1767225660.0
    collected = status(
        "Failed",
        conditions=[
            {
                "type": "DisruptionTarget",
                "status": "True",
                "reason": "DeletionByPodGC",
                "message": "PodGC: node no longer exists",
            }
        ],
        containerStatuses=[{"state": {"running": {}}}],
    )
    assert pods.unit_of(collected).detail == "pod scaler-worker-u1: DeletionByPodGC: PodGC: node no longer exists"


def test_only_a_pod_that_may_still_start_a_worker_needs_the_keys() -> None:
    assert pods.needs_keys(status("Pending")) and pods.needs_keys(status("Running"))
    assert not pods.needs_keys(status("Succeeded")) and not pods.needs_keys(status("Failed"))
    going = status("Running")
    going["metadata"]["deletionTimestamp"] = "2026-01-01T00:01:00Z"
    assert not pods.needs_keys(going)
