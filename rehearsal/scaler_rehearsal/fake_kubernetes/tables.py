"""Server-side printing: the `Table` objects `kubectl get` asks for (`Accept: ...;as=Table`), with the real
server's columns for pods (NAME READY STATUS RESTARTS AGE, and IP NODE with `-o wide`), events and deployments, and
NAME AGE for the rest."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from scaler_rehearsal.fake_kubernetes.kinds import Kind
from scaler_rehearsal.fake_kubernetes.object_rules import parse_timestamp

Object = dict[str, Any]
Column = tuple[str, str, int, Callable[[Object, float], Any]]  #: (name, type, priority, value of an object at now)


def age(seconds: float) -> str:
    """kubectl's short human durations: 45s, 3m20s, 12m, 5h, 3d."""
    seconds = max(0, int(seconds))
    if seconds < 120:
        return f"{seconds}s"
    minutes = seconds // 60
    if minutes < 10:
        return f"{minutes}m{seconds % 60}s" if seconds % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = minutes // 60
    return f"{hours}h" if hours < 48 else f"{hours // 24}d"


def _age(obj: Object, now: float) -> str:
    created = obj["metadata"].get("creationTimestamp")
    return age(now - parse_timestamp(created)) if created else "<unknown>"


def pod_status(pod: Object) -> str:
    """What kubectl's STATUS column says of a pod."""
    status = pod.get("status") or {}
    reason = status.get("reason") or status.get("phase") or "Unknown"
    for container in status.get("containerStatuses") or []:
        state = container.get("state") or {}
        if state.get("waiting", {}).get("reason"):
            reason = state["waiting"]["reason"]
        elif "terminated" in state:
            terminated = state["terminated"]
            reason = terminated.get("reason") or f"ExitCode:{terminated.get('exitCode')}"
    if "deletionTimestamp" in pod["metadata"]:
        reason = "Terminating"
    return str(reason)


def _ready(pod: Object, _now: float) -> str:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    total = len((pod.get("spec") or {}).get("containers") or [])
    return f"{sum(1 for status in statuses if status.get('ready'))}/{total}"


def _restarts(pod: Object, _now: float) -> str:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    return str(sum(int(status.get("restartCount", 0)) for status in statuses))


def node_status(node: Object) -> str:
    """What kubectl's STATUS column says of a node: Ready, or NotReady (its Ready condition False or Unknown)."""
    ready: Object = next(
        (c for c in (node.get("status") or {}).get("conditions") or [] if c.get("type") == "Ready"), {}
    )
    status = "Ready" if ready.get("status") == "True" else "NotReady"
    return status + (",SchedulingDisabled" if (node.get("spec") or {}).get("unschedulable") else "")


def _roles(node: Object, _now: float) -> str:
    prefix = "node-role.kubernetes.io/"
    roles = sorted(key[len(prefix) :] for key in (node["metadata"].get("labels") or {}) if key.startswith(prefix))
    return ",".join(roles) or "<none>"


_NAME: Column = ("Name", "string", 0, lambda obj, _now: obj["metadata"]["name"])
_AGE: Column = ("Age", "string", 0, _age)
COLUMNS: dict[str, list[Column]] = {
    "pods": [
        _NAME,
        ("Ready", "string", 0, _ready),
        ("Status", "string", 0, lambda pod, _now: pod_status(pod)),
        ("Restarts", "string", 0, _restarts),
        _AGE,
        ("IP", "string", 1, lambda pod, _now: (pod.get("status") or {}).get("podIP", "<none>")),
        ("Node", "string", 1, lambda pod, _now: (pod.get("spec") or {}).get("nodeName", "<none>")),
    ],
    "events": [
        (
            "Last Seen",
            "string",
            0,
            lambda event, now: age(
                now - parse_timestamp(event.get("lastTimestamp") or event["metadata"]["creationTimestamp"])
            ),
        ),
        ("Type", "string", 0, lambda event, _now: event.get("type", "")),
        ("Reason", "string", 0, lambda event, _now: event.get("reason", "")),
        (
            "Object",
            "string",
            0,
            lambda event, _now: (
                f"{str(event.get('involvedObject', {}).get('kind', '')).lower()}/"
                f"{event.get('involvedObject', {}).get('name', '')}"
            ),
        ),
        ("Message", "string", 0, lambda event, _now: event.get("message", "")),
    ],
    "nodes": [
        _NAME,
        ("Status", "string", 0, lambda node, _now: node_status(node)),
        ("Roles", "string", 0, _roles),
        _AGE,
        (
            "Version",
            "string",
            0,
            lambda node, _now: ((node.get("status") or {}).get("nodeInfo") or {}).get("kubeletVersion", ""),
        ),
    ],
    "deployments": [
        _NAME,
        (
            "Ready",
            "string",
            0,
            lambda d, _now: (
                f"{(d.get('status') or {}).get('readyReplicas', 0)}/{(d.get('spec') or {}).get('replicas', 1)}"
            ),
        ),
        ("Up-to-date", "integer", 0, lambda d, _now: (d.get("status") or {}).get("updatedReplicas", 0)),
        ("Available", "integer", 0, lambda d, _now: (d.get("status") or {}).get("availableReplicas", 0)),
        _AGE,
    ],
}


def as_table(kind: Kind, body: Object, now: float) -> Object:
    """A Table of a list, or of one object."""
    columns = COLUMNS.get(kind.plural, [_NAME, _AGE])
    items = body.get("items", []) if body.get("kind", "").endswith("List") else [body]
    rows = [
        {"cells": [value(item, now) for _name, _type, _priority, value in columns], "object": item} for item in items
    ]
    metadata = {
        key: value for key, value in (body.get("metadata") or {}).items() if key in ("resourceVersion", "continue")
    }
    if not body.get("kind", "").endswith("List"):
        metadata = {"resourceVersion": body["metadata"].get("resourceVersion", "")}
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": metadata,
        "columnDefinitions": [
            {
                "name": name,
                "type": kind_,
                "format": "name" if name == "Name" else "",
                "description": "",
                "priority": priority,
            }
            for name, kind_, priority, _ in columns
        ],
        "rows": rows,
    }
