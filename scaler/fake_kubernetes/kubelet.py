"""The kubelet of the rehearsal's node: it runs the one container of each pod bound to its node as a local process
(`containers.py`) started with only what the pod spec gives it (`pod_environment.py`), and reports what becomes of
it as a kubelet does: the pod's phase and conditions, the container's state (`waiting` with ErrImagePull,
ImagePullBackOff, InvalidImageName, CreateContainerConfigError or CrashLoopBackOff; `running`; `terminated` with its
exit code and Completed, Error, OOMKilled or StartError), its restarts (`restartPolicy`, with the kubelet's back-off)
and events. A pod being deleted gets SIGTERM, SIGKILL after its grace period, and is removed from the API once its
processes have ended.

Only the first container of a pod runs (the manager's pods have one; a pod template's sidecars are not run here).
"""

from __future__ import annotations

import logging
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scaler.fake_kubernetes.containers import Container, Exit
from scaler.fake_kubernetes.events import EventRecorder
from scaler.fake_kubernetes.images import ImageCatalogue, pull_failure, reference_problem
from scaler.fake_kubernetes.object_rules import parse_timestamp, timestamp
from scaler.fake_kubernetes.pod_environment import ConfigError, PodEnvironment
from scaler.fake_kubernetes.quantity import QuantityError, parse_quantity
from scaler.fake_kubernetes.scheduling import set_condition
from scaler.fake_kubernetes.store import Store

logger = logging.getLogger(__name__)
Object = dict[str, Any]
#: The kubelet's back-off between image pulls and container restarts: doubling from this, at most MAX.
BACKOFF_SECONDS = 10.0
MAX_BACKOFF_SECONDS = 300.0
#: A container that ran this long without exiting resets its restart back-off.
BACKOFF_RESET_SECONDS = 600.0


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


class Kubelet:
    def __init__(
        self,
        store: Store,
        recorder: EventRecorder,
        node_name: str,
        images: ImageCatalogue,
        environment: PodEnvironment,
        state_directory: Path,
        backoff_seconds: float = BACKOFF_SECONDS,
    ) -> None:
        self._store = store
        self._recorder = recorder
        self._node_name = node_name
        self._images = images
        self._environment = environment
        self._folder = state_directory / "pods"
        self._backoff_base = backoff_seconds
        self._runtimes: dict[str, PodRuntime] = {}  #: by pod uid

    # ------------------------------------------------------------ the loop

    def step(self) -> None:
        now = self._store.now()
        pods = {
            pod["metadata"]["uid"]: pod
            for pod in self._store.items("pods")
            if pod["spec"].get("nodeName") == self._node_name
        }
        for uid, pod in pods.items():
            if uid not in self._runtimes and not _is_terminal(pod):
                meta = pod["metadata"]
                folder = self._folder / f"{meta['namespace']}_{meta['name']}_{uid[:8]}"
                self._runtimes[uid] = PodRuntime(uid, meta["namespace"], meta["name"], folder)
        for uid, runtime in list(self._runtimes.items()):
            followed = pods.get(uid)
            try:
                self._follow(runtime, followed, now)
            except Exception:  # one pod's trouble must not stop the others
                logger.exception("kubelet: pod %s/%s", runtime.namespace, runtime.name)

    def stop_all(self, grace_seconds: float = 2.0) -> None:
        """Stop every container (SIGTERM, SIGKILL after `grace_seconds`): the node shuts down."""
        import time

        now = self._store.now()
        for runtime in self._runtimes.values():
            if runtime.container is not None:
                runtime.container.stop(now, grace_seconds)
        deadline = time.monotonic() + grace_seconds + 5.0
        while time.monotonic() < deadline:
            alive = [
                r.container for r in self._runtimes.values() if r.container is not None and r.container.group_alive()
            ]
            for container in alive:
                container.step(self._store.now())
            if not alive:
                break
            time.sleep(0.05)
        for runtime in self._runtimes.values():
            if runtime.container is not None:
                runtime.container.kill()

    def container_pids(self) -> list[int]:
        return [r.container.pid for r in self._runtimes.values() if r.container is not None and r.container.is_running]

    def is_running(self, uid: str) -> bool:
        runtime = self._runtimes.get(uid)
        return runtime is not None and runtime.container is not None and runtime.container.is_running

    def log_path(self, uid: str, previous: bool = False) -> Path | None:
        runtime = self._runtimes.get(uid)
        if runtime is None:
            return None
        attempt = runtime.restarts - 1 if previous else runtime.restarts
        path = runtime.folder / "logs" / f"{attempt}.log"
        return path if attempt >= 0 and path.exists() else None

    # ------------------------------------------------------------ faults

    def evict(self, uid: str, message: str) -> bool:
        runtime = self._runtimes.get(uid)
        if runtime is None or runtime.finished:
            return False
        runtime.failure = ("Evicted", message)
        if runtime.container is not None:
            runtime.container.stop(self._store.now(), 0.0)
        return True

    def oom_kill(self, uid: str) -> bool:
        runtime = self._runtimes.get(uid)
        if runtime is None or runtime.container is None or not runtime.container.is_running:
            return False
        runtime.container.oom_kill()
        return True

    # ------------------------------------------------------------ one pod

    def _follow(self, runtime: PodRuntime, pod: Object | None, now: float) -> None:
        container = runtime.container
        if container is not None:
            ended = container.step(now)
            if ended is not None and not container.group_alive():
                runtime.container = None
                self._ended(runtime, pod, ended, now)
        if pod is None:  # removed from the API at once (a forced deletion): its processes go without a grace period
            if runtime.container is not None:
                runtime.container.stop(now, 2.0)
                return
            self._forget(runtime)
            return
        deleting = "deletionTimestamp" in pod["metadata"]
        if deleting:
            if runtime.container is not None:
                runtime.container.stop(now, max(0.0, parse_timestamp(pod["metadata"]["deletionTimestamp"]) - now))
                return
            self._report(runtime, pod, now)
            self._store.remove("pods", runtime.namespace, runtime.name)
            self._forget(runtime)
            return
        if runtime.failure is not None and runtime.container is None:
            runtime.finished = True
        if runtime.container is None and not runtime.finished and now >= runtime.next_attempt_at:
            self._start(runtime, pod, now)
        self._report(runtime, pod, now)

    def _start(self, runtime: PodRuntime, pod: Object, now: float) -> None:
        spec = (pod["spec"].get("containers") or [{}])[0]
        reference = str(spec.get("image", ""))
        problem = reference_problem(reference)
        if problem is not None:
            self._wait(runtime, pod, "InvalidImageName", problem, "InspectFailed", now, retry=False)
            return
        image = self._images.find(reference)
        if image is None:
            runtime.pull_failures += 1
            self._say(runtime, pod, "Pulling", f'Pulling image "{reference}"', "Normal")
            message = pull_failure(reference)
            self._recorder.record(pod, "Failed", f'Failed to pull image "{reference}": {message}', "Warning")
            self._recorder.record(pod, "Failed", "Error: ErrImagePull", "Warning")
            runtime.waiting = ("ErrImagePull", message)
            self._back_off(runtime, now)
            return
        runtime.pull_failures = 0
        if spec.get("imagePullPolicy") == "Always":
            self._say(runtime, pod, "Pulling", f'Pulling image "{reference}"', "Normal")
        self._say(runtime, pod, "Pulled", f'Successfully pulled image "{reference}"', "Normal")
        try:
            start = self._environment.prepare(pod, spec, image, runtime.folder)
        except ConfigError as error:
            self._wait(runtime, pod, "CreateContainerConfigError", str(error), "Failed", now, retry=True)
            return
        except FileNotFoundError as error:
            self._failed_start(runtime, pod, str(error), now)
            return
        log_path = runtime.folder / "logs" / f"{runtime.restarts}.log"
        runtime.container = Container(start.argv, start.environment, start.cwd, log_path, _memory_limit(spec), now)
        runtime.waiting = None
        self._recorder.record(pod, "Created", f"Created container {spec.get('name', '')}")
        self._recorder.record(pod, "Started", f"Started container {spec.get('name', '')}")

    def _wait(
        self, runtime: PodRuntime, pod: Object, reason: str, message: str, event: str, now: float, retry: bool
    ) -> None:
        runtime.waiting = (reason, message)
        self._recorder.record(pod, event, f"Error: {message}" if reason != "InvalidImageName" else message, "Warning")
        if retry:
            self._back_off(runtime, now)
        else:
            runtime.next_attempt_at = float("inf")

    def _failed_start(self, runtime: PodRuntime, pod: Object, message: str, now: float) -> None:
        self._recorder.record(pod, "Failed", f"Error: {message}", "Warning")
        container_id = ""
        self._ended(runtime, pod, Exit(128, "StartError", now, now, container_id), now, message)

    def _back_off(self, runtime: PodRuntime, now: float) -> None:
        runtime.backoff_seconds = min(MAX_BACKOFF_SECONDS, runtime.backoff_seconds * 2 or self._backoff_base)
        runtime.next_attempt_at = now + runtime.backoff_seconds

    def _ended(self, runtime: PodRuntime, pod: Object | None, ended: Exit, now: float, message: str = "") -> None:
        runtime.last_exit = ended
        runtime.exit_message = message
        if pod is None or "deletionTimestamp" in pod["metadata"] or runtime.failure is not None:
            runtime.finished = True  # a pod on its way out (deleted, evicted) ends in a terminal phase
            return
        policy = pod["spec"].get("restartPolicy", "Always")
        if policy == "Never" or (policy == "OnFailure" and ended.code == 0):
            runtime.finished = True
            return
        runtime.restarts += 1
        if ended.finished_at - ended.started_at >= BACKOFF_RESET_SECONDS:
            runtime.backoff_seconds = 0.0
        if runtime.restarts == 1:
            runtime.next_attempt_at = now  # the first restart is at once; then the back-off doubles
        else:
            self._back_off(runtime, now)
            spec = (pod["spec"].get("containers") or [{}])[0]
            meta = pod["metadata"]
            runtime.waiting = (
                "CrashLoopBackOff",
                f"back-off {runtime.backoff_seconds:g}s restarting failed container="
                f"{spec.get('name', '')} pod={meta['name']}_{meta['namespace']}"
                f"({meta['uid']})",
            )
            self._recorder.record(pod, "BackOff", "Back-off restarting failed container", "Warning")

    def _say(self, runtime: PodRuntime, pod: Object, reason: str, message: str, kind: str) -> None:
        if message not in runtime.events_said:
            runtime.events_said.add(message)
            self._recorder.record(pod, reason, message, kind)

    def _forget(self, runtime: PodRuntime) -> None:
        self._runtimes.pop(runtime.uid, None)
        shutil.rmtree(runtime.folder, ignore_errors=True)

    # ------------------------------------------------------------ the pod's status

    def _report(self, runtime: PodRuntime, pod: Object, now: float) -> None:
        status = self._status(runtime, pod, now)
        if runtime.failure is not None and runtime.finished and "Evicted" not in runtime.events_said:
            runtime.events_said.add("Evicted")
            self._recorder.record(pod, "Evicted", runtime.failure[1], "Warning")

        def change(edited: Object) -> bool:
            merged = {**(edited.get("status") or {}), **status}
            conditions = merged.get("conditions") or []
            edited["status"] = merged
            edited["status"]["conditions"] = conditions
            ready = (
                "True" if runtime.container is not None and "deletionTimestamp" not in edited["metadata"] else "False"
            )
            stamp = timestamp(now)
            set_condition(edited, "PodReadyToStartContainers", "True", stamp)
            set_condition(edited, "Initialized", "True", stamp)
            reason = "" if ready == "True" else ("PodCompleted" if runtime.finished else "ContainersNotReady")
            set_condition(edited, "Ready", ready, stamp, reason)
            set_condition(edited, "ContainersReady", ready, stamp, reason)
            return edited != pod

        self._store.mutate("pods", runtime.namespace, runtime.name, change)

    def _status(self, runtime: PodRuntime, pod: Object, now: float) -> Object:
        spec = (pod["spec"].get("containers") or [{}])[0]
        state: Object
        if runtime.container is not None:
            state = {"running": {"startedAt": timestamp(runtime.container.started_at)}}
        elif runtime.finished and runtime.last_exit is not None:
            state = {"terminated": _terminated(runtime.last_exit, runtime.exit_message)}
        elif runtime.waiting is not None:
            reason, message = runtime.waiting
            if reason == "ErrImagePull" and now >= runtime.next_attempt_at - runtime.backoff_seconds + 1.0:
                reason, message = "ImagePullBackOff", f'Back-off pulling image "{spec.get("image", "")}"'
                self._say(runtime, pod, "BackOff", message, "Normal")
            state = {"waiting": {"reason": reason, **({"message": message} if message else {})}}
        else:
            state = {"waiting": {"reason": "ContainerCreating"}}
        container_status: Object = {
            "name": spec.get("name", ""),
            "image": spec.get("image", ""),
            "imageID": "",
            "state": state,
            "lastState": {"terminated": _terminated(runtime.last_exit, "")}
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


def _terminated(ended: Exit | None, message: str) -> Object:
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


def _is_terminal(pod: Object) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def _memory_limit(container: Object) -> int | None:
    limit = ((container.get("resources") or {}).get("limits") or {}).get("memory")
    if limit is None:
        return None
    try:
        return int(parse_quantity(limit))
    except QuantityError:
        return None
