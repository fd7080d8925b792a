"""`scaler FILE`: start order, work through the stack, shutdown by SIGTERM/SIGINT, a crashing child,
and no process left behind (workers that managers started included). Also: every example file in
config/ loads and validates."""

from __future__ import annotations

import contextlib
import math
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from scaler import Client
from scaler.config.loader import load_launcher_file
from scaler.policy.registry import make_policy
from tests.integration.conftest import (
    BIN_DIR,
    Launcher,
    free_addresses,
    is_alive,
    probe_scheduler,
    wait_for,
    wait_for_workers,
)

pytestmark = pytest.mark.integration

CONFIG_DIR = Path(__file__).resolve().parents[2] / "config"
#: How long a whole stack may take to come up from cold: storage, scheduler, manager and each worker are an
#: interpreter importing the runtime, which on a two-core machine that runs the suite in two processes took more
#: than the 30 s of DEADLINE_SECONDS (a status snapshot without every worker).
STACK_START_SECONDS = 90.0


@pytest.mark.parametrize("path", sorted(CONFIG_DIR.glob("*.toml")), ids=lambda path: path.name)
def test_every_example_config_loads_and_its_policy_is_valid(path: Path) -> None:
    file = load_launcher_file(str(path))
    assert file.scheduler is not None and file.worker_managers
    make_policy(file.scheduler.policy_engine_type, file.scheduler.policy_content)
    ids = [manager.worker_manager_id for manager in file.worker_managers]
    assert len(ids) == len(set(ids))


def stack_file(tmp_path: Path, template: str = "fixed_pool.toml", workers: int = 4) -> tuple[Path, str, str]:
    """The example file with free ports instead of 8516-8518 (and `workers` in the fixed pool); returns (path,
    scheduler, monitor)."""
    addresses = free_addresses()
    text = (CONFIG_DIR / template).read_text()
    text = text.replace("tcp://127.0.0.1:8516", addresses.scheduler)
    text = text.replace("tcp://127.0.0.1:8517", addresses.object_storage)
    text = text.replace("max_task_concurrency = 4", f"max_task_concurrency = {workers}")
    path = tmp_path / template
    path.write_text(text)
    return path, addresses.scheduler, addresses.monitor


class Stack:
    def __init__(self, path: Path, log: Path) -> None:
        self.log_path = log
        with open(log, "wb") as output:
            self.popen = subprocess.Popen(
                [str(BIN_DIR / "scaler"), str(path)], stdout=output, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )
        self.seen: dict[int, psutil.Process] = {}

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def remember(self) -> None:
        try:
            for process in psutil.Process(self.popen.pid).children(recursive=True):
                self.seen.setdefault(process.pid, process)
        except psutil.NoSuchProcess:
            pass

    def leftovers(self) -> list[int]:
        wait_for(lambda: not any(is_alive(p) for p in self.seen.values()), "every process of the stack to exit", 20)
        return [p.pid for p in self.seen.values() if is_alive(p)]

    def stop(self) -> None:
        """Stop the stack as a user does (SIGTERM), so that its servers remove what they made (object segments,
        computing marks); everything it started is killed if it has not stopped within a minute."""
        self.remember()
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
        try:
            self.popen.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.kill_everything()
            self.popen.wait(timeout=30)

    def kill_everything(self) -> None:
        self.remember()
        for process in [*self.seen.values(), psutil.Process(self.popen.pid)]:
            try:
                process.kill()
            except psutil.Error:
                pass


@contextlib.contextmanager
def started_stack(tmp_path: Path, workers: int = 4) -> Iterator[tuple[Stack, str, str]]:
    """`scaler FILE` with the fixed pool example, once its scheduler answers and its workers registered."""
    path, scheduler, monitor = stack_file(tmp_path, workers=workers)
    running = Stack(path, tmp_path / "scaler.log")
    try:
        probe_scheduler(scheduler, STACK_START_SECONDS)
        wait_for_workers(monitor, workers, STACK_START_SECONDS)
        yield running, scheduler, monitor
    finally:
        running.stop()


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[tuple[Stack, str, str]]:
    with started_stack(tmp_path) as started:
        yield started


def run_work(scheduler: str) -> float:
    with Client(address=scheduler, timeout_seconds=30) as client:
        return float(sum(client.map(math.sqrt, range(100))))


@pytest.mark.timeout(180)
def test_the_stack_starts_in_order_runs_work_and_stops_without_orphans(stack: tuple[Stack, str, str]) -> None:
    """Stopped by SIGTERM; SIGINT, which the launcher handles the same way (one handler for both), is the Ctrl-C of
    test_launcher_ctrl_c.py, on a running stack quiet and loaded: without the handler, KeyboardInterrupt's traceback
    and a non-zero exit fail it."""
    running, scheduler, _monitor = stack
    assert run_work(scheduler) == pytest.approx(661.46, abs=0.01)
    log = running.log()
    order = [log.index("object storage server at"), log.index("scaler: scheduler at"), log.index("worker manager")]
    assert order == sorted(order), log
    assert "monitor at" in log
    running.remember()
    assert len(running.seen) >= 3 + 4 * 3, "storage, scheduler, manager, and 4 workers with zygote and processor"
    running.popen.send_signal(signal.SIGTERM)
    assert running.popen.wait(timeout=60) == 0
    assert running.leftovers() == []


@pytest.mark.timeout(180)
def test_a_child_that_dies_stops_the_rest_and_the_launcher_exits_non_zero(tmp_path: Path) -> None:
    """One worker is enough for "the rest" (the manager stops it); four made the cold start the slowest part."""
    with started_stack(tmp_path, workers=1) as (running, _scheduler, _monitor):
        running.remember()
        # (a scheduler that dies is started again: tests/integration/test_scheduler_restart.py)
        storage = next(p for p in running.seen.values() if "scaler.object_storage.server" in " ".join(p.cmdline()))
        storage.kill()
        assert running.popen.wait(timeout=60) == 1
        assert "object storage server exited unexpectedly (killed by SIGKILL)" in running.log()
        assert running.leftovers() == []


@pytest.mark.timeout(90)
def test_an_object_storage_server_that_fails_to_start_is_named_in_one_line_and_exit_1(tmp_path: Path) -> None:
    """The storage starts side by side with the scheduler and is waited for first, alone: its own failure (a spill
    directory that is a file) is the one start-up failure said, naming it and its pid, as when it started alone,
    and the scheduler started with it does not outlive the launcher. Checked to fail with the scheduler waited for
    first: "a cluster process (pid N) exited during start-up"."""
    path, _scheduler, _monitor = stack_file(tmp_path, workers=1)
    not_a_directory = tmp_path / "spill"
    not_a_directory.write_text("")
    text = path.read_text()
    assert "[object_storage_server]\n" in text
    path.write_text(text.replace("[object_storage_server]\n",
                                 f'[object_storage_server]\nspill_directory = "{not_a_directory}"\n'))  # fmt: skip
    running = Stack(path, tmp_path / "scaler.log")
    storage = _pids_while_running(running, "scaler.object_storage.server")
    assert running.popen.wait(timeout=10) == 1, running.log()
    log = running.log()
    failed = re.findall(r"start-up failed: the object storage server \(pid (\d+)\) exited during start-up: exit code 2",
                        log)  # fmt: skip
    assert len(failed) == 1 and {int(failed[0])} == storage, log
    assert log.count("start-up failed") == 1 and f"spill directory {not_a_directory}" in log, log
    assert "Traceback" not in log and "scaler: object storage server at" not in log, log
    assert running.leftovers() == []


@pytest.mark.timeout(90)
def test_a_scheduler_that_fails_to_start_is_the_one_failure_said_and_exit_1(tmp_path: Path) -> None:
    """The scheduler, started side by side with the storage, refuses to start (its /metrics port taken): after the
    storage's line, one start-up failure naming the scheduler's pid, exit 1, nothing left running."""
    path, _scheduler, _monitor = stack_file(tmp_path, workers=1)
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        metrics = f"127.0.0.1:{holder.getsockname()[1]}"
        path.write_text(path.read_text().replace("[scheduler]\n", f'[scheduler]\nmetrics_address = "{metrics}"\n'))
        running = Stack(path, tmp_path / "scaler.log")
        schedulers = _pids_while_running(running, "scaler.scheduler.process")
    assert running.popen.wait(timeout=10) == 1, running.log()
    log = running.log()
    failed = re.findall(r"start-up failed: a cluster process \(pid (\d+)\) exited during start-up: exit code 2", log)
    assert len(failed) == 1 and {int(failed[0])} == schedulers, log
    assert log.index("scaler: object storage server at") < log.index("start-up failed"), log
    assert f"cannot serve /metrics on {metrics}" in log and "Traceback" not in log, log
    assert running.leftovers() == []


def _pids_while_running(running: Stack, module: str) -> set[int]:
    """The pids of the stack's processes that ran `module` (python -m), read while the launcher runs (up to 60 s):
    an exited process says nothing of itself."""
    pids: set[int] = set()
    deadline = time.monotonic() + 60
    while running.popen.poll() is None and time.monotonic() < deadline:
        running.remember()
        for process in running.seen.values():
            with contextlib.suppress(psutil.Error):
                if process.pid not in pids and module in process.cmdline():
                    pids.add(process.pid)
        time.sleep(0.01)
    return pids


@pytest.mark.timeout(90)
@pytest.mark.parametrize("taken", ["object_storage", "scheduler", "monitor"])
def test_a_port_of_the_file_already_taken_is_named_before_anything_starts(
    tmp_path: Path, taken: str, launcher: Launcher
) -> None:
    """Walking docs/guide/clusters.md with the object storage server of its piece-by-piece commands still
    running, `scaler local.toml` printed "scaler: object storage server at tcp://127.0.0.1:8517 (pid N)" (the
    server left running answered the readiness probe), started the scheduler, then failed with "a cluster process
    (pid N) exited during start-up". Here a real object storage server holds the storage's port, a plain socket the
    scheduler's or its monitor's. Checked by switching it off (no `taken_port_problem`): each case fails (the
    object storage one on the line saying the server started)."""
    path, scheduler, monitor = stack_file(tmp_path, workers=1)
    storage = load_launcher_file(str(path)).object_storage_server
    assert storage is not None
    address = {"object_storage": storage.bind_address, "scheduler": scheduler, "monitor": monitor}[taken]
    host, port = address.removeprefix("tcp://").rsplit(":", 1)
    with contextlib.ExitStack() as holding:
        if taken == "object_storage":
            holder = launcher.object_storage(address)
            wait_for(lambda: "listening on" in holder.log_text(), "the object storage server to listen", 30)
            holder_pid = holder.popen.pid
        else:
            sock = holding.enter_context(socket.socket())
            sock.bind((host, int(port)))
            sock.listen()
            holder_pid = os.getpid()
        done = subprocess.run(
            [str(BIN_DIR / "scaler"), str(path)], capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL
        )
    output = done.stdout + done.stderr
    assert done.returncode == 1, output
    assert f"port {port} is already in use (pid {holder_pid}:" in output, output
    assert "scaler: object storage server at" not in output and "scaler: scheduler at" not in output, output


@pytest.mark.timeout(60)
def test_a_broken_file_is_refused_before_anything_starts(tmp_path: Path) -> None:
    path = tmp_path / "broken.toml"
    path.write_text('[scheduler]\nbind_address = "tcp://127.0.0.1:1"\nworker_timeout_secs = 5\n')
    done = subprocess.run([str(BIN_DIR / "scaler"), str(path)], capture_output=True, text=True, timeout=50)
    assert done.returncode == 2
    assert "worker_timeout_secs" in done.stderr and "[scheduler]" in done.stderr and str(path) in done.stderr


@pytest.mark.timeout(60)
@pytest.mark.parametrize("bad", ["dashboard port out of range", "address without tcp://"])
def test_a_bad_address_in_the_file_is_one_line_and_exit_2_before_anything_starts(tmp_path: Path, bad: str) -> None:
    """issue 60: a dashboard port of 99999 was an OverflowError traceback and exit code 1 once object storage and
    the scheduler had started; a bind_address without tcp:// stopped the start-up with exit code 1. Both checked
    to fail before: exit code 1."""
    path, scheduler, _monitor = stack_file(tmp_path, template="local.toml")
    text = path.read_text().replace("tcp://127.0.0.1:8518", free_addresses().monitor)
    if bad == "dashboard port out of range":
        written, instead = 'gui_address = "127.0.0.1:50001"', 'gui_address = "127.0.0.1:99999"'
        said = "[gui] gui_address '127.0.0.1:99999': port 99999 is outside 0-65535"
    else:
        written = f'bind_address = "{scheduler}"'
        instead = written.replace("tcp://", "")
        said = f"[scheduler] bind_address: malformed address '{scheduler.removeprefix('tcp://')}': accepted forms"
    assert written in text
    path.write_text(text.replace(written, instead))
    done = subprocess.run([str(BIN_DIR / "scaler"), str(path)], capture_output=True, text=True, timeout=50)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.startswith(f"scaler: error: {path}: {said}"), done.stderr
    assert done.stderr.count("\n") == 1 and done.stdout == "", done.stdout + done.stderr


@pytest.mark.timeout(60)
def test_a_file_without_any_section_to_start_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "nothing.toml"
    path.write_text('[top]\nmonitor_address = "tcp://127.0.0.1:1"\n')
    done = subprocess.run([str(BIN_DIR / "scaler"), str(path)], capture_output=True, text=True, timeout=50)
    assert done.returncode != 0 and "none of" in done.stderr


@pytest.mark.timeout(120)
def test_the_seed_unified_config_starts_its_components_one_by_one(tmp_path: Path) -> None:
    """Seed 001's example_config.toml with `scaler_object_storage_server/scaler_scheduler/scaler_cluster
    --config`, the cluster overridden to 2 workers (the file says 8) with --num-of-workers."""
    addresses = free_addresses()
    text = f"""# This is a unified configuration file for all Scaler components.

[scheduler]
scheduler_address = "{addresses.scheduler}"
object_storage_address = "{addresses.object_storage}"
monitor_address = "{addresses.monitor}"
allocate_policy = "even"
logging_level = "INFO"
logging_paths = ["/dev/stdout", "{tmp_path}/scheduler.log"]

[cluster]
scheduler_address = "{addresses.scheduler}"
num_of_workers = 8
per_worker_capabilities = "linux,cpu=8"
task_timeout_seconds = 600

[object_storage_server]
object_storage_address = "{addresses.object_storage}"

[webui]
monitor_address = "{addresses.monitor}"
web_port = 8081
"""
    path = tmp_path / "example_config.toml"
    path.write_text(text)
    commands = [
        ["scaler_object_storage_server", "--config", str(path)],
        ["scaler_scheduler", "--config", str(path)],
        ["scaler_cluster", "--config", str(path), "--num-of-workers", "2"],
    ]
    started = []
    try:
        for command in commands:
            with open(tmp_path / f"{command[0]}.log", "wb") as log:
                started.append(
                    subprocess.Popen([str(BIN_DIR / command[0]), *command[1:]], stdout=log, stderr=subprocess.STDOUT)
                )
        snapshot = wait_for_workers(addresses.monitor, 2)
        assert len(snapshot.workers) == 2
        assert all(dict(w.capabilities) == {"cpu": 8, "linux": -1} for w in snapshot.workers)
        assert run_work(addresses.scheduler) == pytest.approx(661.46, abs=0.01)
        assert (tmp_path / "scheduler.log").read_text(), "the second logging path receives the log too"
    finally:
        for popen in reversed(started):
            popen.send_signal(signal.SIGTERM)
            try:
                popen.wait(timeout=20)
            except subprocess.TimeoutExpired:
                popen.kill()
                popen.wait()


def test_the_launcher_reads_the_environment_too(tmp_path: Path) -> None:
    path, _, _ = stack_file(tmp_path)
    environment = {**os.environ, "SCALER_SCHEDULER_WORKER_TIMEOUT_SECONDS": "7"}
    code = (
        "from scaler.config.loader import load_launcher_file; "
        f"print(load_launcher_file({str(path)!r}).scheduler.worker_timeout_seconds)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=environment, timeout=30)
    assert done.stdout.strip() == "7.0", done.stderr


def test_a_stack_file_says_insecure_in_its_scheduler_section_and_both_servers_warn(tmp_path: Path) -> None:
    """`insecure = true` in [scheduler] makes the file's scheduler and object storage plain TCP, each logging the
    warning; its manager's workers and a local client reach them without keys. Checked to fail with the setting
    not passed on to the object storage server (the secure storage refuses the plain scheduler's probe)."""
    path, scheduler, monitor = stack_file(tmp_path, workers=1)
    path.write_text(path.read_text().replace("[scheduler]\n", "[scheduler]\ninsecure = true\n", 1))
    running = Stack(path, tmp_path / "scaler.log")
    try:
        probe_scheduler(scheduler, STACK_START_SECONDS, role=None)
        wait_for_workers(monitor, 1, STACK_START_SECONDS)
        assert run_work(scheduler) == sum(math.sqrt(x) for x in range(100))
        warnings = [line for line in running.log().splitlines() if "runs without CURVE keys (--insecure)" in line]
        assert any("scheduler" in line for line in warnings) and any("object storage" in line for line in warnings)
    finally:
        running.stop()
