"""The rehearsal cluster: its API server (HTTPS, `server.py`), its one node with a scheduler and a kubelet, its
controllers, and the faults tests inject.

    with FakeKubernetes(node_cpu="4", node_memory="8Gi") as cluster:   # cluster.kubeconfig_path is what clients use
        ...

Tests use it in-process; `scaler_fake_kubernetes` runs it as a command. Everything it starts is a process group of
its kubelet's, stopped (SIGTERM, then SIGKILL) when the cluster stops.
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

from scaler.fake_kubernetes import failures
from scaler.fake_kubernetes.access import Tokens
from scaler.fake_kubernetes.api import Api
from scaler.fake_kubernetes.controllers import Controllers
from scaler.fake_kubernetes.events import EventRecorder
from scaler.fake_kubernetes.failures import ApiFailure
from scaler.fake_kubernetes.images import Image, ImageCatalogue
from scaler.fake_kubernetes.kubelet import BACKOFF_SECONDS, Kubelet
from scaler.fake_kubernetes.pod_environment import ApiAccess, PodEnvironment
from scaler.fake_kubernetes.quantity import format_cpu, format_memory, parse_quantity
from scaler.fake_kubernetes.scheduling import Scheduler
from scaler.fake_kubernetes.server import ApiServer
from scaler.fake_kubernetes.store import Store
from scaler.fake_kubernetes.tls import kubeconfig_text, make_certificates, write_private

logger = logging.getLogger(__name__)
NODE_NAME = "rehearsal-node"
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
        images: Iterable[Image] = (),
        state_directory: Path | None = None,
        kubeconfig_path: Path | None = None,
        backoff_seconds: float = BACKOFF_SECONDS,
        namespaces: Iterable[str] = (),
    ) -> None:
        self._node_capacity = (
            format_cpu(parse_quantity(node_cpu)),
            format_memory(parse_quantity(node_memory)),
            node_pods,
        )
        self._node_labels = node_labels or {}
        self._node_taints = list(node_taints)
        self._owns_state = state_directory is None
        if state_directory is None:
            remove_leftover_state()
        self.state_directory = state_directory or Path(tempfile.mkdtemp(prefix=f"{STATE_PREFIX}{os.getpid()}-"))
        self.kubeconfig_path = kubeconfig_path or self.state_directory / "kubeconfig"
        self._images = ImageCatalogue(self.state_directory, images)
        self._namespaces = ["default", "kube-system", "kube-public", "kube-node-lease", *namespaces]
        self.certificates = make_certificates((host, "localhost") if host != "localhost" else ("localhost",))
        self.store = Store()
        self.tokens = Tokens()
        self._host, self._port = host, port
        self._recorder = EventRecorder(self.store, NODE_NAME)
        self._scheduler = Scheduler(self.store, self._recorder, NODE_NAME)
        self._controllers = Controllers(self.store, self.certificates.ca_pem)
        self._backoff_seconds = backoff_seconds
        self._kubelet: Kubelet | None = None
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
        self._kubelet = Kubelet(
            self.store,
            self._recorder,
            NODE_NAME,
            self._images,
            PodEnvironment(self.store, access),
            self.state_directory,
            self._backoff_seconds,
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
        if self._kubelet is not None:
            with self._step_lock:
                self._kubelet.stop_all()
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
            return self._kubelet.container_pids() if self._kubelet is not None else []

    def _seed(self) -> None:
        for namespace in self._namespaces:
            self.store.create("namespaces", "", {"metadata": {"name": namespace}})
        cpu, memory, pods = self._node_capacity
        resources = {"cpu": cpu, "memory": memory, "pods": str(pods), "ephemeral-storage": "100Gi"}
        self.store.create(
            "nodes",
            "",
            {
                "metadata": {
                    "name": NODE_NAME,
                    "labels": {
                        "kubernetes.io/hostname": NODE_NAME,
                        "kubernetes.io/os": "linux",
                        "kubernetes.io/arch": "amd64",
                        "node-role.kubernetes.io/control-plane": "",
                        **self._node_labels,
                    },
                },
                "spec": {"taints": self._node_taints} if self._node_taints else {},
                "status": {
                    "capacity": resources,
                    "allocatable": resources,
                    "conditions": [
                        {
                            "type": "Ready",
                            "status": "True",
                            "reason": "KubeletReady",
                            "message": "kubelet is posting ready status",
                        }
                    ],
                    "addresses": [
                        {"type": "InternalIP", "address": "127.0.0.1"},
                        {"type": "Hostname", "address": NODE_NAME},
                    ],
                    "nodeInfo": {
                        "kubeletVersion": "v1.32.0-scaler-rehearsal",
                        "containerRuntimeVersion": "local-processes",
                        "operatingSystem": "linux",
                        "architecture": "amd64",
                    },
                },
            },
        )

    def _run(self) -> None:
        waker = self.store.waker()
        while not self._stop.is_set():
            waker.wait(STEP_SECONDS)
            waker.clear()
            with self._step_lock:
                for step in (self._controllers.step, self._scheduler.step, self._kubelet_step):
                    try:
                        step()
                    except Exception:  # a bug of one component must not stop the node; logged, retried next step
                        logger.exception("fake kubernetes: a step failed")

    def _kubelet_step(self) -> None:
        if self._kubelet is not None:
            self._kubelet.step()

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
            return (
                pod is not None and self._kubelet is not None and self._kubelet.evict(pod["metadata"]["uid"], message)
            )

    def oom_kill(self, namespace: str, name: str) -> bool:
        pod = self.store.find("pods", namespace, name)
        with self._step_lock:
            return pod is not None and self._kubelet is not None and self._kubelet.oom_kill(pod["metadata"]["uid"])

    def fault(self, name: str, query: dict[str, str]) -> tuple[int, str]:
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
            return 404, f"no fault {name!r}: close-watches, compact, fail-requests, delete-pod, evict-pod, oom-kill\n"
        if not pod:
            return 400, f"{name} takes namespace=NS&name=POD\n"
        if not actions[name](namespace, pod):
            return 404, f"no running pod {namespace}/{pod}\n"
        return 200, f"{name}: {namespace}/{pod}\n"

    def log_of(self, uid: str, previous: bool) -> tuple[Path | None, bool]:
        with self._step_lock:
            if self._kubelet is None:
                return None, False
            path = self._kubelet.log_path(uid, previous)
            running = not previous and self._kubelet.is_running(uid)
        return path, running


def remove_leftover_state() -> None:
    """The state folders of rehearsals that were killed and could not remove theirs (their names carry their pid)."""
    import psutil

    for folder in Path(tempfile.gettempdir()).glob(f"{STATE_PREFIX}*-*"):
        pid = folder.name[len(STATE_PREFIX) :].split("-", 1)[0]
        if pid.isdigit() and not psutil.pid_exists(int(pid)):
            shutil.rmtree(folder, ignore_errors=True)
