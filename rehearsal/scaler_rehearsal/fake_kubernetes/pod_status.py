"""A pod as its kubelet follows it (`PodRuntime`: its container, restarts, back-off, how it ended), and what the
kubelet reports of it: the pod's phase, conditions and container state (`waiting` with its reason, `running`,
`terminated` with its exit code and reason), as a kubelet writes them. No I/O."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scaler_rehearsal.fake_kubernetes.containers import Container, Exit
from scaler_rehearsal.fake_kubernetes.object_rules import timestamp
from scaler_rehearsal.fake_kubernetes.scheduling import set_condition

Object = dict[str, Any]


@dataclass
class PodRuntime:
    uid: str
    namespace: str
    name: str
    folder: Path
    container: Container | None = None
    restarts: int = 0
    last_exit: Exit | None = None  #: the previous run's end (lastState.terminated)
    exit_message: str = ""  #: what the runtime said of it (a command not found)
    waiting: tuple[str, str] | None = ("ContainerCreating", "")  #: (reason, message) while not running
    next_attempt_at: float = 0.0
    backoff_seconds: float = 0.0
    pull_failures: int = 0
    finished: bool = False  #: ended for good (restartPolicy): the phase is Succeeded or Failed
    failure: tuple[str, str] | None = None  #: (reason, message) of a pod the kubelet failed itself (Evicted)
    events_said: set[str] = field(default_factory=set)
    died_with_node: Exit | None = None  #: its container ended with the machine: said once the node is back


def pod_status(runtime: PodRuntime, pod: Object, now: float) -> Object:
    """What the kubelet reports of the pod: its phase, its container's state, restarts, its addresses."""
    spec = (pod["spec"].get("containers") or [{}])[0]
    state: Object
    if runtime.container is not None:
        state = {"running": {"startedAt": timestamp(runtime.container.started_at)}}
    elif runtime.finished and runtime.last_exit is not None:
        state = {"terminated": terminated(runtime.last_exit, runtime.exit_message)}
    elif runtime.waiting is not None:
        reason, message = runtime.waiting
        if reason == "ErrImagePull" and now >= runtime.next_attempt_at - runtime.backoff_seconds + 1.0:
            reason, message = "ImagePullBackOff", f'Back-off pulling image "{spec.get("image", "")}"'
        state = {"waiting": {"reason": reason, **({"message": message} if message else {})}}
    else:
        state = {"waiting": {"reason": "ContainerCreating"}}
    container_status: Object = {
        "name": spec.get("name", ""),
        "image": spec.get("image", ""),
        "imageID": "",
        "state": state,
        "lastState": {"terminated": terminated(runtime.last_exit, "")}
        if runtime.last_exit and not runtime.finished
        else {},
        "ready": runtime.container is not None,
        "restartCount": runtime.restarts,
        "started": runtime.container is not None,
    }
    if runtime.container is not None:
        container_status["containerID"] = runtime.container.container_id
    status: Object = {
        "hostIP": "127.0.0.1",
        "hostIPs": [{"ip": "127.0.0.1"}],
        "podIP": "127.0.0.1",
        "podIPs": [{"ip": "127.0.0.1"}],
        "containerStatuses": [container_status],
    }
    status.setdefault("startTime", (pod.get("status") or {}).get("startTime") or timestamp(now))
    if runtime.failure is not None and runtime.finished:
        status.update(phase="Failed", reason=runtime.failure[0], message=runtime.failure[1])
    elif runtime.finished:
        code = runtime.last_exit.code if runtime.last_exit else 1
        status["phase"] = "Succeeded" if code == 0 else "Failed"
    elif runtime.container is not None or runtime.restarts:
        status["phase"] = "Running"
    else:
        status["phase"] = "Pending"
    return status


def reported(pod: Object, runtime: PodRuntime, status: Object, now: float) -> None:
    """`pod` with the kubelet's report: `status` over what it had, and its readiness conditions."""
    merged = {**(pod.get("status") or {}), **status}
    conditions = merged.get("conditions") or []
    pod["status"] = merged
    pod["status"]["conditions"] = conditions
    ready = "True" if runtime.container is not None and "deletionTimestamp" not in pod["metadata"] else "False"
    stamp = timestamp(now)
    set_condition(pod, "PodReadyToStartContainers", "True", stamp)
    set_condition(pod, "Initialized", "True", stamp)
    reason = "" if ready == "True" else ("PodCompleted" if runtime.finished else "ContainersNotReady")
    set_condition(pod, "Ready", ready, stamp, reason)
    set_condition(pod, "ContainersReady", ready, stamp, reason)


def terminated(ended: Exit | None, message: str) -> Object:
    if ended is None:
        return {}
    found: Object = {
        "exitCode": ended.code,
        "reason": ended.reason,
        "startedAt": timestamp(ended.started_at),
        "finishedAt": timestamp(ended.finished_at),
    }
    if ended.container_id:
        found["containerID"] = ended.container_id
    if message:
        found["message"] = message
    return found
