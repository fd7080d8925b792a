"""The worker pods of the kubernetes manager, as data: how a pod is made from the settings, the launch spec and the pod
template, how it is labelled, and what a pod's status says of its unit (state, why it waits, how it ended). No I/O.

A pod is one unit and runs one worker: `scaler-worker-<unit id>`, labelled `scaler.io/worker-manager=<manager id>`
(the id as a label value: `label_value`) and `scaler.io/unit-id=<unit id>`, its single container `worker` running
`python -m scaler.worker.process '<the worker's settings>'` from the image's PATH, with `restartPolicy: Never` (a
worker that ends is replaced by the manager, which knows why it ended). The CURVE keys reach it from a Secret
(`keys_secret_name`) through `secretKeyRef` variables: never in the pod spec itself.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import re
from datetime import datetime
from typing import Any

from scaler.config.sections import KubernetesWorkerManagerConfig, section_to_json
from scaler.security.curve import SECRET_KEY_TEXT_VARIABLE, SERVER_KEY_TEXT_VARIABLE
from scaler.worker_manager.backend import LaunchSpec, UnitInfo, UnitState, UnitWait

Object = dict[str, Any]
MANAGER_LABEL = "scaler.io/worker-manager"
UNIT_LABEL = "scaler.io/unit-id"
MANAGER_ANNOTATION = "scaler.io/worker-manager-id"  #: the manager id itself, when its label value had to differ
CONTAINER = "worker"
POD_PREFIX = "scaler-worker-"
WORKER_COMMAND = ["python", "-m", "scaler.worker.process"]
#: Why a pod's container waits, when that means it can never start as asked: the reconciler ends it and holds
#: launches back (rule 12) instead of retrying an image that cannot be pulled forever.
NEVER_STARTS = ("ErrImagePull", "ImagePullBackOff", "InvalidImageName", "CreateContainerConfigError",
                "CreateContainerError")  # fmt: skip
#: How the manager names a pod whose node stopped answering: Kubernetes's own reason for "a pod whose state cannot be
#: confirmed as its kubelet is unresponsive" (NodeUnreachablePodReason; its node controller once wrote it on the pod).
NODE_LOST = "NodeLost"
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
#: The image reference grammar (the distribution project's), to refuse a bad --k8s-image before any pod is made.
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|[-]+)[a-z0-9]+)*"
_IMAGE = re.compile(
    rf"^(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*(?::[0-9]+)?/)?"
    rf"{_COMPONENT}(?:/{_COMPONENT})*(?::[\w][\w.-]{{0,127}})?(?:@[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*"
    r":[0-9a-fA-F]{32,})?$"
)


def label_value(manager_id: str) -> str:
    """The manager id as a label value: itself when it is one, else its valid characters and a hash of it."""
    if len(manager_id) <= 63 and _LABEL_VALUE.match(manager_id):
        return manager_id
    cleaned = re.sub(r"[^A-Za-z0-9_.-]+", "-", manager_id).strip("-_.")[:50].strip("-_.")
    return f"{cleaned}-{hashlib.sha256(manager_id.encode()).hexdigest()[:8]}".lstrip("-")


def keys_secret_name(manager_id: str) -> str:
    return f"scaler-worker-keys-{hashlib.sha256(manager_id.encode()).hexdigest()[:12]}"


def image_problem(image: str) -> str | None:
    if not image or image != image.strip():
        return f"--k8s-image {image!r}: give the workers' image (one with this build of scaler)"
    if not _IMAGE.match(image):
        return f"--k8s-image {image!r}: not an image reference (invalid reference format)"
    return None


def parse_node_selector(text: str) -> dict[str, str]:
    selector: dict[str, str] = {}
    for part in (part.strip() for part in text.split(",") if part.strip()):
        key, separator, value = part.partition("=")
        if not separator or not key.strip():
            raise ValueError(f"--k8s-node-selector {text!r}: expected KEY=VALUE,KEY=VALUE")
        selector[key.strip()] = value.strip()
    return selector


def parse_tolerations(text: str) -> list[Object]:
    tolerations: list[Object] = []
    for part in (part.strip() for part in text.split(",") if part.strip()):
        head, _colon, effect = part.partition(":")
        key, equals, value = head.partition("=")
        if not key.strip() or effect not in ("", "NoSchedule", "PreferNoSchedule", "NoExecute"):
            raise ValueError(f"--k8s-tolerations {text!r}: expected KEY[=VALUE][:EFFECT],... with EFFECT NoSchedule, "
                             "PreferNoSchedule or NoExecute")  # fmt: skip
        toleration: Object = {"key": key.strip(), "operator": "Equal" if equals else "Exists"}
        if equals:
            toleration["value"] = value.strip()
        if effect:
            toleration["effect"] = effect
        tolerations.append(toleration)
    return tolerations


def worker_pod(
    config: KubernetesWorkerManagerConfig, spec: LaunchSpec, unit_id: str, template: Object, has_keys: bool
) -> Object:
    """The pod of one unit: the template, with what the manager decides over it."""
    worker = spec.worker_config(unit_id)
    if has_keys:  # the key files of the manager mean nothing in a pod: the keys come from the Secret, as text
        worker = dataclasses.replace(worker, curve_secret_key=None, curve_server_key=None)
    pod = copy.deepcopy(template)
    pod["apiVersion"], pod["kind"] = "v1", "Pod"
    metadata = pod.setdefault("metadata", {})
    for field in ("generateName", "namespace", "resourceVersion", "uid", "creationTimestamp"):
        metadata.pop(field, None)
    metadata["name"] = f"{POD_PREFIX}{unit_id}"
    metadata.setdefault("labels", {}).update({
        MANAGER_LABEL: label_value(spec.manager_id), UNIT_LABEL: unit_id, "app.kubernetes.io/name": "scaler-worker",
        "app.kubernetes.io/managed-by": "scaler",
    })  # fmt: skip
    metadata.setdefault("annotations", {})[MANAGER_ANNOTATION] = spec.manager_id
    pod_spec = pod.setdefault("spec", {})
    pod_spec["restartPolicy"] = "Never"
    pod_spec["terminationGracePeriodSeconds"] = config.k8s_grace_seconds
    pod_spec.setdefault("automountServiceAccountToken", False)  # a worker does not talk to the Kubernetes API
    if config.k8s_service_account:
        pod_spec["serviceAccountName"] = config.k8s_service_account
    if config.k8s_node_selector:
        pod_spec.setdefault("nodeSelector", {}).update(parse_node_selector(config.k8s_node_selector))
    if config.k8s_tolerations:
        pod_spec["tolerations"] = [*pod_spec.get("tolerations", []), *parse_tolerations(config.k8s_tolerations)]
    containers = pod_spec.setdefault("containers", [])
    container = next((c for c in containers if c.get("name") == CONTAINER), None)
    if container is None:
        container = {"name": CONTAINER}
        containers.insert(0, container)
    container["image"] = config.k8s_image
    container["command"] = list(WORKER_COMMAND)
    container["args"] = [section_to_json(worker)]
    resources = {"cpu": config.k8s_cpu, "memory": config.k8s_memory}
    container["resources"] = {"requests": dict(resources), "limits": dict(resources)}
    env = [variable for variable in container.get("env", []) if variable.get("name") not in _KEY_VARIABLES]
    if has_keys:
        secret = keys_secret_name(spec.manager_id)
        env += [{"name": name, "valueFrom": {"secretKeyRef": {"name": secret, "key": key}}}
                for name, key in _KEY_VARIABLES.items()]  # fmt: skip
    container["env"] = env
    return pod


#: The workers' key variables and the Secret's keys that hold them.
_KEY_VARIABLES = {SECRET_KEY_TEXT_VARIABLE: "worker-secret-key", SERVER_KEY_TEXT_VARIABLE: "server-public-key"}


def keys_secret(manager_id: str, texts: dict[str, str]) -> Object:
    """The Secret the pods' key variables come from."""
    return {
        "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {"name": keys_secret_name(manager_id), "labels": {MANAGER_LABEL: label_value(manager_id)},
                     "annotations": {MANAGER_ANNOTATION: manager_id}},
        "stringData": {key: texts[name] for name, key in _KEY_VARIABLES.items()},
    }  # fmt: skip


def is_ours(pod: Object, manager_id: str) -> bool:
    """Labelled with this manager (and, when its label value is a hash, annotated with its very id)."""
    metadata = pod.get("metadata") or {}
    if (metadata.get("labels") or {}).get(MANAGER_LABEL) != label_value(manager_id):
        return False
    annotated = (metadata.get("annotations") or {}).get(MANAGER_ANNOTATION)
    return annotated in (None, manager_id)


def unit_id_of(pod: Object) -> str:
    metadata = pod.get("metadata") or {}
    return str((metadata.get("labels") or {}).get(UNIT_LABEL) or metadata.get("name", "").removeprefix(POD_PREFIX))


# ---------------------------------------------------------------- what a pod says of its unit


def unit_of(pod: Object) -> UnitInfo:
    """Pending: PENDING (with why it waits); Running: RUNNING, unless its node stopped answering (STOPPING: it is
    deleted, and replaced); being deleted: STOPPING (and why, when Kubernetes said it); finished: GONE, and how."""
    metadata, status = pod.get("metadata") or {}, pod.get("status") or {}
    name = metadata.get("name", "")
    created = metadata.get("creationTimestamp")
    created_at = _seconds(created) if created else 0.0
    phase = status.get("phase", "Pending")
    if phase in ("Succeeded", "Failed"):
        return UnitInfo(unit_id_of(pod), UnitState.GONE, created_at, detail=f"pod {name}: {ending(pod)}")
    why = disruption(pod) or node_lost(pod)
    if metadata.get("deletionTimestamp"):
        detail = f"pod {name}: being deleted" + (f" ({why})" if why else "")
        return UnitInfo(unit_id_of(pod), UnitState.STOPPING, created_at, detail=detail)
    if why:  # its node stopped answering, or Kubernetes is about to delete it: no capacity any more
        return UnitInfo(unit_id_of(pod), UnitState.STOPPING, created_at, detail=f"pod {name}: {why}")
    if phase == "Pending":
        wait = waiting(pod)
        detail = f"pod {name}: {wait.describe()}" if wait else f"pod {name}: Pending"
        return UnitInfo(unit_id_of(pod), UnitState.PENDING, created_at, detail=detail, wait=wait)
    return UnitInfo(unit_id_of(pod), UnitState.RUNNING, created_at, detail=f"pod {name}")


def needs_keys(pod: Object) -> bool:
    """Whether the pod may still start a worker that reads the keys' Secret: not finished and not being deleted (a
    finished pod being deleted stays in the API until its kubelet confirms, and needs the keys no more)."""
    metadata, status = pod.get("metadata") or {}, pod.get("status") or {}
    return status.get("phase", "Pending") not in ("Succeeded", "Failed") and not metadata.get("deletionTimestamp")


def waiting(pod: Object) -> UnitWait | None:
    """Why a Pending pod waits, as Kubernetes says it: unschedulable (its scheduler's words), or its container cannot
    start (an image that cannot be pulled, a missing Secret); None while it is merely being started."""
    status = pod.get("status") or {}
    for condition in status.get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
            reason = condition.get("reason") or "Unschedulable"
            return UnitWait(reason, condition.get("message") or reason)
    for container in status.get("containerStatuses") or []:
        wait = (container.get("state") or {}).get("waiting") or {}
        if wait.get("reason") in NEVER_STARTS:
            return UnitWait(wait["reason"], wait.get("message") or wait["reason"], never_starts=True)
    return None


def node_lost(pod: Object) -> str | None:
    """Kubernetes's words when a running pod's node stopped answering (its kubelet silent for the node monitor grace
    period: the machine gone, or cut off), read from the pod: the node lifecycle controller marked it not ready while
    its containers, as last reported, still were (a kubelet keeps those two together; a pod with readiness gates is
    left out, as they too hold Ready back). None for any other pod."""
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    if status.get("phase") != "Running" or spec.get("readinessGates"):
        return None
    conditions = {c.get("type"): c.get("status") for c in status.get("conditions") or []}
    if conditions.get("Ready") != "False" or conditions.get("ContainersReady") != "True":
        return None
    name = (pod.get("metadata") or {}).get("name", "")
    return f"{NODE_LOST}: Node {spec.get('nodeName', '')} which was running pod {name} is unresponsive"


def disruption(pod: Object) -> str | None:
    """Why Kubernetes is deleting the pod, when it says (the DisruptionTarget condition: DeletionByTaintManager for a
    node unreachable past the pod's toleration, DeletionByPodGC for a node deleted, EvictionByEvictionAPI ...)."""
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "DisruptionTarget" and condition.get("status") == "True":
            reason = condition.get("reason") or "DisruptionTarget"
            return f"{reason}: {condition['message']}" if condition.get("message") else reason
    return None


def deletion_deadline(pod: Object) -> float | None:
    """When a pod being deleted is to be gone (its deletionTimestamp: the kubelet SIGKILLs it then and confirms)."""
    stamp = (pod.get("metadata") or {}).get("deletionTimestamp")
    return _seconds(stamp) if stamp else None


def ending(pod: Object) -> str:
    """How a finished pod ended: `Evicted: <the kubelet's words>`, `DeletionByPodGC: PodGC: node no longer exists`,
    `OOMKilled (exit code 137)`, `Error (exit code 3)`."""
    status = pod.get("status") or {}
    if status.get("reason"):
        return f"{status['reason']}: {status.get('message', '')}".rstrip(": ")
    why = disruption(pod)
    if why:
        return why
    for container in status.get("containerStatuses") or []:
        terminated = (container.get("state") or {}).get("terminated")
        if terminated:
            reason = terminated.get("reason") or "Error"
            message = f": {terminated['message']}" if terminated.get("message") else ""
            return f"{reason} (exit code {terminated.get('exitCode')}){message}"
    return str(status.get("phase", "ended"))


def _seconds(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
