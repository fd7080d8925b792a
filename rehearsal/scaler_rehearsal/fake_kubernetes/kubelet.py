"""The kubelet of the rehearsal's node: it runs the one container of each pod bound to its node as a local process
(`containers.py`) started with only what the pod spec gives it (`pod_environment.py`), and reports what becomes of
it as a kubelet does: the pod's phase and conditions, the container's state (`waiting` with ErrImagePull,
ImagePullBackOff, InvalidImageName, CreateContainerConfigError or CrashLoopBackOff; `running`; `terminated` with its
exit code and Completed, Error, OOMKilled or StartError), its restarts (`restartPolicy`, with the kubelet's back-off)
and events. A pod being deleted gets SIGTERM, SIGKILL after its grace period, and is removed from the API once its
processes have ended.

It renews its node's Lease (its heartbeat) every `lease_renew_seconds`. A node lost (`lose`: the machine gone) has
its containers killed at once and its kubelet silent: no lease, no status, nothing started, until it comes back
(`come_back`, the machine restarted): it posts its node Ready again, and a container that died with the machine is
reported as ended (`ContainerStatusUnknown`, exit code 137) and restarted or not as `restartPolicy` says; a pod
deleted meanwhile is removed from the API then.

Only the first container of a pod runs (the manager's pods have one; a pod template's sidecars are not run here).
"""

from __future__ import annotations

import logging
import shutil
import subprocess
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from scaler_rehearsal.fake_kubernetes.containers import Container, Exit
from scaler_rehearsal.fake_kubernetes.events import EventRecorder
from scaler_rehearsal.fake_kubernetes.failures import ApiFailure
from scaler_rehearsal.fake_kubernetes.images import ImageCatalogue, pull_failure, reference_problem
from scaler_rehearsal.fake_kubernetes.nodes import LEASE_NAMESPACE, healthy_conditions, lease_manifest, micro_time
from scaler_rehearsal.fake_kubernetes.object_rules import parse_timestamp
from scaler_rehearsal.fake_kubernetes.pod_environment import ConfigError, PodEnvironment
from scaler_rehearsal.fake_kubernetes.pod_status import PodRuntime, pod_status, reported
from scaler_rehearsal.fake_kubernetes.quantity import QuantityError, parse_quantity
from scaler_rehearsal.fake_kubernetes.store import Store

logger = logging.getLogger(__name__)
Object = dict[str, Any]
#: The kubelet's back-off between image pulls and container restarts: doubling from this, at most MAX.
BACKOFF_SECONDS = 10.0
MAX_BACKOFF_SECONDS = 300.0
#: A container that ran this long without exiting resets its restart back-off.
BACKOFF_RESET_SECONDS = 600.0
#: How often a kubelet renews its node's lease (a quarter of the lease's 40 s).
LEASE_RENEW_SECONDS = 10.0
#: What a kubelet back on its feet says of a container it cannot find any more.
LOST_CONTAINER_MESSAGE = "The container could not be located when the pod was terminated"


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
        lease_renew_seconds: float = LEASE_RENEW_SECONDS,
    ) -> None:
        self._store = store
        self._recorder = recorder.on_node(node_name)
        self._node_name = node_name
        self._lease_renew_seconds = lease_renew_seconds
        self._renewed_at = float("-inf")
        self.lost = False  #: its machine is gone: nothing runs, nothing is reported
        self._images = images
        self._environment = environment
        self._folder = state_directory / "pods"
        self._backoff_base = backoff_seconds
        self._runtimes: dict[str, PodRuntime] = {}  #: by pod uid
        #: processes of a lost node's containers not yet ended when the loss was recorded (a loaded machine): kept to
        #: be reaped, as a Popen dropped while its process runs is never waited for
        self._unreaped: list[subprocess.Popen[bytes]] = []

    # ------------------------------------------------------------ the loop

    def step(self) -> None:
        if self.lost:
            return
        now = self._store.now()
        self._renew_lease(now)
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
                try:  # reaped: a process nobody waited for would outlive its Popen as a zombie
                    runtime.container.process.wait(5.0)
                except subprocess.TimeoutExpired:
                    logger.warning("kubelet: pod %s/%s's process did not end", runtime.namespace, runtime.name)

        for process in self._unreaped:
            process.kill()
            try:
                process.wait(5.0)
            except subprocess.TimeoutExpired:
                logger.warning("kubelet: a lost container's process %d did not end", process.pid)
        self._unreaped.clear()

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

    # ------------------------------------------------------------ its node

    def _renew_lease(self, now: float) -> None:
        if now < self._renewed_at + self._lease_renew_seconds:
            return
        node = self._store.find("nodes", "", self._node_name)
        if node is None:
            return  # not registered (a node deleted): nothing to renew
        self._renewed_at = now
        renewed = micro_time(now)

        def renew(lease: Object) -> bool:
            lease.setdefault("spec", {})["renewTime"] = renewed
            return True

        if self._store.mutate("leases", LEASE_NAMESPACE, self._node_name, renew) is None:
            try:
                self._store.create("leases", LEASE_NAMESPACE, lease_manifest(node, now))
            except ApiFailure:
                pass  # made meanwhile; renewed next time
        ready: Object = next((c for c in node["status"].get("conditions") or [] if c.get("type") == "Ready"), {})
        if ready.get("status") != "True":  # marked Unknown while it was alive: its status says otherwise again
            self._store.mutate("nodes", "", self._node_name, _healthy(now))

    def lose(self) -> None:
        """The machine is gone: every container dies at once (SIGKILL, as with the power), and the kubelet is silent."""
        now = self._store.now()
        self.lost = True
        for runtime in self._runtimes.values():
            if runtime.container is not None:
                runtime.container.kill()
        deadline = time.monotonic() + 10.0
        for runtime in self._runtimes.values():
            container = runtime.container
            if container is None:
                continue
            while container.group_alive() and time.monotonic() < deadline:
                time.sleep(0.02)
            try:
                container.process.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self._unreaped.append(container.process)
            runtime.died_with_node = Exit(
                137, "ContainerStatusUnknown", container.started_at, now, container.container_id
            )
            runtime.container = None

    def come_back(self) -> None:
        """The machine restarted: the kubelet posts its node Ready again, and says what became of its containers."""
        now = self._store.now()
        self.lost = False
        self._renewed_at = float("-inf")
        self._renew_lease(now)
        node = self._store.mutate("nodes", "", self._node_name, _healthy(now))
        if node is not None:
            self._recorder.record(node, "NodeReady", f"Node {self._node_name} status is now: NodeReady")
        for runtime in self._runtimes.values():
            ended, runtime.died_with_node = runtime.died_with_node, None
            if ended is not None:
                pod = self._store.find("pods", runtime.namespace, runtime.name)
                self._ended(runtime, pod, ended, now, LOST_CONTAINER_MESSAGE)

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
                container.release()
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
        status = pod_status(runtime, pod, now)
        waiting = status["containerStatuses"][0]["state"].get("waiting") or {}
        if waiting.get("reason") == "ImagePullBackOff":
            self._say(runtime, pod, "BackOff", waiting["message"], "Normal")
        if runtime.failure is not None and runtime.finished and "Evicted" not in runtime.events_said:
            runtime.events_said.add("Evicted")
            self._recorder.record(pod, "Evicted", runtime.failure[1], "Warning")

        def change(edited: Object) -> bool:
            reported(edited, runtime, status, now)
            return edited != pod

        self._store.mutate("pods", runtime.namespace, runtime.name, change)


def _healthy(now: float) -> Callable[[Object], bool]:
    """What a kubelet posts of its node when it starts again: healthy conditions, and the machine's new boot id."""

    def post(node: Object) -> bool:
        status = node.setdefault("status", {})
        status["conditions"] = healthy_conditions(status.get("conditions") or [], now)
        status.setdefault("nodeInfo", {})["bootID"] = str(uuid.uuid4())
        return True

    return post


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
