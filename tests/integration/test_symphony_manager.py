"""`scaler_worker_manager symphony` end to end against the fake `soamapi` (tests/fake_soamapi): a real
scheduler, the manager and its proxy worker as processes, every task a Symphony task run by
`scaler.worker_manager.symphony.service` in a service instance process of the fake middleware.

Covered: a map, a task's exception with its remote traceback, cancel and time-out of a running task, a session
dropped mid-task (a clear error, then a new session), a proxy SIGKILLed mid-task (its task runs again on a new
proxy), soamapi missing (exit code 2 naming it), and `scaler config/symphony.toml`.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from scaler import Client
from scaler.config.sections import SymphonyWorkerManagerConfig
from scaler.errors import ProcessorDiedError, TaskTimeoutError
from scaler.worker_manager.offload.backend import JobOutcome, OffloadError, RemoteJob
from scaler.worker_manager.symphony.soam_backend import SoamBackend, make_backend
from tests.integration.conftest import (
    DEADLINE_SECONDS,
    Addresses,
    Launcher,
    Service,
    is_alive,
    pid_is_alive,
    probe_scheduler,
    running_stack,
    wait_for,
)
from tests.integration.test_launcher import Stack, stack_file

#: its module fixtures are made once: its tests share one test process (make test: --dist loadgroup)
pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("test_symphony_manager")]

FAKE_SOAMAPI = Path(__file__).resolve().parents[1] / "fake_soamapi"
SERVICE_NAME = "ScalerService"
SERVICE_MODULE = "scaler.worker_manager.symphony.service"
PROXY_MODULE = "scaler.worker_manager.offload.proxy_process"
SCALING = ("--policy-content", "allocate=even_load; scaling=vanilla")
#: Scales up like vanilla but keeps an idle worker for a minute: a test that counts or follows the workers after their
#: tasks are done.
SCALING_KEEPING_IDLE_WORKERS = ("--policy-content", "allocate=even_load; scaling=work; cooldown_seconds=60")


def fake_symphony_environment(control_dir: Path, with_soamapi: bool = True) -> dict[str, str]:
    """The fake on PYTHONPATH, its application profile (ScalerService -> our service module) and its control
    folder (which also marks every process of the test: they all inherit this environment)."""
    environment = {
        "FAKE_SOAMAPI_APPLICATIONS": json.dumps({SERVICE_NAME: [sys.executable, "-m", SERVICE_MODULE]}),
        "FAKE_SOAMAPI_CONTROL_DIR": str(control_dir),
    }
    if with_soamapi:
        environment["PYTHONPATH"] = os.pathsep.join(filter(None, [str(FAKE_SOAMAPI), os.environ.get("PYTHONPATH")]))
    return environment


def marked_processes(control_dir: Path) -> list[psutil.Process]:
    """Live processes started with this test's fake Symphony environment (manager, proxies, instances)."""
    found = []
    for process in psutil.process_iter():
        try:
            if process.environ().get("FAKE_SOAMAPI_CONTROL_DIR") == str(control_dir) and is_alive(process):
                found.append(process)
        except psutil.Error:
            continue
    return found


def processes_running(module: str, control_dir: Path) -> list[psutil.Process]:
    found = []
    for process in marked_processes(control_dir):
        try:
            if module in process.cmdline():
                found.append(process)
        except psutil.Error:
            continue
    return found


def stop_and_check_nothing_is_left(control_dir: Path) -> None:
    """Wait for every process of the test's fake Symphony to exit; kill (and report) the ones that do not."""
    try:
        wait_for(lambda: not marked_processes(control_dir), "every manager, proxy and service instance to exit")
    except AssertionError:
        left = marked_processes(control_dir)
        described = [f"{p.pid} {' '.join(p.cmdline())[:100]}" for p in left]
        for process in left:
            process.kill()
        raise AssertionError(f"processes left behind: {described}") from None


@dataclass
class SymphonyStack:
    addresses: Addresses
    manager: Service
    control_dir: Path

    def order(self, name: str) -> None:
        """A test hook of the fake: `drop_session` or `kill_service_instances`, taken by the proxy's session."""
        (self.control_dir / name).touch()
        wait_for(lambda: not (self.control_dir / name).exists(), f"the fake Symphony to take {name!r}")

    def proxies(self) -> list[psutil.Process]:
        return processes_running(PROXY_MODULE, self.control_dir)

    def service_instances(self) -> list[psutil.Process]:
        return processes_running(SERVICE_MODULE, self.control_dir)


@pytest.fixture(scope="module")
def scheduler_of(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[tuple[str, ...]], Addresses]]:
    """`scheduler_of(policy)`: object storage and a scheduler of that policy, made when a test first asks, for the
    module's tests: each test's manager (and its fake Symphony) is stopped and all of it gone before the next test."""
    made: dict[tuple[str, ...], Addresses] = {}
    with contextlib.ExitStack() as stacks:

        def scheduler(policy: tuple[str, ...]) -> Addresses:
            if policy not in made:
                folder = tmp_path_factory.mktemp("symphony-stack")
                made[policy] = stacks.enter_context(running_stack(folder, workers=0, scheduler_args=policy))
            return made[policy]

        yield scheduler


@pytest.fixture
def make_symphony(
    launcher: Launcher, tmp_path: Path, scheduler_of: Callable[[tuple[str, ...]], Addresses]
) -> Iterator[Callable[..., SymphonyStack]]:
    """`make_symphony(*manager_args, policy=SCALING)`: a Symphony manager of 4 slots on the fake, for the module's
    object storage and scheduler of that policy (vanilla scaling unless told); the manager is stopped afterwards and
    no process of it may be left."""
    control_dir = tmp_path / "fake-symphony"
    control_dir.mkdir()
    managers: list[Service] = []

    def make(*manager_args: str, policy: tuple[str, ...] = SCALING) -> SymphonyStack:
        addresses = scheduler_of(policy)
        manager = launcher.start(
            "scaler_worker_manager", "symphony", addresses.scheduler, "--service-name", SERVICE_NAME, "-mtc", "4",
            "-wmi", "symphony", "-his", "1", "-ll", "INFO", *manager_args, env=fake_symphony_environment(control_dir),
        )  # fmt: skip
        managers.append(manager)
        manager.wait_for_log("registered")
        return SymphonyStack(addresses, manager, control_dir)

    try:
        yield make
    finally:
        for manager in managers:
            if manager.is_running():
                manager.popen.send_signal(signal.SIGTERM)
        for manager in managers:
            manager.wait_exit(60)
        stop_and_check_nothing_is_left(control_dir)


# ---------------------------------------------------------------- task functions (run in service instances)


def square_and_pid(x: int) -> tuple[int, int]:
    import os

    return x * x, os.getpid()


def explode(x: int) -> None:
    raise ValueError(f"exploded on {x}")


def mark_then_sleep(path: str, seconds: float) -> int:
    import os
    import time
    from pathlib import Path

    Path(path).write_text(str(os.getpid()))
    time.sleep(seconds)
    return os.getpid()


def hang_on_first_run(path: str, value: int) -> int:
    """The first run records its pid and hangs; a run after it (the task again) answers at once."""
    import os
    import time
    from pathlib import Path

    marker = Path(path)
    if marker.exists():
        return value
    marker.write_text(str(os.getpid()))
    time.sleep(600)
    return -1


def pid_in(path: Path) -> int | None:
    text = path.read_text() if path.exists() else ""
    return int(text) if text else None


# ---------------------------------------------------------------- tests


@pytest.mark.timeout(180)
def test_a_map_runs_every_task_in_symphony_service_instances(make_symphony: Callable[..., SymphonyStack]) -> None:
    """Its worker is kept while idle, to be counted after the map (under vanilla scaling it may be stopped as soon as
    the map is done, its service instances with it)."""
    symphony = make_symphony(policy=SCALING_KEEPING_IDLE_WORKERS)
    with Client(address=symphony.addresses.scheduler, timeout_seconds=60) as client:
        results = client.map(square_and_pid, range(50))
        assert [square for square, _ in results] == [x * x for x in range(50)]
        instances = {process.pid for process in symphony.service_instances()}
    assert {pid for _, pid in results} <= instances, "every task ran in a service instance of the fake Symphony"
    assert len(symphony.proxies()) == 1, "one proxy holds the -mtc 4 slots"
    assert "opened IBM Symphony session" in symphony.manager.log_text()


@pytest.mark.timeout(120)
def test_a_task_exception_comes_back_with_its_remote_traceback(make_symphony: Callable[..., SymphonyStack]) -> None:
    symphony = make_symphony()
    with Client(address=symphony.addresses.scheduler, timeout_seconds=60) as client:
        with pytest.raises(ValueError, match="exploded on 7") as caught:
            client.submit(explode, 7).result(timeout=DEADLINE_SECONDS)
        remote = str(caught.value.__cause__)
        assert "Traceback" in remote and "in explode" in remote, remote
        assert client.submit(pow, 3, 4).result(timeout=DEADLINE_SECONDS) == 81


@pytest.mark.timeout(120)
def test_cancel_of_a_running_task_returns_and_the_next_tasks_run(
    make_symphony: Callable[..., SymphonyStack], tmp_path: Path
) -> None:
    """The same worker opens the next session, saying which one was lost: its unit is kept while idle (vanilla
    scaling stopped it as soon as the failed task left it idle, and a new worker opened a session 1 of its own,
    without the loss to mention: the test's flake)."""
    symphony = make_symphony(policy=SCALING_KEEPING_IDLE_WORKERS)
    marker = tmp_path / "running"
    with Client(address=symphony.addresses.scheduler, timeout_seconds=60) as client:
        future = client.submit(mark_then_sleep, str(marker), 300)
        instance = wait_for(lambda: pid_in(marker), "the task to start in a service instance")
        assert future.cancel(timeout=DEADLINE_SECONDS) is True
        assert future.cancelled()
        assert client.map(pow, [2] * 6, range(6)) == [2**x for x in range(6)]
        # Symphony's API cannot stop one task: it runs on, its output is dropped (documented)
        assert pid_is_alive(instance)
    symphony.manager.wait_for_log("cannot stop one task")


@pytest.mark.timeout(120)
def test_a_task_over_the_time_limit_fails_with_task_timeout_error(
    make_symphony: Callable[..., SymphonyStack], tmp_path: Path
) -> None:
    """Its worker is kept while idle, to be counted after the time-out: under vanilla scaling the worker whose task
    failed may be stopped at once, and no proxy is left to count (the flake). (No task after it here: the limit also
    counts the start of the service instance it would need, while the timed-out task still runs in the first one;
    the cancel test runs tasks after an abandoned one.)"""
    symphony = make_symphony("--task-timeout-seconds", "2", policy=SCALING_KEEPING_IDLE_WORKERS)
    with Client(address=symphony.addresses.scheduler, timeout_seconds=60) as client:
        with pytest.raises(TaskTimeoutError):
            client.submit(mark_then_sleep, str(tmp_path / "running"), 300).result(timeout=DEADLINE_SECONDS)
    symphony.manager.wait_for_log("cannot stop one task")  # the proxy let the Symphony task go
    assert len(symphony.proxies()) == 1 and symphony.manager.is_running()


@pytest.mark.timeout(120)
def test_a_session_dropped_mid_task_fails_the_task_clearly_and_a_new_session_serves_the_next(
    make_symphony: Callable[..., SymphonyStack], tmp_path: Path
) -> None:
    """The same worker opens the next session, saying which one was lost: its unit is kept while idle (vanilla
    scaling stopped it as soon as the failed task left it idle, and a new worker opened a session 1 of its own,
    without the loss to mention: the test's flake)."""
    symphony = make_symphony(policy=SCALING_KEEPING_IDLE_WORKERS)
    marker = tmp_path / "running"
    with Client(address=symphony.addresses.scheduler, timeout_seconds=60) as client:
        future = client.submit(mark_then_sleep, str(marker), 300)
        instance = wait_for(lambda: pid_in(marker), "the task to start in a service instance")
        symphony.order("drop_session")
        with pytest.raises(ProcessorDiedError, match=r"IBM Symphony session \d+ was lost while its task"):
            future.result(timeout=DEADLINE_SECONDS)
        wait_for(lambda: not pid_is_alive(instance), "the aborted session's service instance to be gone")
        assert client.map(pow, [3] * 5, range(5)) == [3**x for x in range(5)]
    symphony.manager.wait_for_log("was lost)")  # "opened IBM Symphony session N (session M was lost)"


@pytest.mark.timeout(120)
def test_a_killed_service_instance_fails_its_task_clearly_and_others_start(
    make_symphony: Callable[..., SymphonyStack], tmp_path: Path
) -> None:
    symphony = make_symphony()
    marker = tmp_path / "running"
    with Client(address=symphony.addresses.scheduler, timeout_seconds=60) as client:
        future = client.submit(mark_then_sleep, str(marker), 300)
        wait_for(lambda: pid_in(marker), "the task to start in a service instance")
        symphony.order("kill_service_instances")
        with pytest.raises(ProcessorDiedError, match="exited unexpectedly"):
            future.result(timeout=DEADLINE_SECONDS)
        assert client.submit(pow, 7, 2).result(timeout=DEADLINE_SECONDS) == 49


@pytest.mark.timeout(180)
def test_a_proxy_killed_mid_task_is_replaced_and_the_task_runs_again(
    make_symphony: Callable[..., SymphonyStack], tmp_path: Path
) -> None:
    """The new proxy is kept while idle, to be found after the task's result (under vanilla scaling it may be stopped
    as soon as the task is done)."""
    symphony = make_symphony(policy=SCALING_KEEPING_IDLE_WORKERS)
    marker = tmp_path / "first-run"
    with Client(address=symphony.addresses.scheduler, timeout_seconds=120) as client:
        future = client.submit(hang_on_first_run, str(marker), 42)
        first_instance = wait_for(lambda: pid_in(marker), "the first run to start in a service instance")
        [proxy] = symphony.proxies()
        proxy.send_signal(signal.SIGKILL)
        assert future.result(timeout=90) == 42, "the task ran again on a new proxy"
        assert any(other.pid != proxy.pid for other in symphony.proxies()), "a new proxy"
    wait_for(lambda: not pid_is_alive(first_instance), "the dead proxy's service instance to exit")
    assert symphony.manager.is_running()


@pytest.mark.timeout(60)
def test_without_soamapi_the_manager_exits_2_naming_it(launcher: Launcher, tmp_path: Path) -> None:
    manager = launcher.start(
        "scaler_worker_manager", "symphony", "tcp://127.0.0.1:1", "--service-name", SERVICE_NAME, "-ll", "INFO",
        env=fake_symphony_environment(tmp_path, with_soamapi=False),
    )  # fmt: skip
    assert manager.wait_exit() == 2
    assert "needs IBM Symphony's Python API (soamapi)" in manager.log_text(), manager.log_text()
    assert "No module named 'soamapi'" in manager.log_text()


@pytest.mark.timeout(60)
def test_an_application_symphony_does_not_know_stops_the_manager_with_exit_2(
    launcher: Launcher, tmp_path: Path
) -> None:
    manager = launcher.start(
        "scaler_worker_manager", "symphony", "tcp://127.0.0.1:1", "--service-name", "NoSuchService", "-ll", "INFO",
        env=fake_symphony_environment(tmp_path),
    )  # fmt: skip
    assert manager.wait_exit() == 2
    assert "could not connect to the IBM Symphony application 'NoSuchService'" in manager.log_text()


@pytest.mark.timeout(180)
def test_the_example_file_runs_a_map_on_the_fake_symphony(tmp_path: Path) -> None:
    path, scheduler, _monitor = stack_file(tmp_path, "symphony.toml")
    control_dir = tmp_path / "fake-symphony"
    control_dir.mkdir()
    previous = dict(os.environ)
    os.environ.update(fake_symphony_environment(control_dir))  # the launcher's children inherit it
    try:
        running = Stack(path, tmp_path / "scaler.log")
    finally:
        os.environ.clear()
        os.environ.update(previous)
    try:
        probe_scheduler(scheduler)
        with Client(address=scheduler, timeout_seconds=60) as client:
            assert [square for square, _ in client.map(square_and_pid, range(20))] == [x * x for x in range(20)]
        running.remember()
        running.popen.send_signal(signal.SIGTERM)
        assert running.popen.wait(timeout=60) == 0, running.log()[-3000:]
        assert running.leftovers() == []
    finally:
        if running.popen.poll() is None:
            running.kill_everything()
            running.popen.wait(timeout=30)
        stop_and_check_nothing_is_left(control_dir)


# ---------------------------------------------------------------- the backend alone, on an echo service

ECHO_SERVICE = '''
import os, sys, time
from pathlib import Path

import soamapi
from scaler.worker_manager.symphony.soam_backend import payload_message_class

Message = payload_message_class(soamapi)


class EchoService(soamapi.ServiceContainer):
    """b"hold:<folder>": write this pid to <folder>/pid, wait for <folder>/go; then answer b"echo:" + input."""

    def on_invoke(self, task_context):
        message = Message()
        task_context.populate_task_input(message)
        command, _, argument = message.payload.partition(b":")
        if command == b"hold":
            folder = Path(argument.decode())
            (folder / "pid").write_text(str(os.getpid()))
            while not (folder / "go").exists():
                time.sleep(0.01)
        task_context.set_task_output(Message(b"echo:" + message.payload))


EchoService().run()
'''


@pytest.fixture
def echo_backend(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[SoamBackend]:
    """A SoamBackend in this process on the fake, its application an echo service of one instance (so tasks
    run one after the other, in order)."""
    script = tmp_path / "echo_service.py"
    script.write_text(ECHO_SERVICE)
    control_dir = tmp_path / "fake-symphony"
    control_dir.mkdir()
    for name, value in fake_symphony_environment(control_dir).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("FAKE_SOAMAPI_APPLICATIONS", json.dumps({"Echo": [sys.executable, str(script)]}))
    monkeypatch.setenv("FAKE_SOAMAPI_SERVICE_INSTANCES", "1")
    monkeypatch.syspath_prepend(str(FAKE_SOAMAPI))
    backend = make_backend(SymphonyWorkerManagerConfig(scheduler_address="tcp://127.0.0.1:1", service_name="Echo"))
    try:
        yield backend
    finally:
        backend.close()
        for module in ("soamapi", "_fake_symphony"):  # imported from the path this test gave
            sys.modules.pop(module, None)
        stop_and_check_nothing_is_left(control_dir)


def outcomes_of(backend: SoamBackend, keys: set[str]) -> dict[str, JobOutcome]:
    """Poll until every key in `keys` is reported; everything reported meanwhile."""
    seen: dict[str, JobOutcome] = {}

    def all_in() -> bool:
        seen.update((outcome.key, outcome) for outcome in backend.poll())
        return keys <= seen.keys()

    wait_for(all_in, f"outcomes of {sorted(keys)}")
    return seen


@pytest.mark.timeout(60)
def test_the_backend_drops_the_output_of_a_cancelled_job(echo_backend: SoamBackend, tmp_path: Path) -> None:
    echo_backend.submit([RemoteJob("held", f"hold:{tmp_path}".encode()), RemoteJob("next", b"after")])
    wait_for(lambda: pid_in(tmp_path / "pid"), "the held task to run")
    echo_backend.cancel("held", "the test cancels it")
    (tmp_path / "go").touch()  # the held task finishes, then the next one runs on the same instance
    seen = outcomes_of(echo_backend, {"next"})
    assert seen == {"next": JobOutcome("next", b"echo:after")}


@pytest.mark.timeout(60)
def test_a_dropped_session_fails_its_jobs_and_the_next_submit_opens_another(
    echo_backend: SoamBackend, tmp_path: Path
) -> None:
    import soamapi  # the fake, on the path for this test

    echo_backend.submit([RemoteJob("held", f"hold:{tmp_path}".encode())])
    instance = wait_for(lambda: pid_in(tmp_path / "pid"), "the held task to run")
    soamapi.fake_drop_session()
    lost = outcomes_of(echo_backend, {"held"})["held"]
    assert lost.outcome is None and "was lost while its task 1 ran" in lost.failure, lost
    wait_for(lambda: not pid_is_alive(instance), "the dropped session's instance to be killed")
    echo_backend.submit([RemoteJob("again", b"hello")])
    assert outcomes_of(echo_backend, {"again"})["again"].outcome == b"echo:hello"


@pytest.mark.timeout(60)
def test_closing_the_backend_ends_the_tasks_still_in_symphony(echo_backend: SoamBackend, tmp_path: Path) -> None:
    echo_backend.submit([RemoteJob("held", f"hold:{tmp_path}".encode())])
    instance = wait_for(lambda: pid_in(tmp_path / "pid"), "the held task to run")
    echo_backend.close()
    assert not pid_is_alive(instance)
    echo_backend.close()  # twice is harmless
    with pytest.raises(OffloadError, match="closed"):
        echo_backend.submit([RemoteJob("late", b"x")])
