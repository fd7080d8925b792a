"""Fixtures of the integration tests: local clusters, standalone components started by their commands,
raw sockets, and a watch over every process a test starts (none may outlive the test; zombies do not
count, because pid 1 in a container may not reap orphans).

Task functions defined in test modules are pickled by value, so workers never import the test modules.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import cloudpickle
import psutil
import pytest
import zmq

from scaler import SchedulerClusterCombo
from scaler.io.address import free_tcp_port_block
from scaler.monitor.feed import FeedReader
from scaler.protocol import codec
from scaler.protocol import messages as m
from scaler.protocol.feed import STATUS_TOPIC
from scaler.protocol.handshake import local_python_version
from scaler.security.curve import CurveSecurity, curve_security
from scaler.security.key_folder import user_keys
from scaler_rehearsal.entry_points.fake_cloud import FOLDERS_SECONDS, STOP_SECONDS

#: Generous bound on every wait for something that should happen "promptly".
DEADLINE_SECONDS = 30.0
#: How long a process just started may take to be there: a scheduler to answer its first hello (while it lives), a
#: worker pool's workers to register. A scheduler's start is an interpreter, its imports (about 0.3 s of CPU on a
#: quiet machine), up to 10 s waiting for its object storage server (started just before it, from cold too), then
#: binding: on a 2-core machine shared with other suites that took over 30 s once ("no HelloReply within 30 s",
#: the scheduler running and not yet logging anything).
COLD_START_SECONDS = 90.0
#: How long `scaler_fake_cloud` may take to print its endpoint: moto is a large package, and its first import at
#: the start of a clean-clone run, with the other test process starting too, has taken more than 30 s in CI.
CLOUD_START_SECONDS = 90.0
#: How long a stopped `scaler_fake_cloud` may take to exit: its processes, then its units' folders (each wait bounded by
#: the command; removing a docker unit's installer cache takes tens of seconds on a loaded disk).
CLOUD_STOP_SECONDS = STOP_SECONDS + FOLDERS_SECONDS + 10.0
#: How long processes get to disappear once the test is over.
LEFTOVER_GRACE_SECONDS = 15.0
#: Where the console commands of this environment live.
BIN_DIR = Path(sys.executable).parent

T = TypeVar("T")


# ---------------------------------------------------------------- waiting


def wait_for(
    predicate: Callable[[], T], what: str, timeout_seconds: float = DEADLINE_SECONDS, interval: float = 0.05
) -> T:
    """Poll until `predicate()` is truthy and return its value; fail naming `what` after the deadline."""
    deadline = time.monotonic() + timeout_seconds
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_seconds:g} s waiting for {what}")
        time.sleep(interval)


# ---------------------------------------------------------------- process trees


def is_alive(process: psutil.Process) -> bool:
    """Running and not a zombie (a dead process nobody reaped is gone for our purposes)."""
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def pid_is_alive(pid: int) -> bool:
    try:
        return is_alive(psutil.Process(pid))
    except psutil.NoSuchProcess:
        return False


def process_tree(pid: int) -> list[psutil.Process]:
    """The process and all its living descendants (empty if it is gone)."""
    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def kill_tree(pid: int) -> list[psutil.Process]:
    """SIGKILL a process and every descendant at once; returns what was killed (to check they are gone)."""
    tree = process_tree(pid)
    for process in tree:
        with contextlib.suppress(psutil.NoSuchProcess):
            process.send_signal(signal.SIGKILL)
    return tree


def describe_tree(pid: int) -> str:
    """'pid name status, ...' for a process and its descendants (for failure messages)."""
    parts = []
    for process in process_tree(pid):
        with contextlib.suppress(psutil.Error):
            parts.append(f"{process.pid} {process.name()} {process.status()}")
    return ", ".join(parts) or f"{pid} gone"


def wait_all_gone(processes: list[psutil.Process], what: str, timeout_seconds: float = DEADLINE_SECONDS) -> None:
    wait_for(lambda: not any(is_alive(p) for p in processes), what, timeout_seconds)


def zygote_of(agent_pid: int) -> psutil.Process | None:
    """A worker agent forks one zygote, which forks the processors."""
    try:
        children = [c for c in psutil.Process(agent_pid).children() if is_alive(c)]
    except psutil.NoSuchProcess:
        return None
    return children[0] if children else None


def processor_pids(agent_pid: int) -> list[int]:
    """Pids of the processors of a worker agent: the children of its zygote child."""
    zygote = zygote_of(agent_pid)
    if zygote is None:
        return []
    try:
        return [c.pid for c in zygote.children() if is_alive(c)]
    except psutil.NoSuchProcess:
        return []


def agent_of_processor(processor_pid: int) -> int:
    """The worker agent that owns a processor: its grandparent."""
    zygote = psutil.Process(processor_pid).parent()
    assert zygote is not None
    agent = zygote.parent()
    assert agent is not None
    return agent.pid


def worker_agent_pids(cluster: SchedulerClusterCombo) -> list[int]:
    """Pids of the worker agents of a local cluster (dead ones included)."""
    return list(cluster.worker_pids)


def scheduler_pid(cluster: SchedulerClusterCombo) -> int:
    return cluster.scheduler_pid


def storage_pid(cluster: SchedulerClusterCombo) -> int:
    return cluster.object_storage_pid


class ProcessWatch:
    """Every process a test starts, with the descendants seen so far. At the end of the test the roots are
    stopped (SIGTERM, then SIGKILL) and every process ever seen must be gone."""

    def __init__(self) -> None:
        self._popens: list[subprocess.Popen[Any]] = []
        self._seen: dict[int, psutil.Process] = {}

    def add(self, popen: subprocess.Popen[Any]) -> subprocess.Popen[Any]:
        self._popens.append(popen)
        self.remember()
        return popen

    def remember(self) -> None:
        """Record the current descendants of every root (call it when a tree is fully grown)."""
        for popen in self._popens:
            for process in process_tree(popen.pid):
                self._seen.setdefault(process.pid, process)

    def stop_all(self) -> None:
        """SIGTERM the roots one by one, the last started first (workers leave while their scheduler still
        answers; the scheduler goes before its object storage); SIGKILL a tree that ignores it for 5 s."""
        self.remember()
        for popen in reversed(self._popens):
            if popen.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    popen.send_signal(signal.SIGTERM)
            try:
                popen.wait(timeout=5.0)
            except subprocess.TimeoutExpired:
                kill_tree(popen.pid)
                popen.wait()
        for popen in self._popens:
            for stream in (popen.stdout, popen.stderr, popen.stdin):
                if stream is not None:
                    stream.close()

    def leftovers(self) -> list[str]:
        deadline = time.monotonic() + LEFTOVER_GRACE_SECONDS
        while True:
            alive = [p for p in self._seen.values() if is_alive(p)]
            if not alive or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        described = []
        for process in alive:
            with contextlib.suppress(psutil.Error):
                described.append(f"pid {process.pid} ({' '.join(process.cmdline())[:120]})")
            with contextlib.suppress(psutil.Error):
                process.kill()
        return described


@pytest.fixture
def processes() -> Iterator[ProcessWatch]:
    """The test's process watch; fails the test if any process it started outlives it."""
    watch = ProcessWatch()
    try:
        yield watch
    finally:
        watch.stop_all()
    leftovers = watch.leftovers()
    assert not leftovers, f"processes left behind by the test: {leftovers}"


# ---------------------------------------------------------------- pickling task functions


@pytest.fixture(autouse=True)
def _pickle_test_functions_by_value(request: pytest.FixtureRequest) -> None:
    """Workers cannot (and need not) import test modules: ship the tasks' code with them (every module of the
    `tests` package, so that a test may submit a function of another test module; a cloud unit has no `tests`)."""
    module = getattr(request, "module", None)
    if module is None:
        return
    package = sys.modules.get(module.__name__.split(".", 1)[0], module)
    if package.__name__ not in cloudpickle.list_registry_pickle_by_value():
        cloudpickle.register_pickle_by_value(package)


# ---------------------------------------------------------------- local clusters (SchedulerClusterCombo)


@pytest.fixture
def make_cluster(processes: ProcessWatch) -> Iterator[Callable[..., SchedulerClusterCombo]]:
    """`make_cluster(n_workers=2, **settings)`: a local cluster logging at WARNING, shut down after the test."""
    clusters: list[SchedulerClusterCombo] = []

    def make(n_workers: int = 2, **settings: Any) -> SchedulerClusterCombo:
        settings.setdefault("logging_level", "WARNING")
        cluster = SchedulerClusterCombo(n_workers=n_workers, **settings)
        clusters.append(cluster)
        for popen in cluster.processes():
            processes.add(popen)
        return cluster

    try:
        yield make
    finally:
        processes.remember()
        for cluster in clusters:
            cluster.shutdown()


@pytest.fixture
def cluster(make_cluster: Callable[..., SchedulerClusterCombo]) -> SchedulerClusterCombo:
    """A local cluster of two workers with default settings."""
    return make_cluster(2)


@contextlib.contextmanager
def running_cluster(n_workers: int = 2, **settings: Any) -> Iterator[SchedulerClusterCombo]:
    """A local cluster (logging at WARNING) for a block of code, typically a module-scoped fixture; after
    shutdown none of its processes may be left (a pool a task started, such as joblib's loky, ends with its
    processor: docs/behaviour.md)."""
    settings.setdefault("logging_level", "WARNING")
    watch = ProcessWatch()
    cluster = SchedulerClusterCombo(n_workers=n_workers, **settings)
    for popen in cluster.processes():
        watch.add(popen)
    try:
        if n_workers:
            try:
                wait_for_workers(cluster.monitor_address, n_workers)
            except AssertionError as error:
                trees = "; ".join(describe_tree(popen.pid) for popen in cluster.processes())
                raise AssertionError(f"{error}; the cluster's processes: {trees}") from None
        watch.remember()
        yield cluster
    finally:
        watch.remember()
        cluster.shutdown()
        watch.stop_all()
        leftovers = watch.leftovers()
        assert not leftovers, f"processes left behind by the cluster: {leftovers}"


@pytest.fixture(scope="module")
def shared_cluster() -> Iterator[SchedulerClusterCombo]:
    """One local cluster of two workers for the tests of a module that leave it healthy."""
    with running_cluster(2) as cluster:
        yield cluster


@pytest.fixture
def ray_connected(shared_cluster: SchedulerClusterCombo) -> Iterator[None]:
    """scaler.compat.ray connected to the module's shared cluster for one test (a module wanting a cluster of other
    settings defines its own module-scoped `shared_cluster`)."""
    import scaler.compat.ray as ray

    ray.scaler_init(address=shared_cluster.get_address())
    yield
    ray.shutdown()


# ---------------------------------------------------------------- standalone components (console commands)


@dataclass
class Service:
    """A component started by its console command, its output going to a log file."""

    name: str
    popen: subprocess.Popen[bytes]
    log_path: Path

    @property
    def pid(self) -> int:
        return self.popen.pid

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def wait_for_log(self, text: str, timeout_seconds: float = DEADLINE_SECONDS) -> str:
        what = f"{text!r} in the log of {self.name}"
        try:  # a command that exited without the line fails at once
            wait_for(lambda: text in self.log_text() or not self.is_running(), what, timeout_seconds)
        except AssertionError as error:
            if self.is_running():
                self._abort_for_stacks()
            raise AssertionError(f"{error}; its log:\n{self.log_text()[-6000:]}") from None
        log = self.log_text()
        if text not in log:
            raise AssertionError(f"{self.name} exited ({self.popen.returncode}) before {what}; its log:\n{log[-6000:]}")
        return log

    def _abort_for_stacks(self) -> None:
        """SIGABRT makes a command that enabled faulthandler print every thread's stack before it dies."""
        self.popen.send_signal(signal.SIGABRT)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.popen.wait(timeout=5)

    def is_running(self) -> bool:
        return self.popen.poll() is None

    def wait_exit(self, timeout_seconds: float = DEADLINE_SECONDS) -> int:
        try:
            return self.popen.wait(timeout=timeout_seconds)
        except subprocess.TimeoutExpired:
            self._abort_for_stacks()
            raise AssertionError(
                f"{self.name} did not exit within {timeout_seconds:g} s; its log:\n{self.log_text()[-6000:]}"
            ) from None


@dataclass
class Addresses:
    scheduler: str
    object_storage: str
    monitor: str


def free_addresses() -> Addresses:
    base = free_tcp_port_block(3)
    return Addresses(f"tcp://127.0.0.1:{base}", f"tcp://127.0.0.1:{base + 1}", f"tcp://127.0.0.1:{base + 2}")


class Launcher:
    """Starts console commands (scaler_scheduler, scaler_cluster, ...) with their logs in the test's tmp dir (a
    fake cloud's units' logs too, unless the test names a --log-dir: by default the cloud makes a folder in /tmp
    that outlives it, for its user to read)."""

    def __init__(self, watch: ProcessWatch, log_dir: Path) -> None:
        self._watch = watch
        self._log_dir = log_dir
        self._count = 0

    def start(self, command: str, *args: str, env: dict[str, str] | None = None) -> Service:
        self._count += 1
        log_path = self._log_dir / f"{self._count:02d}-{command}.log"
        if command == "scaler_fake_cloud" and "--log-dir" not in args:
            args = (*args, "--log-dir", str(self._log_dir / f"{self._count:02d}-units"))
        full_env = {**os.environ, **(env or {})}
        with open(log_path, "wb") as log:
            popen = subprocess.Popen(
                [str(BIN_DIR / command), *args],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=full_env,
            )
        self._watch.add(popen)
        return Service(command, popen, log_path)

    def object_storage(self, address: str, *args: str) -> Service:
        return self.start("scaler_object_storage_server", address, "-ll", "INFO", *args)

    def scheduler(self, addresses: Addresses, *args: str, wait: bool = True) -> Service:
        service = self.start(
            "scaler_scheduler", addresses.scheduler, "-osa", addresses.object_storage, "-ll", "INFO", *args
        )
        if wait:
            try:
                role = None if "--insecure" in args else "client"  # an insecure scheduler refuses keys
                probe_scheduler(addresses.scheduler, COLD_START_SECONDS, service.popen, role)
            except AssertionError as error:
                state = "running" if service.is_running() else f"exited ({service.popen.returncode})"
                raise AssertionError(
                    f"{error}; the scheduler is {state}; its log:\n{service.log_text()[-6000:]}"
                ) from None
        return service

    def cluster(self, scheduler_address: str, workers: int, *args: str, env: dict[str, str] | None = None) -> Service:
        return self.start("scaler_cluster", "-n", str(workers), scheduler_address, "-ll", "INFO", *args, env=env)

    def worker(self, scheduler_address: str, *args: str, env: dict[str, str] | None = None) -> Service:
        return self.start("scaler_worker", scheduler_address, "-ll", "INFO", *args, env=env)

    def stack(
        self, workers: int = 1, scheduler_args: tuple[str, ...] = (), worker_args: tuple[str, ...] = ()
    ) -> tuple[Addresses, Service, Service]:
        """Object storage + scheduler (+ a worker pool when workers > 0); returns (addresses, scheduler, storage)."""
        addresses = free_addresses()
        storage = self.object_storage(addresses.object_storage)
        scheduler = self.scheduler(addresses, *scheduler_args)
        if workers:
            self.cluster(addresses.scheduler, workers, "-his", "0.5", *worker_args)
            wait_for_workers(addresses.monitor, workers, COLD_START_SECONDS)
        self._watch.remember()
        return addresses, scheduler, storage


@pytest.fixture
def launcher(processes: ProcessWatch, tmp_path: Path) -> Launcher:
    return Launcher(processes, tmp_path)


@contextlib.contextmanager
def running_stack(log_dir: Path, workers: int = 1, scheduler_args: tuple[str, ...] = ()) -> Iterator[Addresses]:
    """`Launcher.stack` for a block of code, typically a module-scoped fixture for the tests that leave the stack as
    they found it; after it none of its processes may be left."""
    watch = ProcessWatch()
    try:
        addresses, _scheduler, _storage = Launcher(watch, log_dir).stack(workers=workers, scheduler_args=scheduler_args)
        yield addresses
    finally:
        watch.stop_all()
    leftovers = watch.leftovers()
    assert not leftovers, f"processes left behind by the stack: {leftovers}"


# ---------------------------------------------------------------- raw sockets: probes, hellos, the monitor


def session_security(role: str) -> CurveSecurity:
    """The test session's user keys (servers started without key settings use them) for a connecting side of
    `role`: "client", "worker", or "server" (the servers' own pair, with which the scheduler reaches its storage
    and sees every owner's objects)."""
    keys = user_keys()
    if role == "server":
        security = curve_security(keys.path("server.key_secret"), keys.path("server.key"))
        assert security is not None
        return security
    return keys.connecting_security(role)


@contextlib.contextmanager
def dealer(address: str, identity: bytes | None = None, role: str | None = "client") -> Iterator[zmq.Socket[Any]]:
    """A bare DEALER to a server. Servers are secure by default, so it carries the user's keys of the test
    session for `role` ("client" or "worker"); `role=None`: no keys (a keyless peer, or an `--insecure` server)."""
    context: zmq.Context[Any] = zmq.Context()
    sock = context.socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    if identity is not None:
        sock.setsockopt(zmq.IDENTITY, identity)
    if role is not None:
        session_security(role).secure_client(sock)
    sock.connect(address)
    try:
        yield sock
    finally:
        sock.close(linger=0)
        context.term()


def client_hello(protocol_version: int = m.PROTOCOL_VERSION, python_version: str | None = None) -> m.Hello:
    return m.Hello(
        protocol_version,
        python_version if python_version is not None else local_python_version(),
        os.getpid(),
        socket.gethostname(),
        m.ClientInfo("integration-test"),
    )


def hello_exchange(
    address: str,
    hello: m.Hello,
    timeout_seconds: float = DEADLINE_SECONDS,
    process: subprocess.Popen[bytes] | None = None,
    role: str | None = "client",
) -> m.HelloReply:
    """Send a hello from a fresh DEALER (with the session's keys of `role`, None: none) and return the scheduler's
    HelloReply; with `process` (the scheduler's), stop waiting as soon as it has exited."""
    with dealer(address, identity=f"Client|probe-{time.monotonic_ns()}".encode(), role=role) as sock:
        sock.send(codec.encode(hello))
        deadline = time.monotonic() + timeout_seconds
        while time.monotonic() < deadline:
            if process is not None and process.poll() is not None:
                raise AssertionError(f"no HelloReply from {address}: its scheduler exited")
            if sock.poll(100):
                for part in (part for frame in sock.recv_multipart() for part in codec.split(frame)):
                    reply = codec.decode(part)
                    if isinstance(reply, m.HelloReply):
                        if reply.accepted:
                            sock.send(codec.encode(m.ClientDisconnect()))
                        return reply
    raise AssertionError(f"no HelloReply from {address} within {timeout_seconds:g} s")


def probe_scheduler(
    address: str,
    timeout_seconds: float = DEADLINE_SECONDS,
    process: subprocess.Popen[bytes] | None = None,
    role: str | None = "client",
) -> m.HelloReply:
    """Wait until a scheduler answers hellos at `address` (with `process`: while that process lives); `role`: see
    `dealer` (None for an `--insecure` scheduler)."""
    reply = hello_exchange(address, client_hello(), timeout_seconds, process, role)
    assert reply.accepted, reply.reason
    return reply


@contextlib.contextmanager
def monitor(address: str) -> Iterator[Callable[..., m.StatusSnapshot]]:
    """Subscribe to a scheduler's status snapshots; yields `next_snapshot(predicate=None, timeout_seconds=30)`.
    A stack that made its own keys (hub = "cloud") is read with them, as scaler_top does."""

    reader = FeedReader(address, topics=(STATUS_TOPIC,))

    def next_snapshot(
        predicate: Callable[[m.StatusSnapshot], bool] | None = None, timeout_seconds: float = DEADLINE_SECONDS
    ) -> m.StatusSnapshot:
        deadline = time.monotonic() + timeout_seconds
        last: m.StatusSnapshot | None = None
        while time.monotonic() < deadline:
            message = reader.receive(0.1)
            if isinstance(message, m.StatusSnapshot):
                last = message
                if predicate is None or predicate(message):
                    return message
        raise AssertionError(f"no matching status snapshot from {address} within {timeout_seconds:g} s; last: {last}")

    try:
        yield next_snapshot
    finally:
        reader.close()


def wait_for_workers(monitor_address: str, count: int, timeout_seconds: float = DEADLINE_SECONDS) -> m.StatusSnapshot:
    """Wait until the scheduler publishes a snapshot with at least `count` connected workers."""
    with monitor(monitor_address) as next_snapshot:
        return next_snapshot(lambda snapshot: len(snapshot.workers) >= count, timeout_seconds)


# ---------------------------------------------------------------- client scripts in their own process


def run_script(code: str, *args: str, timeout_seconds: float = DEADLINE_SECONDS) -> subprocess.CompletedProcess[str]:
    """Run Python code in a fresh interpreter of this environment; fails if it outlives the deadline."""
    try:
        return subprocess.run(
            [sys.executable, "-c", code, *args],
            capture_output=True,
            text=True,
            timeout=timeout_seconds,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired as error:
        raise AssertionError(
            f"the script did not exit within {timeout_seconds:g} s; output: {error.output!r}"
        ) from None


# ---------------------------------------------------------------- the fake cloud


@pytest.fixture(scope="session")
def fake_cloud_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from tests.integration.cloud_harness import started_fake_cloud

    yield from started_fake_cloud(tmp_path_factory.mktemp("fake-cloud-logs"))


@pytest.fixture
def fake_cloud(fake_cloud_session: Any) -> Iterator[Any]:
    """The session's fake cloud, empty, with no boot delay and AWS's spot notice, its EC2 instances booting from an
    AMI that has uv (one baked for scaler: no `pip install uv` at each boot; the docs tier boots stock Amazon Linux
    2023); emptied again (its processes stopped) afterwards."""
    from scaler_rehearsal.fake_cloud.runners import SPOT_NOTICE_SECONDS

    fake_cloud_session.set_boot_seconds(0.0)
    fake_cloud_session.set_ami_has_uv(True)
    fake_cloud_session.set_spot_notice_seconds(SPOT_NOTICE_SECONDS)
    fake_cloud_session.reset()
    yield fake_cloud_session
    fake_cloud_session.reset()
