"""The rehearsal's nodes as the API shows them: a Node as its kubelet registers it (capacity, labels, taints, the
conditions a healthy kubelet posts) and the Lease it renews in `kube-node-lease` as its heartbeat, which the node
lifecycle controller (`node_lifecycle.py`) watches.

The first node is `rehearsal-node`, the next ones `rehearsal-node-2`, `rehearsal-node-3` ...; each machine is this
one (127.0.0.1).
"""

from __future__ import annotations

import copy
import hashlib
import platform
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from scaler_rehearsal.fake_kubernetes.object_rules import timestamp

Object = dict[str, Any]
FIRST_NODE = "rehearsal-node"
LEASE_NAMESPACE = "kube-node-lease"
#: How long a kubelet's lease is held (the kubelet renews it every quarter of it: 10 s).
LEASE_SECONDS = 40
#: The conditions a healthy kubelet posts: (type, status, reason, message).
HEALTHY_CONDITIONS = (
    ("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
    ("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
    ("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
    ("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
)


@dataclass(frozen=True)
class NodeShape:
    """What every node of the rehearsal has for pods."""

    cpu: str = "8"
    memory: str = "16Gi"
    pods: int = 110
    labels: dict[str, str] = field(default_factory=dict)
    taints: tuple[Object, ...] = ()


def node_names(count: int) -> list[str]:
    return [FIRST_NODE] + [f"{FIRST_NODE}-{number}" for number in range(2, max(1, count) + 1)]


def node_manifest(name: str, shape: NodeShape, now: float) -> Object:
    """The Node a kubelet registers."""
    resources = {"cpu": shape.cpu, "memory": shape.memory, "pods": str(shape.pods), "ephemeral-storage": "100Gi"}
    labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        **({"node-role.kubernetes.io/control-plane": ""} if name == FIRST_NODE else {}),
        **shape.labels,
    }
    return {
        "metadata": {"name": name, "labels": labels},
        "spec": {"taints": copy.deepcopy(list(shape.taints))} if shape.taints else {},
        "status": {
            "capacity": resources,
            "allocatable": dict(resources),
            "conditions": healthy_conditions([], now),
            "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}, {"type": "Hostname", "address": name}],
            "nodeInfo": {
                "machineID": hashlib.sha256(name.encode()).hexdigest()[:32],
                "systemUUID": str(uuid.uuid5(uuid.NAMESPACE_DNS, name)),
                "bootID": str(uuid.uuid4()),
                "kernelVersion": platform.release(),
                "osImage": "scaler rehearsal (local processes)",
                "containerRuntimeVersion": "local-processes",
                "kubeletVersion": "v1.32.0-scaler-rehearsal",
                "kubeProxyVersion": "",
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
        },
    }


def healthy_conditions(current: list[Object], now: float) -> list[Object]:
    """The conditions a kubelet posts about its healthy node (a transition time moves only with its status)."""
    stamp = timestamp(now)
    known = {condition.get("type"): condition for condition in current}
    posted = []
    for kind, status, reason, message in HEALTHY_CONDITIONS:
        before = known.get(kind) or {}
        changed = before.get("status") != status
        posted.append(
            {
                "type": kind,
                "status": status,
                "reason": reason,
                "message": message,
                "lastHeartbeatTime": stamp,
                "lastTransitionTime": stamp if changed else before.get("lastTransitionTime", stamp),
            }
        )
    return posted


def lease_manifest(node: Object, now: float) -> Object:
    """A kubelet's heartbeat: its node's Lease (owned by the node, so that it goes with it)."""
    meta = node["metadata"]
    return {
        "metadata": {
            "name": meta["name"],
            "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": meta["name"], "uid": meta["uid"]}],
        },
        "spec": {"holderIdentity": meta["name"], "leaseDurationSeconds": LEASE_SECONDS, "renewTime": micro_time(now)},
    }


def micro_time(seconds: float) -> str:
    """A MicroTime, as a lease's renewTime is written."""
    return datetime.fromtimestamp(seconds, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_micro_time(text: str) -> float:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc).timestamp()


def condition(node: Object, kind: str) -> Object | None:
    return next((c for c in (node.get("status") or {}).get("conditions") or [] if c.get("type") == kind), None)
