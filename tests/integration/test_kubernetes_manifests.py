"""The manifests the guide ships (`scaler --example kubernetes_cluster`) applied to the Kubernetes rehearsal with
kubectl, as the guide says, and run: the scheduler and the kubernetes manager run as Deployments (the manager through
its service account, so the Role is what allows it), and a client of this machine gets its tasks done by the worker
pods the in-cluster manager starts. Their ports are moved to free ones; nothing else of them is changed."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from scaler import Client
from scaler.config.example_files import example_text
from scaler.io.address import free_tcp_port_block
from scaler.security.key_folder import KeyFolder
from tests.integration.conftest import COLD_START_SECONDS, DEADLINE_SECONDS, wait_for
from tests.integration.kubernetes_harness import (  # noqa: F401 - the fixtures are used by name
    KUBECTL,
    client_fixture,
    needs_kubectl,
    rehearsal_fixture,
)

pytestmark = [
    pytest.mark.integration,
    pytest.mark.kubernetes,
    pytest.mark.timeout(240),
    needs_kubectl,
]
KEY_FILES = ("server.key", "server.key_secret", "client.key", "workers.key", "workers.key_secret")


def hostname(_: int) -> str:
    import os

    return os.environ["HOSTNAME"]


def kubectl(rehearsal: Any, *args: str, stdin: str | None = None) -> str:
    assert KUBECTL is not None
    done = subprocess.run(
        [KUBECTL, "--kubeconfig", str(rehearsal.kubeconfig_path), *args],
        capture_output=True,
        text=True,
        timeout=DEADLINE_SECONDS,
        input=stdin,
    )
    assert done.returncode == 0, f"kubectl {' '.join(args)}: {done.stderr}"
    return done.stdout


def test_the_shipped_manifests_run_the_stack_in_the_cluster(rehearsal: Any, client: Any, tmp_path: Path) -> None:
    from lightkube.resources.core_v1 import Pod

    keys = KeyFolder.ensure(tmp_path / "keys")
    base = free_tcp_port_block(3)
    manifests = example_text("kubernetes_cluster")
    for offset, default in enumerate(("8516", "8517", "8518")):
        manifests = manifests.replace(default, str(base + offset))
    (tmp_path / "kubernetes_cluster.yaml").write_text(manifests)
    try:
        applied = kubectl(rehearsal, "apply", "-f", str(tmp_path / "kubernetes_cluster.yaml"))
        assert "deployment.apps/scaler-manager created" in applied and "role.rbac.authorization.k8s.io" in applied
        secret = kubectl(
            rehearsal,
            "create",
            "secret",
            "generic",
            "scaler-keys",
            "-n",
            "scaler",
            "--dry-run=client",
            "-o",
            "yaml",
            *(f"--from-file={keys.path(name)}" for name in KEY_FILES),
        )
        kubectl(rehearsal, "apply", "-f", "-", stdin=secret)
        address = f"tcp://127.0.0.1:{base}"  # a Service of the rehearsal is this machine's address and port
        with Client(
            address,
            object_storage_address=f"tcp://127.0.0.1:{base + 1}",
            curve_secret_key=keys.path("client.key_secret"),
            curve_server_key=keys.path("server.key"),
            connect_timeout_seconds=COLD_START_SECONDS,
        ) as scaler_client:
            names = set(scaler_client.map(hostname, range(8)))
        assert names and all(name.startswith("scaler-worker-") for name in names), names
        workers = {
            pod.metadata.name
            for pod in client.list(Pod, namespace="scaler", labels={"scaler.io/worker-manager": "k8s"})
        }
        assert names <= workers
        secrets = kubectl(rehearsal, "get", "secrets", "-n", "scaler", "-o", "name")
        assert "scaler-worker-keys-" in secrets  # the manager gave its workers their keys through a Secret
    finally:
        kubectl(rehearsal, "delete", "namespace", "scaler", "--wait=false")
        wait_for(
            lambda: rehearsal.store.find("namespaces", "", "scaler") is None,
            "the namespace and its pods to go",
            COLD_START_SECONDS,
        )
