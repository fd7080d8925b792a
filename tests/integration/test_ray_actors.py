"""Ray's actor API through scaler.compat.ray on a real cluster: the actor examples of Ray's documentation ("Actors",
"Named actors", "Terminating actors", "Fault tolerance" of ray.io's core guide), as written there, plus num_returns,
ray.method and the clear errors of what is not supported."""

from __future__ import annotations

import os
import signal
import time

import pytest

import scaler.compat.ray as ray
from tests.integration.conftest import agent_of_processor, running_cluster

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("test_ray_actors")]


# ---------------------------------------------------------------- Ray's documentation, as written there


@ray.remote
class Counter:
    def __init__(self):
        self.value = 0

    def increment(self):
        self.value += 1
        return self.value

    def get_counter(self):
        return self.value


@ray.remote
def f(counter):
    for _ in range(10):
        time.sleep(0.1)
        counter.increment.remote()


def test_the_counter_example_of_rays_actor_guide(ray_connected: None) -> None:
    """Ray's "Actors" page: one counter, then ten, each keeping its own state; more actors than slots. Checked to
    fail with the agent's HOSTING state off (each actor held a slot: the third one waited for good)."""
    counter = Counter.remote()
    obj_ref = counter.increment.remote()
    assert ray.get(obj_ref) == 1

    counters = [Counter.remote() for _ in range(10)]
    results = ray.get([c.increment.remote() for c in counters])
    assert results == [1] * 10
    results = ray.get([counters[0].increment.remote() for _ in range(5)])
    assert results == [2, 3, 4, 5, 6]
    assert ray.get(counter.get_counter.remote()) == 1


def test_actor_handles_passed_to_tasks_call_the_same_actor(ray_connected: None) -> None:
    """Ray's "Passing around actor handles", as written there (sleeps shortened by the page's own numbers)."""
    counter = Counter.remote()

    # Start some tasks that use the actor.
    [f.remote(counter) for _ in range(3)]

    # Print the counter value.
    values = []
    for _ in range(10):
        time.sleep(0.1)
        values.append(ray.get(counter.get_counter.remote()))
    deadline = time.monotonic() + 30
    while ray.get(counter.get_counter.remote()) < 30 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert ray.get(counter.get_counter.remote()) == 30
    assert values == sorted(values)


def test_named_actors_are_found_by_name_and_killed(ray_connected: None) -> None:
    """Ray's "Named actors" and "Terminating actors": get_actor finds it; after ray.kill its calls fail with
    RayActorError and its name is free."""
    counter = Counter.options(name="some_name").remote()
    assert ray.get(counter.increment.remote()) == 1
    same = ray.get_actor("some_name")
    assert ray.get(same.increment.remote()) == 2
    ray.kill(counter)
    with pytest.raises(ray.exceptions.RayActorError):
        ray.get(same.increment.remote(), timeout=30)
    with pytest.raises(ValueError, match="some_name"):
        ray.get_actor("some_name")


@ray.remote
def increment_by_name(name):
    return ray.get(ray.get_actor(name).increment.remote())


@ray.remote
def start_by_name(name):
    counter = Counter.options(name=name).remote()
    return ray.get(counter.increment.remote())


@ray.remote(max_concurrency=2)
class Finder:
    def increment_by_name(self, name):
        return ray.get(ray.get_actor(name).increment.remote())


def test_a_task_finds_the_drivers_named_actors_and_names_its_own_in_the_drivers_key(ray_connected: None) -> None:
    """Ray's "Named actors": an actor is retrieved by name "somewhere" in the job, its tasks included. On a cluster
    with CURVE keys (this one's) a task's client connects with its worker's key; its lookup and its named start say
    which task they come from, and count as the driver's key (core/actors.py rule 5). Checked to fail with
    `processor_context.running_task_id` returning b"" (the task did not find the driver's actor)."""
    counter = Counter.options(name="found_from_a_task").remote()
    assert ray.get(counter.increment.remote()) == 1
    assert ray.get(increment_by_name.remote("found_from_a_task"), timeout=60) == 2
    assert ray.get(counter.get_counter.remote()) == 2
    assert ray.get(start_by_name.remote("named_in_a_task"), timeout=60) == 1
    started_there = ray.get_actor("named_in_a_task")
    assert ray.get(started_there.increment.remote()) == 2
    # an actor's calls on its pool's threads (max_concurrency above 1) count as its start task's
    assert ray.get(Finder.remote().increment_by_name.remote("found_from_a_task"), timeout=60) == 3
    ray.kill(started_there)
    ray.kill(counter)


@ray.remote
class Doubler:
    def double(self, n):
        return 2 * n

    def slow_double(self, n, seconds):
        time.sleep(seconds)
        return 2 * n

    def fail(self, n):
        raise ValueError(f"no double for {n}")


def test_actor_pool_examples_of_rays_documentation(ray_connected: None) -> None:
    """`ray.util.ActorPool`, the examples of its API reference as written there: map, map_unordered, submit and
    get_next, has_free, pop_idle and push."""
    from ray.util import ActorPool

    a1, a2 = Doubler.remote(), Doubler.remote()
    pool = ActorPool([a1, a2])
    assert list(pool.map(lambda a, v: a.double.remote(v), [1, 2, 3, 4])) == [2, 4, 6, 8]
    assert sorted(pool.map_unordered(lambda a, v: a.double.remote(v), [1, 2, 3, 4])) == [2, 4, 6, 8]
    pool.submit(lambda a, v: a.double.remote(v), 1)
    pool.submit(lambda a, v: a.double.remote(v), 2)
    assert (pool.get_next(), pool.get_next(), pool.has_next()) == (2, 4, False)
    pool.submit(lambda a, v: a.double.remote(v), 1)
    pool.submit(lambda a, v: a.double.remote(v), 2)
    assert sorted([pool.get_next_unordered(), pool.get_next_unordered()]) == [2, 4]
    with pytest.raises(StopIteration):
        pool.get_next()

    pool = ActorPool([a1])
    pool.submit(lambda a, v: a.double.remote(v), 1)
    assert not pool.has_free()
    assert pool.get_next() == 2
    assert pool.has_free()
    assert pool.pop_idle() is a1 and not pool.has_free()
    pool.push(a2)
    assert pool.has_free()
    with pytest.raises(ValueError, match="already belongs"):
        pool.push(a2)


def test_actor_pool_keeps_values_for_busy_actors_and_times_out_and_raises_as_ray(ray_connected: None) -> None:
    """More values than actors wait for an idle one, in order; a timeout raises TimeoutError (the result stays
    unless `ignore_if_timedout`); a call's error is raised by the get_next that reaches it, its actor free again.
    Checked to fail with `_now_idle` not starting a waiting value (map never ends: test timeout)."""
    pool = ray.util.ActorPool([Doubler.remote(), Doubler.remote()])
    assert list(pool.map(lambda a, v: a.double.remote(v), range(10))) == [2 * v for v in range(10)]
    pool.submit(lambda a, v: a.slow_double.remote(v, 1.0), 5)
    with pytest.raises(TimeoutError):
        pool.get_next(timeout=0.01)
    assert pool.get_next() == 10
    pool.submit(lambda a, v: a.slow_double.remote(v, 1.0), 6)
    with pytest.raises(TimeoutError):
        pool.get_next(timeout=0.01, ignore_if_timedout=True)
    assert not pool.has_next()  # skipped
    pool.submit(lambda a, v: a.fail.remote(v), 7)
    with pytest.raises(ValueError, match="no double for 7"):
        pool.get_next()
    assert pool.has_free()
    assert list(pool.map(lambda a, v: a.double.remote(v), [3])) == [6]


def test_ray_terminate_ends_the_actor_after_the_calls_before_it(ray_connected: None) -> None:
    counter = Counter.remote()
    first = counter.increment.remote()
    ended = counter.__ray_terminate__.remote()
    assert ray.get(first) == 1
    assert ray.get(ended, timeout=30) is None
    with pytest.raises(ray.exceptions.RayActorError):
        ray.get(counter.increment.remote(), timeout=30)


@ray.remote
class Splitter:
    @ray.method(num_returns=2)
    def split(self, pair):
        return pair[0], pair[1]

    def pid(self):
        import os

        return os.getpid()


def test_num_returns_from_ray_method_and_from_options(ray_connected: None) -> None:
    splitter = Splitter.remote()
    a, b = splitter.split.remote(("x", "y"))
    assert ray.get([a, b]) == ["x", "y"]
    c, d = splitter.split.options(num_returns=2).remote([1, 2])
    assert ray.get(c) == 1 and ray.get(d) == 2
    assert ray.get(splitter.pid.remote()) != os.getpid()


@pytest.mark.timeout(120)
def test_a_taken_name_is_refused_and_a_handle_found_by_name_keeps_num_returns(ray_connected: None) -> None:
    """Ray's "Named actors": a second actor of a live actor's name raises ValueError at `.remote()` (before: a handle
    whose calls failed with ActorDiedError), and `ray.get_actor`'s handle honours `@ray.method(num_returns=2)`
    (before: one reference of the pair)."""
    splitter = Splitter.options(name="splitter").remote()
    with pytest.raises(ValueError, match="already taken"):
        Splitter.options(name="splitter").remote()
    assert ray.get(Splitter.options(name="splitter", get_if_exists=True).remote().pid.remote()) == ray.get(
        splitter.pid.remote()
    )
    a, b = ray.get_actor("splitter").split.remote(("x", "y"))
    assert ray.get([a, b]) == ["x", "y"]
    ray.kill(splitter)


@pytest.mark.timeout(240)
def test_max_restarts_restarts_an_actor_whose_worker_died() -> None:
    """Ray's "Actor fault tolerance": with max_restarts=1 the actor is built again after its worker is killed (a call
    at it fails with RayActorError); by default (0) it is not. Uses its own cluster: it kills workers."""
    with running_cluster(2) as cluster:
        ray.scaler_init(address=cluster.get_address())
        try:
            splitter = Splitter.options(max_restarts=1).remote()
            pid = ray.get(splitter.pid.remote())
            os.kill(agent_of_processor(pid), signal.SIGKILL)
            os.kill(pid, signal.SIGKILL)
            with pytest.raises(ray.exceptions.RayActorError):  # the call was made before the scheduler knew
                ray.get(splitter.pid.remote(), timeout=60)
            again = ray.get(splitter.pid.remote(), timeout=60)
            assert again != pid
            once = Splitter.remote()
            pid = ray.get(once.pid.remote())
            os.kill(agent_of_processor(pid), signal.SIGKILL)
            os.kill(pid, signal.SIGKILL)
            with pytest.raises(ray.exceptions.RayActorError, match="restarts are spent"):
                ray.get(once.pid.remote(), timeout=60)
        finally:
            ray.shutdown()


def test_what_is_not_supported_about_actors_raises_naming_it(ray_connected: None) -> None:
    with pytest.raises(TypeError, match=r"use 'Counter\.remote\(\)'"):
        Counter()
    counter = Counter.remote()
    with pytest.raises(TypeError, match=r"try 'object\.increment\.remote\(\)'"):
        counter.increment()
    with pytest.raises(AttributeError, match="no public method 'decrement'"):
        counter.decrement.remote()
    with pytest.raises(NotImplementedError, match="detached"):
        Counter.options(lifetime="detached").remote()
    with pytest.raises(NotImplementedError, match="concurrency_groups is refused"):
        Counter.options(concurrency_groups={"io": 2})
