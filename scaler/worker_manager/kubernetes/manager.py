"""`scaler_worker_manager kubernetes`: the shared runner around the kubernetes backend, after the checks that can be
made before anything runs, each said in one line naming the setting and the API's own reason, with exit code 2: the
settings themselves (image reference, node selector, tolerations, pod template), the kubeconfig and its context, then
the API itself, asked to create one worker pod and the keys' Secret as a dry run (the API server answers as it
would for real: a namespace that does not exist, RBAC that forbids pods, a quantity it cannot read)."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any

from scaler.config.sections import KubernetesWorkerManagerConfig, WorkerManagerSettings
from scaler.protocol.exit_codes import EXIT_CONFIGURATION
from scaler.security.curve import key_texts, security_of
from scaler.worker_manager.backend import LaunchSpec, worker_config_of
from scaler.worker_manager.kubernetes import pods as pod_specs
from scaler.worker_manager.kubernetes.client import Connection, KubeError, connection_of, describe, new_client
from scaler.worker_manager.process import run_manager

logger = logging.getLogger(__name__)
#: How long the start's dry run may take (the API server not answering is said after it).
CHECK_SECONDS = 30.0


def run(config: WorkerManagerSettings) -> int:
    assert isinstance(config, KubernetesWorkerManagerConfig)
    from scaler.worker_manager.kubernetes.backend import KubernetesBackend

    try:
        problem = settings_problem(config)
        if problem is None:
            template = load_template(config.k8s_pod_template)
            connection = connection_of(config)
            problem = asyncio.run(dry_run_problem(config, connection, template))
    except (KubeError, ValueError) as error:
        problem = str(error)
    if problem is not None:
        logger.error("%s", problem)
        return EXIT_CONFIGURATION
    logger.info("kubernetes: worker pods in namespace %s (%s), image %s", connection.namespace, connection.where,
                config.k8s_image)  # fmt: skip
    return run_manager(config, KubernetesBackend(config, config.worker_manager_id, connection, template))


def settings_problem(config: KubernetesWorkerManagerConfig) -> str | None:
    problem = pod_specs.image_problem(config.k8s_image)
    if problem is not None:
        return problem
    try:
        pod_specs.parse_node_selector(config.k8s_node_selector)
        pod_specs.parse_tolerations(config.k8s_tolerations)
    except ValueError as error:
        return str(error)
    return None


def load_template(path: str | None) -> dict[str, Any]:
    """The pod template file as a pod (a Pod, a PodTemplate's template, or just metadata and spec); ValueError in one
    line when it is none."""
    if not path:
        return {}
    import yaml  # type: ignore[import-untyped]  # a dependency of lightkube; its stubs are not installed

    try:
        text = Path(path).expanduser().read_text()
        loaded = json.loads(text) if text.lstrip().startswith("{") else yaml.safe_load(text)
    except (OSError, ValueError, yaml.YAMLError) as error:
        raise ValueError(f"--k8s-pod-template {path}: {error}") from None
    if isinstance(loaded, dict) and loaded.get("kind") == "PodTemplate":
        loaded = loaded.get("template")
    if not isinstance(loaded, dict) or not isinstance(loaded.get("spec", {}), dict):
        raise ValueError(f"--k8s-pod-template {path}: expected a Pod (YAML or JSON) with a spec")
    if loaded.get("kind") not in (None, "Pod"):
        raise ValueError(f"--k8s-pod-template {path}: a {loaded.get('kind')}, not a Pod")
    return {key: value for key, value in loaded.items() if key in ("metadata", "spec")}


async def dry_run_problem(
    config: KubernetesWorkerManagerConfig, connection: Connection, template: dict[str, Any]
) -> str | None:
    """Why the API would refuse the manager's pods (its answer to a dry-run create), or None."""
    from lightkube import codecs

    worker = worker_config_of(config, "K8S")
    spec = LaunchSpec(config.worker_manager_id, worker)
    security = security_of(worker)
    pod = pod_specs.worker_pod(config, spec, "dryrun", template, security is not None)
    client = new_client(connection)
    try:
        if security is not None:
            secret = pod_specs.keys_secret(config.worker_manager_id, key_texts(security))
            try:
                await asyncio.wait_for(client.create(codecs.from_dict(secret), dry_run=True), CHECK_SECONDS)
            except Exception as error:
                if describe(error).reason != "AlreadyExists":  # a predecessor's, brought up to date at the launch
                    raise
        await asyncio.wait_for(client.create(codecs.from_dict(pod), dry_run=True), CHECK_SECONDS)
    except Exception as error:
        failure = describe(error if not isinstance(error, asyncio.TimeoutError) else TimeoutError("no answer"),
                           connection)  # fmt: skip
        return _named(config, connection, failure)
    finally:
        await client.close()
    return None


def _named(config: KubernetesWorkerManagerConfig, connection: Connection, failure: KubeError) -> str:
    namespace = connection.namespace
    if failure.code == 0:
        return f"--k8s-kubeconfig: {failure}"
    if failure.code == 401:
        return f"--k8s-kubeconfig: the API refuses the credentials of {connection.where}: {failure}"
    if failure.code == 404 and "namespaces" in str(failure):
        return f"--k8s-namespace {namespace}: {failure}"
    if failure.code == 403:
        return (f"--k8s-namespace {namespace}: RBAC does not let {connection.where} create the worker pods and their "
                f"keys' Secret there (the Role `scaler --docs kubernetes` shows): {failure}")  # fmt: skip
    if failure.code in (400, 422):
        settings = f"--k8s-image {config.k8s_image}, --k8s-cpu {config.k8s_cpu}, --k8s-memory {config.k8s_memory}"
        if config.k8s_pod_template:
            settings += f", --k8s-pod-template {config.k8s_pod_template}"
        return f"the API refuses the worker pod ({settings}): {failure}"
    return f"the API refuses the worker pod in namespace {namespace}: {failure}"
