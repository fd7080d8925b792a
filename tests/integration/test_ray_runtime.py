"""scaler.compat.ray's answers about the cluster and the running code (issue 59), as Ray's own tests of them ask
(python/ray/tests: test_runtime_context, test_basic's resources and oversized functions), each case in our words:
`ray.cluster_resources()`, `ray.available_resources()`, `ray.nodes()` from the scheduler's view of its workers;
`ray.get_runtime_context()` ids, assigned resources and current actor; `ray.get_gpu_ids()`; options that only tune
Ray accepted with a warning, those that change results refused by name; a function over Ray's size bound refused.

Before this work the cluster calls and the runtime context raised NotImplementedError, and the oversized function
was sent; each test below fails that way against the module before it.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Iterator

import pytest

import scaler.compat.ray as ray
from scaler import SchedulerClusterCombo
from scaler.compat import ray_options
from tests.integration.conftest import running_cluster, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("test_ray_runtime"), pytest.mark.timeout(180)]


@pytest.fixture(scope="module")
def shared_cluster() -> Iterator[SchedulerClusterCombo]:
    """The module's cluster: its workers offer GPUs (as many as asked for) and three of a custom resource."""
    with running_cluster(2, per_worker_capabilities={"gpu": -1, "custom": 3}) as running:
        yield running


@ray.remote
def sleeper(seconds: float) -> None:
    time.sleep(seconds)


@ray.remote
def ids() -> tuple[str | None, str | None, str, str, dict[str, float], list[int]]:
    context = ray.get_runtime_context()
    return (
        context.get_task_id(), context.get_actor_id(), context.get_job_id(), context.get_node_id(),
        context.get_assigned_resources(), ray.get_gpu_ids(),
    )  # fmt: skip


@ray.remote
class Echo:
    def __init__(self) -> None:
        self.built_in = ray.get_runtime_context().get_actor_id()

    def check(self) -> tuple[str | None, str | None, str | None, dict[str, float], bool]:
        context = ray.get_runtime_context()
        return (
            self.built_in, context.get_actor_id(), context.get_actor_name(), context.get_assigned_resources(),
            "actor_id" in context.get(),
        )  # fmt: skip


def test_the_cluster_s_resources_are_the_workers_the_scheduler_has(ray_connected: None) -> None:
    total = ray.cluster_resources()
    assert total["CPU"] == 2.0 and total["GPU"] == 2.0 and total["custom"] == 6.0
    assert any(key.startswith("node:") for key in total)
    [node] = ray.nodes()
    assert node["Alive"] and node["Resources"]["CPU"] == 2.0 and len(node["NodeID"]) == 56
    running = sleeper.remote(30)
    wait_for(lambda: ray.available_resources().get("CPU") == 1.0, "one worker busy in the scheduler's view")
    ray.cancel(running)
    wait_for(lambda: ray.available_resources().get("CPU") == 2.0, "both workers free again")


def test_the_runtime_context_of_the_driver_a_task_and_an_actor(ray_connected: None) -> None:
    driver = ray.get_runtime_context()
    assert driver.get_task_id() is None and driver.get_actor_id() is None
    assert set(driver.get()) == {"job_id", "node_id"}
    task_id, actor_id, job_id, node_id, assigned, gpus = ray.get(ids.remote())
    assert task_id is not None and actor_id is None
    assert job_id == driver.get_job_id() and node_id == driver.get_node_id()
    assert assigned == {"CPU": 1.0} and gpus == []
    assert ray.get(ids.options(num_cpus=2, num_gpus=1).remote())[4:] == ({"CPU": 2.0, "GPU": 1.0}, [0])
    built_in, actor_id, name, assigned, listed = ray.get(Echo.options(name="echo", num_cpus=4).remote().check.remote())
    assert actor_id is not None and built_in == actor_id and name == "echo" and listed
    assert assigned == {"CPU": 4.0}
    assert ray.get(Echo.remote().check.remote())[2:4] == ("", {})
    with pytest.warns(DeprecationWarning, match="get_job_id"):
        assert driver.job_id is not None and driver.job_id.hex() == driver.get_job_id()


def test_options_that_tune_ray_warn_once_and_those_that_change_results_are_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(ray_options, "_warned", set())
    with pytest.warns(UserWarning, match="memory is accepted and not used"):
        ray.remote(memory=10**9)(lambda: 1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ray.remote(memory=10**9)(lambda: 1)  # once
    with pytest.raises(NotImplementedError, match=r"runtime_env is refused .*--preload"):
        ray.remote(runtime_env={"env_vars": {"A": "1"}})(lambda: 1)
    with pytest.raises(NotImplementedError, match="placement_group is refused"):
        ray.remote(placement_group="pg")(lambda: 1)
    with pytest.raises(NotImplementedError, match="no_such_option is not supported"):
        ray.remote(no_such_option=1)(lambda: 1)


def test_a_function_past_ray_s_size_bound_is_refused_naming_its_size(
    ray_connected: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FUNCTION_SIZE_ERROR_THRESHOLD", str(1_000_000))  # Ray's variable, a smaller bound
    captured = b"x" * 3_000_000

    @ray.remote
    def f() -> int:
        return len(captured)

    @ray.remote
    class Holder:
        def size(self) -> int:
            return len(captured)

    with pytest.raises(ValueError, match=r"The remote function .*f is too large \(2 MiB > .*=0 MiB\)"):
        f.remote()
    with pytest.raises(ValueError, match="The actor Holder is too large"):
        Holder.remote()
