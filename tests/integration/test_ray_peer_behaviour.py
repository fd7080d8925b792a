"""scaler.compat.ray where Ray's own test suite found it behaving otherwise than Ray (python/ray/tests: test_basic,
test_basic_2, test_actor, test_cancel), each case written here in our words: Ray's private-looking but public call
forms (`_remote`, `num_returns=0`), its checks of options, actor classes that keep their class's attributes, calls
checked against the method's signature, actor namespaces, async actors (one event loop per actor), references nested
in arguments and actor calls whose arguments wait, neither of which blocks the caller, actor handles that keep their
actor alive while a task holds them or that come back from a task, and `RayActorError` as a `RayError`."""

from __future__ import annotations

import asyncio
import gc
import threading
import types
from collections.abc import Iterator
from typing import Any

import pytest

import scaler.compat.ray as ray
from scaler.errors import ActorDiedError as ScalerActorDiedError

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("test_ray_peer_behaviour")]

#: how long a call that should return at once may take before the test says it blocked
RETURNS_AT_ONCE_SECONDS = 30.0


@ray.remote
def numbers(count: int) -> list[int]:
    return list(range(count))


@ray.remote
def first_of(values: list[Any]) -> Any:
    return ray.get(values[0])


@ray.remote
def count_when_open(gate: Any, counter: Any) -> int:
    ray.get(gate.wait.remote())
    return int(ray.get(counter.increment.remote()))


@ray.remote
def call_counter(counter: Any) -> int:
    return int(ray.get(counter.increment.remote()))


@ray.remote
class Gate:
    """Ray's test suites' signal actor: `wait` awaits an asyncio.Event that `send` sets."""

    def __init__(self) -> None:
        self.event = asyncio.Event()

    def send(self) -> None:
        self.event.set()

    async def wait(self) -> str:
        await self.event.wait()
        return "opened"


@ray.remote
class Counter:
    STEP = 1

    def __init__(self, start: int = 0) -> None:
        self.value = start

    @classmethod
    def step(cls) -> int:
        return cls.STEP

    @staticmethod
    def twice(value: int) -> int:
        return 2 * value

    def increment(self) -> int:
        self.value += Counter.step()  # the name is the actor class here: its class attributes are the class's
        return self.value

    def doubled(self, extra: int = 0) -> int:
        return Counter.twice(self.value) + extra


@ray.remote
class Keeper:
    def __init__(self) -> None:
        self.kept = Counter.remote(10)

    def handle(self) -> Any:
        return self.kept


def returns_at_once(call: Any) -> Any:
    """What `call()` returns, failing the test (rather than hanging it) when it blocks."""
    outcome: list[Any] = []
    thread = threading.Thread(target=lambda: outcome.append(call()), daemon=True)
    thread.start()
    thread.join(RETURNS_AT_ONCE_SECONDS)
    assert outcome, "the call blocked the caller"
    return outcome[0]


def test_private_call_forms_and_num_returns_zero(ray_connected: None) -> None:
    """Ray's `f._remote(args=..., kwargs=..., **options)` on functions, actor classes and methods, and
    `num_returns=0` (the task runs, `.remote()` gives None). Checked to fail without `_remote` (AttributeError)."""
    first, second = numbers._remote(args=[2], num_returns=2)
    assert ray.get([first, second]) == [0, 1]
    assert numbers._remote([0], num_returns=0) is None
    counter = Counter._remote(args=[5], kwargs={}, max_concurrency=1)
    assert ray.get(counter.increment._remote()) == 6
    assert ray.get(counter.doubled._remote(args=[], kwargs={"extra": 1})) == 13


def test_options_are_checked_as_ray_checks_them() -> None:
    """Checked to fail with the earlier checks: `max_retries=0.5` raised ValueError, `max_calls` NotImplementedError
    and `@ray.remote()` nothing."""
    with pytest.raises(TypeError, match="max_retries"):
        ray.remote(max_retries=0.5)(len)
    with pytest.raises(TypeError, match="num_returns"):
        ray.remote(num_returns=0.5)(len)
    with pytest.raises(ValueError, match="num_returns"):
        ray.remote(num_returns=-1)(len)
    with pytest.raises(TypeError, match="max_restarts"):
        ray.remote(max_restarts=0.5)(Counter.__wrapped__)
    with pytest.raises(TypeError):
        ray.remote()
    ray.remote(max_calls=1, max_retries=0)(len)  # accepted


def test_an_actor_class_keeps_its_class_attributes_and_refuses_subclasses(ray_connected: None) -> None:
    """Inside its methods the class's name is the actor class, as in Ray: class attributes, class and static methods
    are the class's. Checked to fail without ActorClass.__getattr__ (AttributeError: 'ActorClass' object has no
    attribute 'step') and without __mro_entries__ (the subclass raised a TypeError of another text)."""
    assert Counter.STEP == 1 and Counter.twice(2) == 4
    counter = Counter.remote(1)
    assert ray.get(counter.increment.remote()) == 2
    assert ray.get(counter.doubled.remote()) == 4
    assert counter._actor_id != Counter.remote()._actor_id
    assert {name for name in dir(counter) if not name.startswith("_")} == {"increment", "doubled", "step", "twice"}
    with pytest.raises(TypeError, match="Inheriting from actor classes is not currently supported"):
        types.new_class("Derived", (Counter,))  # what the `class Derived(Counter): ...` statement does


def test_calls_are_checked_against_the_signature_at_the_call(ray_connected: None) -> None:
    """Ray raises TypeError at `.remote()` for arguments the constructor or the method does not take. Checked to fail
    without the checks: `.remote()` returned, the error came at `ray.get`."""
    with pytest.raises(TypeError):
        Counter.remote(1, 2)
    counter = Counter.remote()
    with pytest.raises(TypeError):
        counter.increment.remote(1)
    with pytest.raises(TypeError):
        counter.doubled.remote(extra=1, other=2)
    assert ray.get(counter.doubled.options(name="labelled").remote(extra=1)) == 1


def test_named_actors_are_found_in_their_namespace(ray_connected: None) -> None:
    """Checked to fail without `_scoped`: the actor of namespace "first" was found from namespace "second", and the
    same name in another namespace was refused as taken."""
    first = Counter.options(name="shared", namespace="first").remote()
    with pytest.raises(ValueError):
        ray.get_actor("shared", namespace="second")
    second = Counter.options(name="shared", namespace="second").remote(100)
    assert ray.get(ray.get_actor("shared", namespace="first").increment.remote()) == 1
    assert ray.get(ray.get_actor("shared", namespace="second").increment.remote()) == 101
    ray.kill(first)
    ray.kill(second)


def test_an_async_actor_s_calls_share_one_event_loop(ray_connected: None) -> None:
    """A call awaiting an asyncio.Event made in `__init__` is woken by a later call that sets it (Ray's async actor:
    one loop, up to 1000 calls at once). Checked to fail with each coroutine run in a loop of its own, one call at a
    time: `wait` held the actor, `send` never ran, and `ray.get` timed out."""
    gate = Gate.remote()
    waiting = gate.wait.remote()
    with pytest.raises(ray.GetTimeoutError):
        ray.get(waiting, timeout=0.2)
    ray.get(gate.send.remote(), timeout=RETURNS_AT_ONCE_SECONDS)
    assert ray.get(waiting, timeout=RETURNS_AT_ONCE_SECONDS) == "opened"


def test_a_reference_nested_in_an_argument_does_not_block_the_call(ray_connected: None) -> None:
    """Ray's `f.remote([ref])` returns at once; the task runs once the nested reference's task is done, and a failed
    one raises in the task's own `ray.get`. Checked to fail with pickling waiting for the nested task at `.remote()`
    (the caller blocked: the gate is opened only after the call returns)."""
    gate = Gate.remote()
    opened = returns_at_once(lambda: first_of.remote([gate.wait.remote()]))
    gate.send.remote()
    assert ray.get(opened, timeout=RETURNS_AT_ONCE_SECONDS) == "opened"
    failed = numbers.remote("not a count")
    with pytest.raises(TypeError):
        ray.get(first_of.remote([failed]), timeout=RETURNS_AT_ONCE_SECONDS)


@ray.remote
class Log:
    def __init__(self) -> None:
        self.entries: list[Any] = []

    def add(self, entry: Any) -> int:
        self.entries.append(entry)
        return len(self.entries)

    def read(self) -> list[Any]:
        return list(self.entries)


def test_an_actor_call_waiting_for_an_argument_returns_at_once_and_keeps_its_order(ray_connected: None) -> None:
    """Ray's `actor.method.remote(ref)` returns at once, and the calls made after it run after it; one whose
    argument's task failed raises that error, and the calls after it still run. Checked to fail with the argument
    resolved at `.remote()` (the caller blocked: the gate is opened only after the call returns), and, with a later
    call sent at once rather than after the waiting one, at the log's order."""
    gate, log = Gate.remote(), Log.remote()
    first = returns_at_once(lambda: log.add.remote(gate.wait.remote()))
    second = returns_at_once(lambda: log.add.remote("after"))
    gate.send.remote()
    assert ray.get([first, second], timeout=RETURNS_AT_ONCE_SECONDS) == [1, 2]
    assert ray.get(log.read.remote(), timeout=RETURNS_AT_ONCE_SECONDS) == ["opened", "after"]
    failed = log.add.remote(numbers.remote("not a count"))
    last = log.add.remote("last")
    with pytest.raises(TypeError):
        ray.get(failed, timeout=RETURNS_AT_ONCE_SECONDS)
    assert ray.get(last, timeout=RETURNS_AT_ONCE_SECONDS) == 3


@ray.remote
def start_when_open(gate: Any, start: int) -> int:
    ray.get(gate.wait.remote())
    return start


def test_an_actor_start_waiting_for_an_argument_returns_at_once_and_its_calls_follow_it(ray_connected: None) -> None:
    """Ray's `Cls.remote(ref)` returns a handle at once; the actor is built once the reference's task is done, and
    the calls made meanwhile run on it, in order. One whose argument's task failed is never built: its calls raise
    RayActorError naming why; `ray.kill` of a start still waiting means it never starts. Checked to fail with the
    arguments resolved at `.remote()` (the caller blocked: the gate is opened only after the call returns)."""
    gate = Gate.remote()
    counter = returns_at_once(lambda: Counter.remote(start_when_open.remote(gate, 10)))
    first = returns_at_once(lambda: counter.increment.remote())
    second = returns_at_once(lambda: counter.doubled.remote())
    gate.send.remote()
    assert ray.get([first, second], timeout=RETURNS_AT_ONCE_SECONDS) == [11, 22]
    broken = Counter.remote(numbers.remote("not a count"))
    with pytest.raises(ray.exceptions.RayActorError, match="its start failed"):
        ray.get(broken.increment.remote(), timeout=RETURNS_AT_ONCE_SECONDS)
    never = Gate.remote()
    killed = Counter.remote(start_when_open.remote(never, 0))
    call = killed.increment.remote()
    ray.kill(killed)
    never.send.remote()
    with pytest.raises(ray.exceptions.RayActorError):
        ray.get(call, timeout=RETURNS_AT_ONCE_SECONDS)


def test_a_handle_given_to_a_task_keeps_its_actor_alive(ray_connected: None) -> None:
    """The driver's handle is dropped at once (`call_counter.remote(Counter.remote())`); Ray keeps the actor while
    the task holds a handle. Checked to fail without pin_handles: the actor was stopped when the driver's handle was
    collected, and the task's call raised RayActorError."""
    assert ray.get(call_counter.remote(Counter.remote(41)), timeout=RETURNS_AT_ONCE_SECONDS) == 42
    gate = Gate.remote()
    counter = Counter.remote(1)
    reference = count_when_open.remote(gate, counter)  # runs at once, and waits for the gate
    del counter
    gc.collect()
    gate.send.remote()
    assert ray.get(reference, timeout=RETURNS_AT_ONCE_SECONDS) == 2


def test_a_handle_returned_by_an_actor_calls_it_from_the_driver(ray_connected: None) -> None:
    """Checked to fail with the handle rebuilt only inside a task: the driver's `ray.get` raised
    DeserializeObjectError."""
    keeper = Keeper.remote()
    kept = ray.get(keeper.handle.remote(), timeout=RETURNS_AT_ONCE_SECONDS)
    assert ray.get(kept.increment.remote(), timeout=RETURNS_AT_ONCE_SECONDS) == 11


def test_a_dead_actor_raises_ray_actor_error_a_ray_error(ray_connected: None) -> None:
    """As in Ray, RayActorError is a RayError; what `ray.get` raises is also scaler's ActorDiedError. Checked to fail
    with `ray.exceptions.RayActorError` being scaler's ActorDiedError (not a RayError)."""
    assert issubclass(ray.exceptions.RayActorError, ray.exceptions.RayError)
    assert issubclass(ray.exceptions.ActorDiedError, ray.exceptions.RayActorError)
    counter = Counter.remote()
    ray.get(counter.increment.remote())
    ray.kill(counter)
    with pytest.raises(ray.exceptions.RayError) as raised:
        ray.get(counter.increment.remote(), timeout=RETURNS_AT_ONCE_SECONDS)
    assert isinstance(raised.value, ray.exceptions.RayActorError)
    assert isinstance(raised.value, ray.exceptions.ActorDiedError)
    assert isinstance(raised.value, ScalerActorDiedError)


@ray.remote
def yield_then_fail(count: int) -> Iterator[int]:
    yield from range(count)
    raise ValueError("stopped")


@ray.remote
class Attempts:
    def __init__(self) -> None:
        self.count = 0

    def next(self) -> int:
        self.count += 1
        return self.count


def fails_until(attempts: Any, succeeding_attempt: int, error: type[Exception] = KeyError) -> int:
    attempt = int(ray.get(attempts.next.remote()))
    if attempt < succeeding_attempt:
        raise error(f"attempt {attempt}")
    return attempt


def test_a_generator_that_raised_gives_its_values_then_its_error(ray_connected: None) -> None:
    """Ray's streaming generator: a reference per value yielded, then one raising the error, then StopIteration.
    Checked to fail with the task failing outright (one reference, raising)."""
    generator = yield_then_fail.remote(2)
    assert ray.get(next(generator)) == 0
    assert ray.get(next(generator)) == 1
    with pytest.raises(ray.exceptions.RayTaskError, match="stopped"):
        ray.get(next(generator))
    with pytest.raises(StopIteration):
        next(generator)


def test_retry_exceptions_runs_a_failed_task_again(ray_connected: None) -> None:
    """`retry_exceptions=[KeyError], max_retries=2`: a KeyError runs the task again, up to twice; another exception
    does not. Checked to fail with retry_exceptions refused (NotImplementedError at the decorator)."""
    retried = ray.remote(retry_exceptions=[KeyError], max_retries=2)(fails_until)
    assert ray.get(retried.remote(Attempts.remote(), 3), timeout=RETURNS_AT_ONCE_SECONDS) == 3
    with pytest.raises(KeyError, match="attempt 3"):
        ray.get(retried.remote(Attempts.remote(), 4), timeout=RETURNS_AT_ONCE_SECONDS)
    with pytest.raises(ValueError, match="attempt 1"):
        ray.get(retried.remote(Attempts.remote(), 2, ValueError), timeout=RETURNS_AT_ONCE_SECONDS)
    with pytest.raises(TypeError, match="retry_exceptions"):
        ray.remote(retry_exceptions="yes")(len)
