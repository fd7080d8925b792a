"""What the tests against the Kubernetes rehearsal share: one rehearsal per module (its API server in the test's
process, its pods local processes), a namespace of its own for each test, and a lightkube client, the library the
kubernetes worker manager uses."""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from tests.integration.conftest import DEADLINE_SECONDS, wait_for

#: kubectl where this machine has it (google-cloud-cli's); the tests that run it are marked `needs_kubectl`.
KUBECTL = shutil.which("kubectl")
needs_kubectl = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")
#: The taint of a node whose kubelet went silent.
UNREACHABLE = "node.kubernetes.io/unreachable"

#: The rehearsals the module fixtures started, newest last (`kubernetes_backend` makes its backends on the newest).
_ACTIVE: list[Any] = []


def require_extras() -> None:
    pytest.importorskip("lightkube", reason="the kubernetes extra is not installed")
    pytest.importorskip("cryptography", reason="the fake-kubernetes extra is not installed")


@pytest.fixture(scope="module", name="rehearsal")
def rehearsal_fixture() -> Iterator[Any]:
    """One rehearsal cluster for the module: one node, 4 CPUs and 8 GiB for pods, a one-second kubelet back-off."""
    with running_rehearsal() as cluster:
        yield cluster


@contextmanager
def running_rehearsal(**settings: Any) -> Iterator[Any]:
    """A rehearsal cluster (4 CPUs and 8 GiB for pods on each node, a one-second kubelet back-off, unless `settings`
    say otherwise), stopped after, and none of its pods' processes left."""
    require_extras()
    from scaler_rehearsal.fake_kubernetes.cluster import FakeKubernetes

    cluster = FakeKubernetes(**{"node_cpu": "4", "node_memory": "8Gi", "backoff_seconds": 1.0, **settings}).start()
    _ACTIVE.append(cluster)
    try:
        yield cluster
    finally:
        _ACTIVE.remove(cluster)
        pids = cluster.container_pids()
        cluster.stop()
    for pid in pids:
        assert not _alive(pid), f"a pod's process {pid} outlived the rehearsal"


def _alive(pid: int) -> bool:
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


@pytest.fixture(name="client")
def client_fixture(rehearsal: Any) -> Iterator[Any]:
    from lightkube import Client, KubeConfig

    client = Client(KubeConfig.from_file(rehearsal.kubeconfig_path))
    yield client
    client.close()


@pytest.fixture(name="namespace")
def namespace_fixture(rehearsal: Any, client: Any) -> Iterator[str]:
    """A namespace of the test's own, deleted (with its pods) after it."""
    from lightkube.models.meta_v1 import ObjectMeta
    from lightkube.resources.core_v1 import Namespace

    name = f"test-{uuid.uuid4().hex[:8]}"
    client.create(Namespace(metadata=ObjectMeta(name=name)))
    wait_for(lambda: rehearsal.store.find("serviceaccounts", name, "default"), "the namespace's default account")
    yield name
    client.delete(Namespace, name)
    wait_for(lambda: rehearsal.store.find("namespaces", "", name) is None, f"namespace {name} to go", DEADLINE_SECONDS)


def pod_manifest(name: str, command: list[str], image: str = "busybox", **spec: Any) -> dict[str, Any]:
    metadata: dict[str, Any] = {"generateName": name} if name.endswith("-") else {"name": name}
    container: dict[str, Any] = {"name": "main", "image": image, "command": command}
    for key in ("env", "volumeMounts", "resources", "args"):
        if key in spec:
            container[key] = spec.pop(key)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": {"containers": [container], **spec}}


def watch_until(
    rehearsal: Any, kind: Any, namespace: str, resource_version: str, done: Any, timeout_seconds: float = 30
) -> list[tuple[str, Any]]:
    """The events of a watch from `resource_version` until `done(events)` is true (with lightkube's asyncio client,
    the manager's: its watch closes its connection when the iteration stops)."""
    import asyncio

    from lightkube import AsyncClient, KubeConfig

    async def follow() -> list[tuple[str, Any]]:
        client = AsyncClient(KubeConfig.from_file(rehearsal.kubeconfig_path))
        events: list[tuple[str, Any]] = []
        try:
            stream = client.watch(kind, namespace=namespace, resource_version=resource_version)
            async for event in stream:
                events.append(event)
                if done(events):
                    break
            await stream.aclose()
        finally:
            await client.close()
        return events

    return asyncio.run(asyncio.wait_for(follow(), timeout_seconds))


def create(client: Any, manifest: dict[str, Any], namespace: str) -> Any:
    from lightkube import codecs

    return client.create(codecs.from_dict(manifest), namespace=namespace)


def pod_state(client: Any, name: str, namespace: str) -> dict[str, Any]:
    """The pod's first container's state as a dict ({} while it has none)."""
    from lightkube.resources.core_v1 import Pod

    pod = client.get(Pod, name, namespace=namespace)
    statuses = pod.status.containerStatuses or []
    return statuses[0].state.to_dict() if statuses else {}


def kubernetes_backend(spec: Any, _state_directory: Any, **settings: Any) -> Any:
    """A kubernetes backend on the newest rehearsal, its pods of the rehearsal's `scaler-worker` image (this Python
    environment), half a CPU and 512 MiB each."""
    from scaler.config.sections import KubernetesWorkerManagerConfig
    from scaler.worker_manager.kubernetes.backend import KubernetesBackend

    values: dict[str, Any] = dict(
        scheduler_address=spec.worker.scheduler_address,
        worker_manager_id=spec.manager_id,
        k8s_image="scaler-worker:latest",
        k8s_kubeconfig=str(_ACTIVE[-1].kubeconfig_path),
        k8s_cpu="500m",
        k8s_memory="512Mi",
        k8s_grace_seconds=5,
    )
    values.update(settings)
    return KubernetesBackend(KubernetesWorkerManagerConfig(**values), spec.manager_id)


def unit_spec(manager_id: str, **worker: Any) -> Any:
    """A LaunchSpec of the manager `manager_id` for a backend's own tests: its workers (`worker`: more of their
    settings) point at no scheduler."""
    from scaler.config.sections import WorkerConfig
    from scaler.worker_manager.backend import LaunchSpec

    config = WorkerConfig(
        scheduler_address="tcp://127.0.0.1:1", worker_manager_id=manager_id, worker_type="K8S", **worker
    )
    return LaunchSpec(manager_id, config)
