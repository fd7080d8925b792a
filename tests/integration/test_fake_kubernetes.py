"""The Kubernetes rehearsal's own semantics, checked with the client library the manager uses (lightkube): what a
client of a real API server relies on (resourceVersions, selectors, watches and 410 Gone, generateName, graceful
deletion, validation, Status errors, RBAC) and what its kubelet does with a pod (only the spec's environment,
phases, exit codes, restarts, OOM kills, evictions, image pull failures, scheduling)."""

from __future__ import annotations

import os
import time
from typing import Any

import pytest

pytest.importorskip("lightkube", reason="the kubernetes extra is not installed")
pytest.importorskip("cryptography", reason="the fake-kubernetes extra is not installed")
import yaml
from lightkube import ApiError, Client, KubeConfig
from lightkube.resources.core_v1 import ConfigMap, Event, Pod, Secret

from scaler_rehearsal.fake_kubernetes.tls import kubeconfig_text
from tests.integration.conftest import DEADLINE_SECONDS, wait_for
from tests.integration.kubernetes_harness import (  # noqa: F401 - the fixtures are used by name
    client_fixture,
    create,
    namespace_fixture,
    pod_manifest,
    pod_state,
    rehearsal_fixture,
    watch_until,
)

pytestmark = [pytest.mark.integration, pytest.mark.kubernetes, pytest.mark.timeout(120)]


def _error(call: Any) -> ApiError:
    with pytest.raises(ApiError) as raised:
        call()
    return raised.value


# ---------------------------------------------------------------- the API server


def test_resource_versions_follow_one_counter_and_a_watch_resumes_from_one(
    rehearsal: Any, client: Any, namespace: str
) -> None:
    first = create(client, pod_manifest("ordered-", ["sleep", "60"], terminationGracePeriodSeconds=1), namespace)
    listed = client.list(Pod, namespace=namespace)
    names = [pod.metadata.name for pod in listed]
    assert names == [first.metadata.name]
    since = listed.resourceVersion
    assert int(since) >= int(first.metadata.resourceVersion)
    second = create(client, pod_manifest("ordered-", ["sleep", "60"], terminationGracePeriodSeconds=1), namespace)
    assert int(second.metadata.resourceVersion) > int(first.metadata.resourceVersion)
    assert second.metadata.name != first.metadata.name and second.metadata.name.startswith("ordered-")
    assert len(second.metadata.name) == len("ordered-") + 5  # generateName: the prefix and five characters
    events = watch_until(
        rehearsal,
        Pod,
        namespace,
        since,
        lambda events: events[-1][0] == "ADDED" and events[-1][1].metadata.name == second.metadata.name,
    )
    seen = [(event_type, pod.metadata.name, int(pod.metadata.resourceVersion)) for event_type, pod in events]
    versions = [version for _type, _name, version in seen]
    assert versions == sorted(versions) and all(version > int(since) for version in versions)
    assert ("ADDED", second.metadata.name) in [(t, n) for t, n, _v in seen]
    assert ("ADDED", first.metadata.name) not in [(t, n) for t, n, _v in seen]  # it came before `since`


def test_a_watch_from_a_compacted_resource_version_is_410_gone(rehearsal: Any, client: Any, namespace: str) -> None:
    listed = client.list(ConfigMap, namespace=namespace)
    list(listed)
    since = listed.resourceVersion
    create(client, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c1"}}, namespace)
    rehearsal.compact()
    error = _error(lambda: watch_until(rehearsal, ConfigMap, namespace, since, lambda events: True))
    assert error.status.code == 410
    assert "too old resource version" in error.status.message
    # a watch from the current resourceVersion still works
    listed = client.list(ConfigMap, namespace=namespace)
    names = [item.metadata.name for item in listed]
    assert "c1" in names


def test_label_and_field_selectors(client: Any, namespace: str) -> None:
    for name, labels in (("a", {"app": "x", "tier": "web"}), ("b", {"app": "x", "tier": "db"}), ("c", {"app": "y"})):
        create(
            client, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": labels}}, namespace
        )

    def names(**selectors: Any) -> list[str]:
        return sorted(item.metadata.name for item in client.list(ConfigMap, namespace=namespace, **selectors))

    assert names(labels={"app": "x"}) == ["a", "b"]
    assert names(labels={"app": "x", "tier": "web"}) == ["a"]
    from lightkube.operators import exists, in_, not_equal, not_in

    assert names(labels={"tier": not_equal("web")}) == ["b", "c", "kube-root-ca.crt"]
    assert names(labels={"tier": in_(["web", "db"])}) == ["a", "b"]
    assert names(labels={"tier": not_in(["web"]), "app": exists()}) == ["b", "c"]
    assert names(fields={"metadata.name": "c"}) == ["c"]
    error = _error(lambda: names(fields={"data.nothing": "x"}))
    assert error.status.code == 400 and "is not a known field selector" in error.status.message


def test_pods_are_selected_by_phase_and_events_by_their_object(client: Any, namespace: str) -> None:
    pod = create(client, pod_manifest("phase-", ["true"], restartPolicy="Never"), namespace)
    name = pod.metadata.name
    wait_for(
        lambda: [p for p in client.list(Pod, namespace=namespace, fields={"status.phase": "Succeeded"})],
        "the pod to succeed",
    )
    assert [
        p.metadata.name for p in client.list(Pod, namespace=namespace, fields={"spec.nodeName": "rehearsal-node"})
    ] == [name]
    events = client.list(Event, namespace=namespace, fields={"involvedObject.name": name})
    reasons = {event.reason for event in events}
    assert {"Scheduled", "Created", "Started"} <= reasons


def test_graceful_deletion_keeps_the_pod_until_its_process_ends(rehearsal: Any, client: Any, namespace: str) -> None:
    # the container ignores SIGTERM (and says it got it): it ends only with SIGKILL, after the grace period
    script = "trap 'echo got TERM' TERM; echo started; while true; do sleep 0.1; done"
    pod = create(client, pod_manifest("graceful-", ["sh", "-c", script], terminationGracePeriodSeconds=3), namespace)
    name = pod.metadata.name
    wait_for(lambda: "running" in pod_state(client, name, namespace), "the pod to run")
    wait_for(lambda: "started" in client.log(name, namespace=namespace).__next__(), "its first line")
    client.delete(Pod, name, namespace=namespace)
    deleting = client.get(Pod, name, namespace=namespace)
    assert deleting.metadata.deletionTimestamp is not None and deleting.metadata.deletionGracePeriodSeconds == 3
    time.sleep(1.0)  # within the grace period the pod is still there (Terminating)
    assert client.get(Pod, name, namespace=namespace).metadata.deletionTimestamp is not None
    logged = "".join(client.log(name, namespace=namespace))
    assert "got TERM" in logged  # SIGTERM first
    wait_for(
        lambda: not [p for p in client.list(Pod, namespace=namespace) if p.metadata.name == name],
        "the pod to be gone once SIGKILL ended it",
        DEADLINE_SECONDS,
    )


def test_validation_and_status_objects(client: Any, namespace: str) -> None:
    error = _error(lambda: create(client, pod_manifest("Bad_Name", ["true"]), namespace))
    assert (error.status.code, error.status.reason) == (422, "Invalid")
    assert error.status.message.startswith('Pod "Bad_Name" is invalid: metadata.name: Invalid value: "Bad_Name"')
    assert error.status.details.causes[0].field == "metadata.name"
    no_image = pod_manifest("noimage", ["true"])
    no_image["spec"]["containers"][0]["image"] = ""
    error = _error(lambda: create(client, no_image, namespace))
    assert error.status.message == 'Pod "noimage" is invalid: spec.containers[0].image: Required value'
    error = _error(
        lambda: create(client, pod_manifest("quantity", ["true"], resources={"requests": {"cpu": "two"}}), namespace)
    )
    assert error.status.code == 400 and "quantities must match the regular expression" in error.status.message
    error = _error(
        lambda: create(
            client,
            pod_manifest("labels", ["true"]) | {"metadata": {"name": "labels", "labels": {"bad key!": "x"}}},
            namespace,
        )
    )
    assert error.status.code == 422 and "metadata.labels" in error.status.message
    error = _error(lambda: create(client, pod_manifest("nowhere", ["true"]), "no-such-namespace"))
    assert (error.status.code, error.status.message) == (404, 'namespaces "no-such-namespace" not found')
    error = _error(lambda: client.get(Pod, "nothing", namespace=namespace))
    assert (error.status.code, error.status.reason, error.status.message) == (
        404,
        "NotFound",
        'pods "nothing" not found',
    )


def test_a_write_naming_an_older_resource_version_is_a_conflict(client: Any, namespace: str) -> None:
    created = create(
        client, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cas"}, "data": {"a": "1"}}, namespace
    )
    client.patch(ConfigMap, "cas", {"data": {"a": "2"}}, namespace=namespace)
    created.data = {"a": "3"}
    error = _error(lambda: client.replace(created, namespace=namespace))
    assert (error.status.code, error.status.reason) == (409, "Conflict")
    assert "the object has been modified" in error.status.message
    assert client.get(ConfigMap, "cas", namespace=namespace).data == {"a": "2"}


def test_service_accounts_are_bound_by_rbac(rehearsal: Any, client: Any, namespace: str) -> None:
    create(client, {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "robot"}}, namespace)
    token = rehearsal.tokens.for_account(namespace, "robot")
    config = KubeConfig.from_dict(
        yaml.safe_load(kubeconfig_text(rehearsal.server_url, rehearsal.certificates.ca_pem, token, namespace=namespace))
    )
    robot = Client(config)
    try:
        error = _error(lambda: list(robot.list(Pod, namespace=namespace)))
        assert error.status.code == 403
        assert error.status.message == (
            f'pods is forbidden: User "system:serviceaccount:{namespace}:robot" cannot list '
            f'resource "pods" in API group "" in the namespace "{namespace}"'
        )
        create(
            client,
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "Role",
                "metadata": {"name": "pod-reader"},
                "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}],
            },
            namespace,
        )
        create(
            client,
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "RoleBinding",
                "metadata": {"name": "robot-reads"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pod-reader"},
                "subjects": [{"kind": "ServiceAccount", "name": "robot"}],
            },
            namespace,
        )
        assert list(robot.list(Pod, namespace=namespace)) == []
        assert _error(lambda: robot.get(Secret, "any", namespace=namespace)).status.code == 403
    finally:
        robot.close()


# ---------------------------------------------------------------- the kubelet


def test_a_container_has_only_what_its_spec_gives_it(rehearsal: Any, client: Any, namespace: str) -> None:
    os.environ["SCALER_TEST_HOST_ONLY"] = "the laptop's"
    create(
        client,
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "keys"}, "stringData": {"token": "s3cr3t"}},
        namespace,
    )
    create(
        client,
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "conf"},
            "data": {"settings.toml": "answer = 42"},
        },
        namespace,
    )
    script = "echo HOST=$SCALER_TEST_HOST_ONLY; echo TOKEN=$TOKEN; echo NAME=$HOSTNAME; cat $(CONF)/settings.toml; env"
    manifest = pod_manifest(
        "env-",
        ["sh", "-c", script],
        restartPolicy="Never",
        env=[
            {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "keys", "key": "token"}}},
            {"name": "CONF", "value": "/etc/conf"},
        ],
        volumeMounts=[{"name": "conf", "mountPath": "/etc/conf"}],
        volumes=[{"name": "conf", "configMap": {"name": "conf"}}],
    )
    try:
        name = create(client, manifest, namespace).metadata.name
        wait_for(lambda: "terminated" in pod_state(client, name, namespace), "the pod to finish")
    finally:
        del os.environ["SCALER_TEST_HOST_ONLY"]
    logged = "".join(client.log(name, namespace=namespace))
    assert "HOST=\n" in logged  # nothing of the laptop's environment
    assert "TOKEN=s3cr3t" in logged and f"NAME={name}" in logged and "answer = 42" in logged
    variables = {line.split("=", 1)[0] for line in logged.splitlines() if "=" in line and line[0].isupper()}
    assert "VIRTUAL_ENV" not in variables and "PYTHONPATH" not in variables
    assert pod_state(client, name, namespace)["terminated"]["reason"] == "Completed"
    assert client.get(Pod, name, namespace=namespace).status.phase == "Succeeded"


def test_exit_codes_restart_policies_and_crash_loops(client: Any, namespace: str) -> None:
    failed = create(client, pod_manifest("fails-", ["sh", "-c", "exit 3"], restartPolicy="Never"), namespace)
    crashing = create(client, pod_manifest("crashes-", ["sh", "-c", "exit 1"]), namespace)  # restartPolicy Always
    name = failed.metadata.name
    wait_for(lambda: client.get(Pod, name, namespace=namespace).status.phase == "Failed", "the pod to fail")
    terminated = pod_state(client, name, namespace)["terminated"]
    assert (terminated["exitCode"], terminated["reason"]) == (3, "Error")

    def restarts() -> int:
        pod = client.get(Pod, crashing.metadata.name, namespace=namespace)
        return int(pod.status.containerStatuses[0].restartCount) if pod.status.containerStatuses else 0

    wait_for(lambda: restarts() >= 2, "the crashing container to be restarted twice")
    pod = client.get(Pod, crashing.metadata.name, namespace=namespace)
    assert pod.status.phase == "Running"
    assert pod.status.containerStatuses[0].lastState.terminated.exitCode == 1


def test_memory_over_the_limit_is_oom_killed(client: Any, namespace: str) -> None:
    hog = "x = bytearray(256 * 1024 * 1024); import time; time.sleep(60)"
    manifest = pod_manifest(
        "hog-",
        ["python", "-c", hog],
        image="python:3.12",
        restartPolicy="Never",
        resources={"limits": {"memory": "64Mi", "cpu": "1"}},
    )
    name = create(client, manifest, namespace).metadata.name
    wait_for(lambda: "terminated" in pod_state(client, name, namespace), "the container to be killed", DEADLINE_SECONDS)
    terminated = pod_state(client, name, namespace)["terminated"]
    assert (terminated["reason"], terminated["exitCode"]) == ("OOMKilled", 137)


def test_faults_evict_and_oom_kill(rehearsal: Any, client: Any, namespace: str) -> None:
    evicted = create(client, pod_manifest("evicted-", ["sleep", "60"]), namespace).metadata.name
    killed = create(client, pod_manifest("killed-", ["sleep", "60"], restartPolicy="Never"), namespace).metadata.name
    for name in (evicted, killed):
        wait_for(lambda name=name: "running" in pod_state(client, name, namespace), f"{name} to run")
    assert rehearsal.evict_pod(namespace, evicted)
    assert rehearsal.oom_kill(namespace, killed)
    wait_for(lambda: client.get(Pod, evicted, namespace=namespace).status.phase == "Failed", "the eviction")
    pod = client.get(Pod, evicted, namespace=namespace)
    assert pod.status.reason == "Evicted" and "low on resource: memory" in pod.status.message
    wait_for(lambda: "terminated" in pod_state(client, killed, namespace), "the OOM kill")
    assert pod_state(client, killed, namespace)["terminated"]["reason"] == "OOMKilled"


def test_unschedulable_pods_wait_and_are_bound_when_capacity_frees(client: Any, namespace: str) -> None:
    big = {"requests": {"cpu": "3"}}
    first = create(
        client, pod_manifest("first-", ["sleep", "60"], resources=big, terminationGracePeriodSeconds=1), namespace
    ).metadata.name
    second = create(client, pod_manifest("second-", ["sleep", "60"], resources=big), namespace).metadata.name
    wait_for(lambda: "running" in pod_state(client, first, namespace), "the first pod to run")

    def scheduled_condition() -> Any:
        conditions = client.get(Pod, second, namespace=namespace).status.conditions or []
        return next((c for c in conditions if c.type == "PodScheduled"), None)

    condition = wait_for(scheduled_condition, "the second pod's PodScheduled condition")
    assert (condition.status, condition.reason) == ("False", "Unschedulable")
    assert condition.message == "0/1 nodes are available: 1 Insufficient cpu."
    events = list(
        client.list(Event, namespace=namespace, fields={"involvedObject.name": second, "reason": "FailedScheduling"})
    )
    assert events and events[0].type == "Warning" and events[0].message == condition.message
    client.delete(Pod, first, namespace=namespace)
    wait_for(
        lambda: "running" in pod_state(client, second, namespace),
        "the second pod to be bound and run once the first one is gone",
    )


def test_an_image_that_cannot_be_pulled_waits_in_back_off(client: Any, namespace: str) -> None:
    name = create(
        client, pod_manifest("pull-", ["true"], image="registry.example/no-such-image:1"), namespace
    ).metadata.name
    seen = set()

    def reasons() -> set[str]:
        waiting = pod_state(client, name, namespace).get("waiting") or {}
        if waiting.get("reason"):
            seen.add(waiting["reason"])
        return {"ErrImagePull", "ImagePullBackOff"} & seen == {"ErrImagePull", "ImagePullBackOff"}

    wait_for(reasons, "ErrImagePull then ImagePullBackOff", interval=0.02)
    assert client.get(Pod, name, namespace=namespace).status.phase == "Pending"
    bad = create(client, pod_manifest("badref-", ["true"], image="Not A Reference"), namespace).metadata.name
    wait_for(
        lambda: (pod_state(client, bad, namespace).get("waiting") or {}).get("reason") == "InvalidImageName",
        "InvalidImageName",
    )
