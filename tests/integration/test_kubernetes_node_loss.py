"""`scaler_worker_manager kubernetes` when a node is lost with its pods, against a rehearsal of two nodes whose control
plane notices a silent kubelet after 2 s (a real one: 50 s) and whose pods tolerate an unreachable node for the
default 300 s: a pod lost with its node loses no task (they run again), is named (NodeLost) and replaced on the other
node at once, not after its toleration, and is not left Terminating (force-deleted once its deadline passed with no
kubelet to confirm, or when the manager stops); with no other node, its replacement waits Unschedulable, saying
why, until the node is back."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from scaler import Client
from tests.integration.conftest import Launcher, monitor, wait_for
from tests.integration.kubernetes_harness import (  # noqa: F401 - the fixtures are used by name
    UNREACHABLE,
    client_fixture,
    kubernetes_backend,
    namespace_fixture,
    running_rehearsal,
    unit_spec,
)
from tests.integration.manager_harness import workers_of
from tests.integration.test_kubernetes_manager import (  # noqa: F401 - make_stack is a fixture, used by name
    SCALE_DEADLINE_SECONDS,
    make_stack,
    pods,
    running_pods,
    sleep_then_double,
    start_manager,
    stop,
)

pytestmark = [
    pytest.mark.integration,
    pytest.mark.kubernetes,
    pytest.mark.timeout(240),
    pytest.mark.xdist_group("test_kubernetes_node_loss"),
]


@pytest.fixture(scope="module", name="rehearsal")
def two_nodes() -> Iterator[Any]:
    with running_rehearsal(nodes=2, node_monitor_grace_seconds=2.0) as cluster:
        yield cluster


def node_of(client: Any, name: str, namespace: str) -> str:
    from lightkube.resources.core_v1 import Pod

    return str(client.get(Pod, name, namespace=namespace).spec.nodeName)


def test_a_pod_lost_with_its_node_loses_no_task_is_named_replaced_elsewhere_and_not_left_terminating(
    launcher: Launcher,
    make_stack: Callable[..., Any],  # noqa: F811 - the fixture imported above, asked for by its name
    rehearsal: Any,
    client: Any,
    namespace: str,
) -> None:
    addresses = make_stack()
    manager = start_manager(launcher, rehearsal, addresses, namespace, "k8s-n", "-mtc", "2")
    lost = ""
    try:
        with Client(addresses.scheduler) as scaler_client:
            futures = [scaler_client.submit(sleep_then_double, 1.0, n) for n in range(12)]
            first = wait_for(
                lambda: len(now := running_pods(client, namespace, "k8s-n")) == 2 and now,
                "two running pods",
                SCALE_DEADLINE_SECONDS,
            )
            with monitor(addresses.monitor) as next_snapshot:  # both workers registered: tasks run on both
                next_snapshot(lambda snapshot: len(workers_of(snapshot, "k8s-n")) == 2, SCALE_DEADLINE_SECONDS)
            victim = first[0]
            lost = node_of(client, victim, namespace)
            other = next(node for node in rehearsal.node_names if node != lost)
            assert rehearsal.lose_node(lost)  # its worker dies with the machine; Kubernetes knows 2 s later
            replaced = wait_for(
                lambda: victim not in (now := running_pods(client, namespace, "k8s-n")) and len(now) == 2 and now,
                "a replacement pod",
                SCALE_DEADLINE_SECONDS,
            )
            assert {node_of(client, name, namespace) for name in set(replaced) - set(first)} == {other}
            assert [future.result(timeout=SCALE_DEADLINE_SECONDS) for future in futures] == [n * 2 for n in range(12)]
        manager.wait_for_log(f"NodeLost: Node {lost} which was running pod {victim} is unresponsive")
        # its kubelet cannot confirm the deletion: the manager force-deletes it once its deadline passed
        wait_for(
            lambda: victim not in {pod.metadata.name for pod in pods(client, namespace)},
            "the lost pod to be gone, not left Terminating",
            SCALE_DEADLINE_SECONDS,
        )
        assert "force-deleting it" in manager.log_text()
    finally:
        if lost:
            rehearsal.restore_node(lost)
    assert stop(manager) == 0


def test_with_no_other_node_its_replacement_waits_unschedulable_until_the_node_is_back(
    rehearsal: Any, namespace: str, tmp_path: Path
) -> None:
    from scaler.worker_manager.backend import UnitState

    node = rehearsal.node_names[1]
    spec = unit_spec("k8s-o", death_timeout_seconds=120)

    async def scenario() -> None:
        selector = f"kubernetes.io/hostname={node}"  # the only node its pods may go to
        backend = kubernetes_backend(spec, tmp_path, k8s_namespace=namespace, k8s_node_selector=selector)
        try:
            (first,) = await backend.launch(1, spec)
            await until(backend, lambda units: units[first].state is UnitState.RUNNING, "the pod to run")
            assert rehearsal.lose_node(node)
            units = await until(backend, lambda units: units[first].state is UnitState.STOPPING, "the loss seen")
            assert f"NodeLost: Node {node} which was running pod scaler-worker-{first}" in units[first].detail
            (second,) = await backend.launch(1, spec)

            def waits(units: dict[str, Any]) -> bool:
                wait = units[second].wait if second in units else None
                return wait is not None and wait.reason == "Unschedulable"

            units = await until(backend, waits, "the replacement to wait")
            assert units[second].state is UnitState.PENDING and not units[second].wait.never_starts
            assert units[second].wait.message == (
                "0/2 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, "
                f"1 node(s) had untolerated taint {{{UNREACHABLE}: }}."
            )
            assert rehearsal.restore_node(node)  # back: its kubelet confirms the lost pod's end, the other one runs
            await until(
                backend,
                lambda units: first not in units and units[second].state is UnitState.RUNNING,
                "the replacement to run and the lost pod to be gone",
            )
        finally:
            rehearsal.restore_node(node)
            await backend.close()

    asyncio.run(scenario())


def test_a_manager_stopping_leaves_no_pod_of_a_lost_node_terminating(
    rehearsal: Any, namespace: str, tmp_path: Path
) -> None:
    from scaler.worker_manager.backend import UnitState

    node = rehearsal.node_names[1]
    spec = unit_spec("k8s-q")

    async def scenario() -> str:
        selector = f"kubernetes.io/hostname={node}"
        backend = kubernetes_backend(spec, tmp_path, k8s_namespace=namespace, k8s_node_selector=selector)
        try:
            (unit,) = await backend.launch(1, spec)
            await until(backend, lambda units: units[unit].state is UnitState.RUNNING, "the pod to run")
            assert rehearsal.lose_node(node)
            await until(backend, lambda units: "NodeLost" in units[unit].detail, "the loss seen")
        finally:
            await backend.close()  # at once: well before its deletion deadline
        return f"scaler-worker-{unit}"

    try:
        name = asyncio.run(scenario())
        assert rehearsal.store.find("pods", namespace, name) is None  # force-deleted: no kubelet could confirm
    finally:
        rehearsal.restore_node(node)


async def until(backend: Any, check: Callable[[dict[str, Any]], bool], what: str) -> dict[str, Any]:
    deadline = time.monotonic() + SCALE_DEADLINE_SECONDS
    while True:
        units = {unit.unit_id: unit for unit in await backend.list_units()}
        try:
            if check(units):
                return units
        except KeyError:
            pass
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)
