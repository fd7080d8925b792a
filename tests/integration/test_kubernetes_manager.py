"""`scaler_worker_manager kubernetes` against the Kubernetes rehearsal (one per module; each test in a namespace of
its own): tasks run in labelled pods, pods come and go with the work, a pod that is deleted, evicted or OOM-killed
mid-map loses no task and is named and replaced, unschedulable pods are shown and capped, an image that cannot be
pulled is named and not retried forever, a watch that expired (410) is listed again, a restarted manager adopts its
pods, and Ctrl-C of `scaler FILE` (the shipped example) leaves no pod."""

from __future__ import annotations

import asyncio
import copy
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from scaler import Client
from scaler.protocol import messages as m
from tests.integration.conftest import (
    COLD_START_SECONDS,
    Addresses,
    Launcher,
    ProcessWatch,
    Service,
    free_addresses,
    monitor,
    running_stack,
    wait_for,
)
from tests.integration.kubernetes_harness import (  # noqa: F401 - the fixtures are used by name
    client_fixture,
    kubernetes_backend,
    namespace_fixture,
    rehearsal_fixture,
    unit_spec,
)
from tests.integration.manager_harness import manager_of, workers_of

#: its module fixtures (the rehearsal, a stack) are made once: its tests share one test process (make test: --dist
#: loadgroup)
pytestmark = [
    pytest.mark.integration,
    pytest.mark.kubernetes,
    pytest.mark.timeout(240),
    pytest.mark.xdist_group("test_kubernetes_manager"),
]
#: Pods start in well under a second here; a worker's imports take longer on a loaded machine.
SCALE_DEADLINE_SECONDS = 90.0
MANAGER_LABEL = "scaler.io/worker-manager"
#: scheduler address -> (scheduler, object storage) of the stacks `make_stack` started
STACKS: dict[str, tuple[Service, Service]] = {}
#: The scheduler's arguments, unless a test needs others.
POLICY = "allocate=even_load; scaling=work; cooldown_seconds=60"
SCHEDULER_ARGS = ("--policy-content", POLICY, "--worker-timeout-seconds", "10")


def sleep_then_double(seconds: float, value: int) -> int:
    time.sleep(seconds)
    return value * 2


def pod_name(_: int) -> str:
    import os

    return os.environ["HOSTNAME"]


@pytest.fixture
def make_stack(launcher: Launcher, processes: ProcessWatch) -> Iterator[Callable[..., Addresses]]:
    """`make_stack(policy=None)`: object storage and a scheduler of the test's own (the module's arguments, with
    another policy if given): a test that takes the stack down, or needs another policy."""

    def make(policy: str | None = None) -> Addresses:
        arguments = SCHEDULER_ARGS if policy is None else ("--policy-content", policy, *SCHEDULER_ARGS[2:])
        addresses, scheduler, storage = launcher.stack(workers=0, scheduler_args=arguments)
        STACKS[addresses.scheduler] = (scheduler, storage)
        return addresses

    yield make
    processes.stop_all()


@pytest.fixture(scope="module")
def module_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Addresses]:
    """Object storage and a scheduler for the module's tests that leave them as they found them: each test's manager
    (of an id of its own, in a namespace of its own) is stopped, its pods deleted, by the end of the test."""
    with running_stack(tmp_path_factory.mktemp("kubernetes-stack"), workers=0, scheduler_args=SCHEDULER_ARGS) as stack:
        yield stack


@pytest.fixture
def shared_stack(module_stack: Addresses) -> Addresses:
    """The module's stack once the test before has left it: no manager, no worker, no task queued or running."""
    with monitor(module_stack.monitor) as next_snapshot:
        next_snapshot(
            lambda s: not s.managers and not s.workers and s.scheduler.queued == 0 and s.scheduler.running == 0,
            SCALE_DEADLINE_SECONDS,
        )
    return module_stack


def start_manager(
    launcher: Launcher, rehearsal: Any, addresses: Addresses, namespace: str, manager_id: str, *args: str
) -> Service:
    return launcher.start(
        "scaler_worker_manager",
        "kubernetes",
        addresses.scheduler,
        "-wmi",
        manager_id,
        "-his",
        "1",
        "-ll",
        "INFO",
        "--k8s-kubeconfig",
        str(rehearsal.kubeconfig_path),
        "--k8s-namespace",
        namespace,
        "--k8s-image",
        "scaler-worker:latest",
        "--k8s-cpu",
        "500m",
        "--k8s-memory",
        "512Mi",
        "--k8s-grace-seconds",
        "5",
        *args,
    )


def pods(client: Any, namespace: str, manager_id: str | None = None) -> list[Any]:
    from lightkube.resources.core_v1 import Pod

    labels = {MANAGER_LABEL: manager_id} if manager_id else None
    return list(client.list(Pod, namespace=namespace, labels=labels))


def labelled_pods_while(client: Any, namespace: str, manager_id: str, futures: list[Any]) -> set[str]:
    """The names of the manager's pods seen while the futures run and once they are done: a pod whose work is done
    goes after the policy's cooldown, so a look only after the work can miss it on a loaded machine."""
    seen: set[str] = set()
    while True:
        done = all(future.done() for future in futures)
        seen |= {pod.metadata.name for pod in pods(client, namespace, manager_id)}
        if done:
            return seen
        time.sleep(0.05)


def running_pods(client: Any, namespace: str, manager_id: str) -> list[str]:
    return sorted(
        p.metadata.name
        for p in pods(client, namespace, manager_id)
        if p.status.phase == "Running" and not p.metadata.deletionTimestamp
    )


def stop(service: Service) -> int:
    service.popen.send_signal(signal.SIGTERM)
    return service.wait_exit(60.0)


# ---------------------------------------------------------------- tasks in pods, from zero and back


def test_tasks_run_in_labelled_pods_and_the_pods_follow_the_work_back_to_zero(
    launcher: Launcher, make_stack: Callable[..., Addresses], rehearsal: Any, client: Any, namespace: str
) -> None:
    addresses = make_stack("allocate=even_load; scaling=work; cooldown_seconds=3")
    manager = start_manager(launcher, rehearsal, addresses, namespace, "k8s-a", "-mtc", "3")
    with Client(addresses.scheduler) as scaler_client:
        naming = [scaler_client.submit(pod_name, x) for x in range(12)]
        labelled = labelled_pods_while(client, namespace, "k8s-a", naming)
        names = {future.result() for future in naming}
        assert [f * 2 for f in range(6)] == scaler_client.map(sleep_then_double, [0.05] * 6, range(6))
    assert names and names <= labelled, f"tasks ran in {names}, the manager's pods are {labelled}"
    assert all(name.startswith("scaler-worker-") for name in names) and 1 <= len(labelled) <= 3
    wait_for(lambda: not pods(client, namespace), "every pod to go once the work is done", SCALE_DEADLINE_SECONDS)
    assert stop(manager) == 0


# ---------------------------------------------------------------- a pod that goes mid-map


#: a pod deleted by someone else (it is gone), and one whose container the kubelet ended (Failed, kept until the manager
#: deletes it). An eviction ends the pod the second way, named from the pod's own reason rather than its container's:
#: which words a manager reads from each status is tests/unit/test_kubernetes_pods.py's, the rehearsal's eviction
#: tests/integration/test_fake_kubernetes.py::test_faults_evict_and_oom_kill
@pytest.mark.parametrize("fault", ["deleted", "oom-killed"])
def test_a_pod_that_goes_mid_map_loses_no_task_is_named_and_replaced(
    launcher: Launcher, shared_stack: Addresses, rehearsal: Any, client: Any, namespace: str, fault: str
) -> None:
    addresses = shared_stack
    manager_id = f"k8s-b-{fault}"
    manager = start_manager(launcher, rehearsal, addresses, namespace, manager_id, "-mtc", "2")
    with Client(addresses.scheduler) as scaler_client:
        futures = [scaler_client.submit(sleep_then_double, 1.0, n) for n in range(10)]
        first = wait_for(
            lambda: (
                len(running_pods(client, namespace, manager_id)) == 2 and running_pods(client, namespace, manager_id)
            ),
            "two running pods",
            SCALE_DEADLINE_SECONDS,
        )
        victim = first[0]
        with monitor(addresses.monitor) as next_snapshot:  # both workers registered: tasks run on both
            next_snapshot(lambda snapshot: len(workers_of(snapshot, manager_id)) == 2, SCALE_DEADLINE_SECONDS)
        injected = {"deleted": rehearsal.delete_pod, "oom-killed": rehearsal.oom_kill}
        assert injected[fault](namespace, victim)
        replaced = wait_for(
            lambda: victim not in (now := running_pods(client, namespace, manager_id)) and len(now) == 2 and now,
            "a replacement pod",
            SCALE_DEADLINE_SECONDS,
        )
        assert victim not in replaced
        assert [future.result(timeout=SCALE_DEADLINE_SECONDS) for future in futures] == [n * 2 for n in range(10)]
    words = {
        "deleted": "deleted by someone other than this manager",
        "oom-killed": "OOMKilled (exit code 137)",
    }[fault]
    manager.wait_for_log(words)
    if fault != "deleted":  # the finished pod is deleted once its end was said: none is left behind
        wait_for(lambda: victim not in {pod.metadata.name for pod in pods(client, namespace)}, "the finished pod to go")
    assert stop(manager) == 0


# ---------------------------------------------------------------- waits: unschedulable, an image that cannot be pulled


def test_unschedulable_pods_are_shown_counted_as_pending_and_capped(
    launcher: Launcher, shared_stack: Addresses, rehearsal: Any, client: Any, namespace: str
) -> None:
    addresses = shared_stack
    manager = start_manager(
        launcher, rehearsal, addresses, namespace, "k8s-c", "-mtc", "6", "--k8s-cpu", "16", "--max-waiting-units", "2"
    )
    with monitor(addresses.monitor) as next_snapshot, Client(addresses.scheduler) as scaler_client:
        futures = [scaler_client.submit(sleep_then_double, 0.0, n) for n in range(6)]

        def waiting(snapshot: m.StatusSnapshot) -> bool:
            summary = manager_of(snapshot, "k8s-c")
            return summary is not None and any(wait.reason == "Unschedulable" for wait in summary.waits)

        snapshot = next_snapshot(waiting, SCALE_DEADLINE_SECONDS)
        summary = manager_of(snapshot, "k8s-c")
        assert summary is not None
        (wait,) = summary.waits
        assert wait.message == "0/1 nodes are available: 1 Insufficient cpu."
        held = next_snapshot(lambda s: bool(getattr(manager_of(s, "k8s-c"), "held", "")), SCALE_DEADLINE_SECONDS)
        assert summary.pending_units >= 1 and "max_waiting_units" in getattr(manager_of(held, "k8s-c"), "held", "")
        assert len(pods(client, namespace, "k8s-c")) == 2  # capped: six wanted, two wait
        for future in futures:
            future.cancel()
    manager.wait_for_log("Unschedulable")
    assert stop(manager) == 0
    wait_for(lambda: not pods(client, namespace), "the waiting pods to be deleted when the manager stops")


def test_an_image_that_cannot_be_pulled_is_named_and_not_retried_forever(
    launcher: Launcher, shared_stack: Addresses, rehearsal: Any, client: Any, namespace: str
) -> None:
    addresses = shared_stack
    manager = start_manager(
        launcher,
        rehearsal,
        addresses,
        namespace,
        "k8s-d",
        "-mtc",
        "2",
        "--k8s-image",
        "registry.example/team/no-such-image:1",
    )
    with monitor(addresses.monitor) as next_snapshot, Client(addresses.scheduler) as scaler_client:
        future = scaler_client.submit(sleep_then_double, 0.0, 1)
        snapshot = next_snapshot(
            lambda s: "can never start" in getattr(manager_of(s, "k8s-d"), "held", ""), SCALE_DEADLINE_SECONDS
        )
        held = getattr(manager_of(snapshot, "k8s-d"), "held", "")
        assert "ErrImagePull" in held or "ImagePullBackOff" in held, held
        wait_for(lambda: not pods(client, namespace), "the pod that cannot start to be deleted")
        future.cancel()
    text = manager.log_text()
    assert "registry.example/team/no-such-image:1" in text and "can never start as asked" in text
    assert stop(manager) == 0


# ---------------------------------------------------------------- the watch, adoption, Ctrl-C


def test_a_watch_that_expired_is_listed_again_and_misses_nothing(
    rehearsal: Any, namespace: str, tmp_path: Path
) -> None:
    from scaler.worker_manager.backend import UnitState

    spec = unit_spec("k8s-e", death_timeout_seconds=30)

    async def scenario() -> None:
        backend = kubernetes_backend(spec, tmp_path, k8s_namespace=namespace)
        try:
            (unit_id,) = await backend.launch(1, spec)
            name = f"scaler-worker-{unit_id}"
            await _until(backend, lambda units: units.get(unit_id) is UnitState.RUNNING, "the pod to run")
            assert backend.relists == 1
            # while its watch is down, the pod is deleted and the history compacted: resuming it is 410 Gone
            with rehearsal.store.lock:
                rehearsal.close_watches()
                assert rehearsal.delete_pod(namespace, name, 0)
                rehearsal.compact()
            await _until(backend, lambda units: units.get(unit_id) is UnitState.GONE, "the deletion to be seen")
            assert backend.relists == 2
            details = [unit.detail for unit in await backend.list_units() if unit.unit_id == unit_id]
            assert details == [
                f"pod {name}: deleted by someone other than this manager (kubectl delete, a node "
                "drain, the namespace going)"
            ]
        finally:
            await backend.close()

    asyncio.run(scenario())


def test_a_pod_launched_while_the_pods_are_listed_is_not_taken_for_deleted(
    rehearsal: Any, namespace: str, tmp_path: Path
) -> None:
    """A listing whose snapshot was taken before a pod was made (a launch while the watch starts, on a loaded
    machine) does not call that pod deleted: its watch from the listing's resourceVersion brings it. Without the
    check the pod was reported GONE at once (and its unit replaced), which failed the test above in a full run."""
    from scaler.worker_manager.backend import UnitState

    spec = unit_spec("k8s-l", death_timeout_seconds=30)

    async def scenario() -> None:
        backend = kubernetes_backend(spec, tmp_path, k8s_namespace=namespace)
        try:
            (unit_id,) = await backend.launch(1, spec)
            await _until(backend, lambda units: units.get(unit_id) is UnitState.RUNNING, "the pod to run")
            # as if made after the snapshot of the listing below: a version beyond anything the listing has seen
            (known,) = [pod for pod in backend._pods.values()]
            late = copy.deepcopy(known)
            late["metadata"]["name"] = "scaler-worker-launched-meanwhile"
            late["metadata"]["resourceVersion"] = str(10**12)
            backend._pods[late["metadata"]["name"]] = late
            await backend._list()
            assert "scaler-worker-launched-meanwhile" in backend._pods
            assert [unit for unit in await backend.list_units() if unit.state is UnitState.GONE] == []
        finally:
            await backend.close()

    asyncio.run(scenario())


def test_answers_worth_a_retry_are_retried_and_a_refusal_is_named(
    rehearsal: Any, namespace: str, tmp_path: Path
) -> None:
    from scaler.worker_manager.kubernetes.client import KubeError

    spec = unit_spec("k8s-g", death_timeout_seconds=30)

    async def scenario() -> None:
        backend = kubernetes_backend(spec, tmp_path, k8s_namespace=namespace)
        try:
            rehearsal.fail_requests(429, 1, "POST", "pods")  # too many requests, with Retry-After: 1
            rehearsal.fail_requests(503, 1, "POST", "pods")
            rehearsal.fail_requests(409, 1, "POST", "pods")  # a conflict of the API server's
            assert len(await backend.launch(1, spec)) == 1  # retried with back-off through all three
            rehearsal.fail_requests(403, 1, "POST", "pods")  # a quota, or RBAC: not retried, named
            with pytest.raises(KubeError, match=r"Forbidden \(403\): pods is forbidden: exceeded quota"):
                await backend.launch(1, spec)
        finally:
            await backend.close()

    asyncio.run(scenario())


def test_a_manager_closed_while_its_pods_are_still_going_deletes_their_keys(
    rehearsal: Any, client: Any, namespace: str, tmp_path: Path
) -> None:
    """The pods a stopping manager terminated stay in the API until their workers have left (the grace period), and
    the watch that would say DELETED is closed first: the keys' Secret goes with the manager all the same. Without
    the rule it was kept whenever the backend's own view still held a pod being deleted (seen under load, after a
    Ctrl-C of the example stack)."""
    from lightkube.resources.core_v1 import Secret

    from scaler.security.key_folder import KeyFolder
    from scaler.worker_manager.backend import UnitState
    from scaler.worker_manager.kubernetes.pods import keys_secret_name

    keys = KeyFolder.ensure(tmp_path / "keys")
    spec = unit_spec(
        "k8s-s",
        death_timeout_seconds=30,
        curve_secret_key=keys.path("workers.key_secret"),
        curve_server_key=keys.path("server.key"),
    )
    secret_name = keys_secret_name("k8s-s")

    async def scenario() -> None:
        backend = kubernetes_backend(spec, tmp_path, k8s_namespace=namespace, k8s_grace_seconds=20)
        try:
            (unit_id,) = await backend.launch(1, spec)
            await _until(backend, lambda units: units.get(unit_id) is UnitState.RUNNING, "the pod to run")
            assert client.get(Secret, secret_name, namespace=namespace)
            await backend.terminate([unit_id], "the test")
            # the backend's view: the pod being deleted (the watch has not said DELETED yet)
            assert [pod["metadata"].get("deletionTimestamp") is not None for pod in backend._pods.values()] == [True]
        finally:
            await backend.close()
        assert [s.metadata.name for s in client.list(Secret, namespace=namespace)] == []

    asyncio.run(scenario())
    wait_for(lambda: not pods(client, namespace), "the pod to finish going", SCALE_DEADLINE_SECONDS)


async def _until(backend: Any, check: Callable[[dict[str, Any]], bool], what: str) -> None:
    deadline = time.monotonic() + 30.0
    while not check({unit.unit_id: unit.state for unit in await backend.list_units()}):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)


def test_a_restarted_manager_adopts_the_pods_of_its_predecessor(
    launcher: Launcher, shared_stack: Addresses, rehearsal: Any, client: Any, namespace: str
) -> None:
    addresses = shared_stack
    first = start_manager(launcher, rehearsal, addresses, namespace, "k8s-f", "-mtc", "2")
    with Client(addresses.scheduler) as scaler_client:
        scaler_client.map(sleep_then_double, [0.2] * 4, range(4))
        before = wait_for(
            lambda: len(running_pods(client, namespace, "k8s-f")) == 2 and running_pods(client, namespace, "k8s-f"),
            "two pods",
            SCALE_DEADLINE_SECONDS,
        )
        first.popen.kill()  # no goodbye: its pods stay, as after a crash
        first.popen.wait()
        second = start_manager(launcher, rehearsal, addresses, namespace, "k8s-f", "-mtc", "2")
        second.wait_for_log("registered with the scheduler", COLD_START_SECONDS)
        assert scaler_client.map(sleep_then_double, [0.2] * 4, range(4)) == [0, 2, 4, 6]
    assert running_pods(client, namespace, "k8s-f") == before  # the same pods: adopted, not doubled
    assert "launching" not in second.log_text()
    assert stop(second) == 0
    wait_for(lambda: not pods(client, namespace), "the adopted pods to be deleted when the manager stops")


def test_the_pods_of_a_dead_manager_end_by_themselves_and_the_next_one_collects_them(
    launcher: Launcher, make_stack: Callable[..., Addresses], rehearsal: Any, client: Any, namespace: str
) -> None:
    addresses = make_stack()
    # its workers give up on a scheduler gone for 5 s
    first = start_manager(
        launcher, rehearsal, addresses, namespace, "k8s-h", "-mtc", "2", "--death-timeout-seconds", "5"
    )
    with Client(addresses.scheduler) as scaler_client:
        scaler_client.map(sleep_then_double, [0.2] * 4, range(4))
    wait_for(lambda: running_pods(client, namespace, "k8s-h"), "the pods to run", SCALE_DEADLINE_SECONDS)
    left = {pod.metadata.name for pod in pods(client, namespace, "k8s-h")}
    first.popen.kill()  # the manager dies, and the whole stack with it: nothing will delete its pods
    first.popen.wait()
    for service in STACKS.pop(addresses.scheduler):
        service.popen.kill()
        service.popen.wait()

    def ended() -> bool:
        phases = {pod.metadata.name: pod.status.phase for pod in pods(client, namespace, "k8s-h")}
        return set(phases) == left and all(phase in ("Succeeded", "Failed") for phase in phases.values())

    wait_for(ended, "the orphaned pods to end by themselves", SCALE_DEADLINE_SECONDS)
    later = make_stack()
    second = start_manager(launcher, rehearsal, later, namespace, "k8s-h", "-mtc", "2")
    wait_for(lambda: not pods(client, namespace), "the next manager with the same id to collect them",
             SCALE_DEADLINE_SECONDS)  # fmt: skip
    assert stop(second) == 0


def test_ctrl_c_of_the_example_stack_leaves_no_pod(
    launcher: Launcher, rehearsal: Any, client: Any, namespace: str, tmp_path: Path
) -> None:
    from lightkube.resources.core_v1 import Secret

    from scaler.config.example_files import example_text

    addresses = free_addresses()
    defaults = (("8516", addresses.scheduler), ("8517", addresses.object_storage), ("8518", addresses.monitor))
    ports = {port: address.rsplit(":", 1)[1] for port, address in defaults}
    text = example_text("kubernetes")
    for default, port in ports.items():
        text = text.replace(f":{default}", f":{port}")
    text = text.replace('"fake-kubernetes.kubeconfig"', f'"{rehearsal.kubeconfig_path}"')
    text = text.replace('k8s_namespace = "default"', f'k8s_namespace = "{namespace}"')
    stack_file = tmp_path / "kubernetes.toml"
    stack_file.write_text(text)
    stack = launcher.start("scaler", str(stack_file))
    stack.wait_for_log("registered with the scheduler", COLD_START_SECONDS)
    with Client(addresses.scheduler) as scaler_client:
        assert scaler_client.map(sleep_then_double, [0.1] * 4, range(4)) == [0, 2, 4, 6]
    assert pods(client, namespace, "k8s")
    stack.popen.send_signal(signal.SIGINT)
    assert stack.wait_exit(90.0) == 0
    assert not pods(client, namespace)  # stopping the stack deleted every labelled pod (and waited for them)
    assert not [s for s in client.list(Secret, namespace=namespace) if s.metadata.name.startswith("scaler-worker-keys")]
