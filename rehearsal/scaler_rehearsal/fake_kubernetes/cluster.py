"""The rehearsal cluster: its API server (HTTPS, `server.py`), its nodes (one unless `nodes` says more), each with a
kubelet, a scheduler over them, its controllers (`controllers.py`, and `node_lifecycle.py` for nodes that stop
answering), and the faults tests inject.

    with FakeKubernetes(node_cpu="4", node_memory="8Gi") as cluster:   # cluster.kubeconfig_path is what clients use
        ...

Tests use it in-process; `scaler_fake_kubernetes` runs it as a command. Everything it starts is a process group of
its kubelets', stopped (SIGTERM, then SIGKILL) when the cluster stops.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from scaler_rehearsal.fake_kubernetes import failures
from scaler_rehearsal.fake_kubernetes.access import Tokens
from scaler_rehearsal.fake_kubernetes.api import Api
from scaler_rehearsal.fake_kubernetes.controllers import Controllers
from scaler_rehearsal.fake_kubernetes.events import EventRecorder
from scaler_rehearsal.fake_kubernetes.failures import ApiFailure
from scaler_rehearsal.fake_kubernetes.images import Image, ImageCatalogue
from scaler_rehearsal.fake_kubernetes.kubelet import BACKOFF_SECONDS, LEASE_RENEW_SECONDS, Kubelet
from scaler_rehearsal.fake_kubernetes.node_lifecycle import GRACE_SECONDS, QUARANTINE_SECONDS, NodeLifecycle
from scaler_rehearsal.fake_kubernetes.nodes import FIRST_NODE, NodeShape, node_manifest, node_names
from scaler_rehearsal.fake_kubernetes.pod_environment import ApiAccess, PodEnvironment
from scaler_rehearsal.fake_kubernetes.quantity import format_cpu, format_memory, parse_quantity
from scaler_rehearsal.fake_kubernetes.scheduling import Scheduler
from scaler_rehearsal.fake_kubernetes.server import ApiServer
from scaler_rehearsal.fake_kubernetes.store import DEFAULT_TOLERATION_SECONDS, Store
from scaler_rehearsal.fake_kubernetes.tls import kubeconfig_text, make_certificates, write_private

logger = logging.getLogger(__name__)
Object = dict[str, Any]
NODE_NAME = FIRST_NODE
#: How often the node's components look again when nothing was written meanwhile.
STEP_SECONDS = 0.1
#: The prefix of a cluster's own state folder (in the temporary directory), followed by its process id.
STATE_PREFIX = "scaler-fake-kubernetes-"
EVICTION_MESSAGE = "The node was low on resource: memory. Threshold quantity: 100Mi, available: 51200Ki. "


class FakeKubernetes:
    def __init__(
        self,
        port: int = 0,
        host: str = "127.0.0.1",
        *,
        node_cpu: str = "8",
        node_memory: str = "16Gi",
        node_pods: int = 110,
        node_labels: dict[str, str] | None = None,
        node_taints: Iterable[dict[str, str]] = (),
        nodes: int = 1,
        images: Iterable[Image] = (),
        state_directory: Path | None = None,
        kubeconfig_path: Path | None = None,
        backoff_seconds: float = BACKOFF_SECONDS,
        namespaces: Iterable[str] = (),
        node_monitor_grace_seconds: float = GRACE_SECONDS,
        toleration_seconds: int = DEFAULT_TOLERATION_SECONDS,
        pod_gc_seconds: float = QUARANTINE_SECONDS,
    ) -> None:
        """`nodes` alike (each with `node_cpu`, `node_memory` ... for pods); a node whose kubelet is silent for
        `node_monitor_grace_seconds` is unreachable, a pod tolerates that for `toleration_seconds` (unless its spec
        says otherwise), and a pod bound to a node that is gone is collected `pod_gc_seconds` later."""
        self._shape = NodeShape(
            format_cpu(parse_quantity(node_cpu)),
            format_memory(parse_quantity(node_memory)),
            node_pods,
            dict(node_labels or {}),
            tuple(node_taints),
        )
        self.node_names = node_names(nodes)
        self._owns_state = state_directory is None
        if state_directory is None:
            remove_leftover_state()
        self.state_directory = state_directory or Path(tempfile.mkdtemp(prefix=f"{STATE_PREFIX}{os.getpid()}-"))
        self.kubeconfig_path = kubeconfig_path or self.state_directory / "kubeconfig"
        self._images = ImageCatalogue(self.state_directory, images)
        self._namespaces = ["default", "kube-system", "kube-public", "kube-node-lease", *namespaces]
        self.certificates = make_certificates((host, "localhost") if host != "localhost" else ("localhost",))
        self.store = Store(default_toleration_seconds=toleration_seconds)
        self.tokens = Tokens()
        self._host, self._port = host, port
        self._recorder = EventRecorder(self.store, NODE_NAME)
        self._scheduler = Scheduler(self.store, self._recorder)
        self._controllers = Controllers(self.store, self.certificates.ca_pem)
        self._node_lifecycle = NodeLifecycle(self.store, self._recorder, node_monitor_grace_seconds, pod_gc_seconds)
        #: a kubelet renews its lease often enough for the controller's grace period (a quarter of it, at most 10 s)
        self._lease_renew_seconds = max(0.05, min(LEASE_RENEW_SECONDS, node_monitor_grace_seconds / 4))
        self._backoff_seconds = backoff_seconds
        self._kubelets: dict[str, Kubelet] = {}
        self._server: ApiServer | None = None
        self._step_lock = threading.Lock()
        self._stop = threading.Event()
        self._loop = threading.Thread(target=self._run, name="fake-kubernetes-node", daemon=True)
        self._injected: list[tuple[int, str | None, str | None]] = []  #: (code, verb, resource), in order
        self._injected_lock = threading.Lock()

    # ------------------------------------------------------------ lifetime

    def start(self) -> FakeKubernetes:
        self._images.prepare()
        server = ApiServer(
            Api(self.store, self.tokens, f"{self._host}:{self._port}"),
            self.store,
            self.tokens,
            self,
            self.certificates,
            self._host,
            self._port,
        )
        self._server = server
        self._port = server.port
        access = ApiAccess(self._host, server.port, self.certificates.ca_pem, self.tokens.for_account)
        for name in self.node_names:
            self._kubelets[name] = Kubelet(
                self.store,
                self._recorder,
                name,
                self._images,
                PodEnvironment(self.store, access),
                self.state_directory,
                self._backoff_seconds,
                self._lease_renew_seconds,
            )
        self._seed()
        server.start()
        write_private(
            self.kubeconfig_path, kubeconfig_text(self.server_url, self.certificates.ca_pem, self.tokens.admin_token)
        )
        self._loop.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._loop.is_alive():
            self._loop.join(10)
        with self._step_lock:
            for kubelet in self._kubelets.values():
                kubelet.stop_all()
        if self._server is not None:
            self._server.stop()
        if self._owns_state:
            shutil.rmtree(self.state_directory, ignore_errors=True)

    def __enter__(self) -> FakeKubernetes:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        return self._port

    @property
    def server_url(self) -> str:
        host = f"[{self._host}]" if ":" in self._host else self._host
        return f"https://{host}:{self._port}"

    @property
    def admin_token(self) -> str:
        return self.tokens.admin_token

    def image_names(self) -> list[str]:
        return self._images.names()

    def container_pids(self) -> list[int]:
        """The first process of every running container (tests)."""
        with self._step_lock:
            return [pid for kubelet in self._kubelets.values() for pid in kubelet.container_pids()]

    def _seed(self) -> None:
        for namespace in self._namespaces:
            self.store.create("namespaces", "", {"metadata": {"name": namespace}})
        for name in self.node_names:
            self.store.create("nodes", "", node_manifest(name, self._shape, self.store.now()))

    def _run(self) -> None:
        waker = self.store.waker()
        while not self._stop.is_set():
            waker.wait(STEP_SECONDS)
            waker.clear()
            with self._step_lock:
                # the kubelets first: a pause of this loop never makes their nodes look silent to the controller
                steps = [kubelet.step for kubelet in self._kubelets.values()]
                for step in [*steps, self._controllers.step, self._node_lifecycle.step, self._scheduler.step]:
                    try:
                        step()
                    except Exception:  # a bug of one component must not stop the node; logged, retried next step
                        logger.exception("fake kubernetes: a step failed")

    # ------------------------------------------------------------ faults (also through the server's fault route)

    def close_watches(self) -> int:
        return self.store.close_watches()

    def compact(self) -> int:
        return self.store.compact()

    def fail_requests(self, code: int, count: int = 1, verb: str | None = None, resource: str | None = None) -> None:
        """The next `count` API requests (of the HTTP method `verb`, on paths of `resource`, when given) are answered
        with `code`: 403, 409, 429 (with Retry-After), 500 or 503, as the real server words them."""
        with self._injected_lock:
            self._injected.extend([(code, verb.upper() if verb else None, resource)] * count)

    def take_injected_failure(self, verb: str, path: str) -> ApiFailure | None:
        if not (path.startswith("/api/") or path.startswith("/apis/")) or path.count("/") < 3:
            return None  # discovery is left alone
        with self._injected_lock:
            for index, (code, wanted_verb, resource) in enumerate(self._injected):
                if (wanted_verb is None or wanted_verb == verb) and (resource is None or f"/{resource}" in path):
                    del self._injected[index]
                    return failures.injected(code)
        return None

    def delete_pod(self, namespace: str, name: str, grace_seconds: int | None = None) -> bool:
        try:
            self.store.delete("pods", namespace, name, grace_seconds)
        except ApiFailure:
            return False
        return True

    def evict_pod(self, namespace: str, name: str, message: str = EVICTION_MESSAGE) -> bool:
        pod = self.store.find("pods", namespace, name)
        with self._step_lock:
            kubelet = self._kubelet_of(pod)
            return pod is not None and kubelet is not None and kubelet.evict(pod["metadata"]["uid"], message)

    def oom_kill(self, namespace: str, name: str) -> bool:
        pod = self.store.find("pods", namespace, name)
        with self._step_lock:
            kubelet = self._kubelet_of(pod)
            return pod is not None and kubelet is not None and kubelet.oom_kill(pod["metadata"]["uid"])

    def lose_node(self, name: str) -> bool:
        """The node's machine is gone: its containers die at once, its kubelet says nothing any more; the control
        plane notices (`node_lifecycle.py`). False for a node unknown or lost already."""
        with self._step_lock:
            kubelet = self._kubelets.get(name)
            if kubelet is None or kubelet.lost:
                return False
            kubelet.lose()
            return True

    def restore_node(self, name: str) -> bool:
        """The node's machine is back: its kubelet registers its node again if it was deleted, posts it Ready and
        says what became of its pods. False for a node unknown or not lost."""
        with self._step_lock:
            kubelet = self._kubelets.get(name)
            if kubelet is None or not kubelet.lost:
                return False
            if self.store.find("nodes", "", name) is None:
                self.store.create("nodes", "", node_manifest(name, self._shape, self.store.now()))
            kubelet.come_back()
            return True

    def delete_node(self, name: str) -> bool:
        """The node is gone for good (what a cloud's node controller does once its machine is): lost, and its Node
        deleted; the pod garbage collector then collects its pods. False for a node unknown or deleted already."""
        with self._step_lock:
            kubelet = self._kubelets.get(name)
            if kubelet is None or self.store.find("nodes", "", name) is None:
                return False
            if not kubelet.lost:
                kubelet.lose()
            self.store.delete("nodes", "", name)
            return True

    def _kubelet_of(self, pod: Object | None) -> Kubelet | None:
        """The kubelet running the pod (None when it is not bound, or its node's machine is gone)."""
        kubelet = self._kubelets.get(((pod or {}).get("spec") or {}).get("nodeName", ""))
        return kubelet if kubelet is not None and not kubelet.lost else None

    def fault(self, name: str, query: dict[str, str]) -> tuple[int, str]:
        node_faults = {"lose-node": self.lose_node, "restore-node": self.restore_node, "delete-node": self.delete_node}
        if name in node_faults:
            node = query.get("name", "")
            if not node:
                return 400, f"{name} takes name=NODE ({', '.join(self.node_names)})\n"
            if not node_faults[name](node):
                state = {"lose-node": "up", "restore-node": "lost", "delete-node": "registered"}[name]
                return 404, f"no node {node} that is {state} ({', '.join(self.node_names)})\n"
            return 200, f"{name}: {node}\n"
        namespace, pod = query.get("namespace", "default"), query.get("name", "")
        if name == "close-watches":
            return 200, f"closed {self.close_watches()} watch(es)\n"
        if name == "compact":
            return 200, f"compacted the history up to resourceVersion {self.compact()}\n"
        if name == "fail-requests":
            try:
                code, count = int(query.get("code", "")), int(query.get("count", "1"))
            except ValueError:
                return 400, "fail-requests takes code=HTTP_CODE and count=N\n"
            self.fail_requests(code, count, query.get("verb"), query.get("resource"))
            return 200, f"the next {count} request(s) fail with {code}\n"
        actions: dict[str, Any] = {
            "delete-pod": self.delete_pod,
            "evict-pod": self.evict_pod,
            "oom-kill": self.oom_kill,
        }
        if name not in actions:
            return 404, (
                f"no fault {name!r}: close-watches, compact, fail-requests, delete-pod, evict-pod, oom-kill, "
                "lose-node, restore-node, delete-node\n"
            )
        if not pod:
            return 400, f"{name} takes namespace=NS&name=POD\n"
        if not actions[name](namespace, pod):
            return 404, f"no running pod {namespace}/{pod}\n"
        return 200, f"{name}: {namespace}/{pod}\n"

    def log_of(self, uid: str, previous: bool) -> tuple[Path | None, bool]:
        with self._step_lock:
            for kubelet in self._kubelets.values():
                path = kubelet.log_path(uid, previous)
                if path is not None:
                    return path, not previous and kubelet.is_running(uid)
        return None, False


def remove_leftover_state() -> None:
    """The state folders of rehearsals that were killed and could not remove theirs (their names carry their pid)."""
    import psutil

    for folder in Path(tempfile.gettempdir()).glob(f"{STATE_PREFIX}*-*"):
        pid = folder.name[len(STATE_PREFIX) :].split("-", 1)[0]
        if pid.isdigit() and not psutil.pid_exists(int(pid)):
            shutil.rmtree(folder, ignore_errors=True)
