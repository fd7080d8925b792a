"""WS: elastic scaling from zero workers, through the command-line surface shared by `ours` and `opengris`.

Fresh clusters, each `scaler_object_storage_server` + `scaler_scheduler --policy-content ...` +
`scaler_worker_manager baremetal_native --mode dynamic --max-task-concurrency 8`:
  1. start-up probes: one task on zero workers; submit-to-result = one worker start-up (demand seen, worker
     spawned, connected, task run). The scheduler reacts to demand on manager heartbeats, so a single probe
     varies by up to a heartbeat interval: the median of a few probes is used;
  2. the burst: `tasks` sleep tasks on zero workers; time to first result, total time, peak worker count,
     then how long until the manager's worker processes are gone (capped).
"""

import concurrent.futures
import dataclasses
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import bench_tasks
import procs
import psutil
from adapters import free_port


@dataclasses.dataclass(frozen=True)
class Burst:
    tasks: int
    task_seconds: float
    concurrency: int  # --max-task-concurrency of the manager
    scale_down_cap_seconds: float
    start_up_probes: int  # the start-up is the median of this many probes, each on a fresh cluster


FULL = Burst(tasks=100, task_seconds=0.1, concurrency=8, scale_down_cap_seconds=120.0, start_up_probes=3)
QUICK = Burst(tasks=40, task_seconds=0.1, concurrency=8, scale_down_cap_seconds=60.0, start_up_probes=1)
SETTLE_SECONDS = 2.0  # after starting the manager, so that it has registered before the first submit


#: Our native manager's worker forker (a process name): not a worker; it forks the worker agents, which are
#: therefore its children, not the manager's. Its forked workers share its command line.
FORK_SERVER_NAME = "scaler-forker"


def worker_processes(manager: psutil.Process) -> list[psutil.Process]:
    """The manager's live descendants that belong to workers (agents, and their processors), so neither
    multiprocessing's resource tracker (opengris) nor our worker forker. A zombie (exited, not yet reaped)
    counts as gone."""
    try:
        children = manager.children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    return [
        p
        for p in children
        if _alive(p) and "resource_tracker" not in procs.describe(p) and _name(p) != FORK_SERVER_NAME
    ]


def _alive(process: psutil.Process) -> bool:
    try:
        return bool(process.status() != psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return False


def worker_count(manager: psutil.Process) -> int:
    """Worker agents: children of the manager or of its worker forker (a worker's processors are its own
    children)."""
    try:
        parents = {manager.pid} | {p.pid for p in manager.children() if _name(p) == FORK_SERVER_NAME}
    except psutil.NoSuchProcess:
        return 0
    return sum(1 for p in worker_processes(manager) if _ppid(p) in parents)


def _name(process: psutil.Process) -> str:
    try:
        return str(process.name())
    except psutil.NoSuchProcess:
        return ""


def _ppid(process: psutil.Process) -> int:
    try:
        return int(process.ppid())
    except psutil.NoSuchProcess:
        return -1


@dataclasses.dataclass
class CommandLineCluster:
    bin_dir: Path
    log_dir: Path
    policy_content: str
    concurrency: int
    processes: list[subprocess.Popen[bytes]] = dataclasses.field(default_factory=list)
    address: str = ""

    def start(self, name: str) -> psutil.Process:
        """Starts storage, scheduler and manager; returns the manager's process."""
        storage = f"tcp://127.0.0.1:{free_port()}"
        self.address = f"tcp://127.0.0.1:{free_port()}"
        oss = self._launch(name, "object_storage_server", ["scaler_object_storage_server", storage])
        self._wait_listening(oss, storage, name, "object_storage_server")
        scheduler = ["scaler_scheduler", self.address, "--object-storage-address", storage]
        scheduler_process = self._launch(name, "scheduler", [*scheduler, "--policy-content", self.policy_content])
        self._wait_listening(scheduler_process, self.address, name, "scheduler")
        manager = ["scaler_worker_manager", "baremetal_native", self.address, "--mode", "dynamic"]
        manager += ["--worker-manager-id", f"bench-{name}", "--max-task-concurrency", str(self.concurrency)]
        process = self._launch(name, "worker_manager", manager)
        time.sleep(SETTLE_SECONDS)
        if process.poll() is not None:
            raise RuntimeError(self._exited(process, name, "worker_manager"))
        return psutil.Process(process.pid)

    def _wait_listening(self, process: subprocess.Popen[bytes], address: str, name: str, role: str) -> None:
        deadline = time.monotonic() + 30
        while procs.port_of(address) not in procs.listening_ports(psutil.Process(process.pid)):
            if process.poll() is not None:
                raise RuntimeError(self._exited(process, name, role))
            if time.monotonic() > deadline:
                raise RuntimeError(f"{role} does not listen on {address} after 30 s; see {self.log_dir}")
            time.sleep(0.05)

    def _exited(self, process: subprocess.Popen[bytes], name: str, role: str) -> str:
        output = (self.log_dir / f"ws-{name}-{role}.out").read_text(errors="replace").splitlines()[-10:]
        return f"{role} exited with code {process.returncode}:\n" + "\n".join(output)

    def _launch(self, name: str, role: str, command: list[str]) -> subprocess.Popen[bytes]:
        log = self.log_dir / f"ws-{name}-{role}.log"
        logging_flags = ["--logging-paths", str(log), "--logging-level", "WARNING"]
        executable = str(self.bin_dir / command[0])
        with open(self.log_dir / f"ws-{name}-{role}.out", "wb") as out:
            process = subprocess.Popen([executable, *command[1:], *logging_flags], stdout=out, stderr=out)
        self.processes.append(process)
        return process

    def stop(self) -> None:
        for process in reversed(self.processes):
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self.processes.clear()


class PeakWorkers:
    def __init__(self, manager: psutil.Process) -> None:
        self.peak = 0
        self._manager = manager
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> "PeakWorkers":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            self.peak = max(self.peak, worker_count(self._manager))


def one_worker_start_up(cluster: CommandLineCluster, name: str) -> float:
    from scaler import Client

    cluster.start(name)
    client = Client(address=cluster.address)
    try:
        start = time.perf_counter()
        result = client.submit(bench_tasks.inc, 1).result()
        elapsed = time.perf_counter() - start
        assert result == 2, f"WS probe: wrong result {result}"
        return elapsed
    finally:
        client.disconnect()
        cluster.stop()


def burst(cluster: CommandLineCluster, size: Burst) -> dict[str, Any]:
    from scaler import Client

    manager = cluster.start("burst")
    client = Client(address=cluster.address)
    try:
        with PeakWorkers(manager) as peak:
            start = time.perf_counter()
            futures = [client.submit(bench_tasks.sleep_for, size.task_seconds) for _ in range(size.tasks)]
            concurrent.futures.wait(futures, return_when=concurrent.futures.FIRST_COMPLETED)
            first = time.perf_counter() - start
            results = [future.result() for future in futures]
            total = time.perf_counter() - start
        assert results == [size.task_seconds] * size.tasks, "WS: wrong results"
    finally:
        client.disconnect()
    idle_since = time.perf_counter()
    while worker_processes(manager) and time.perf_counter() - idle_since < size.scale_down_cap_seconds:
        time.sleep(0.1)
    scale_down = time.perf_counter() - idle_since
    remaining = len(worker_processes(manager))
    cluster.stop()
    return {"first_s": first, "total_s": total, "scale_down_s": scale_down, "left": remaining, "peak": peak.peak}


def run(log_dir: Path, quick: bool, policy_content: str) -> tuple[dict[str, float], dict[str, Any]]:
    size = QUICK if quick else FULL
    bin_dir = Path(sys.executable).parent
    clusters = [CommandLineCluster(bin_dir, log_dir, policy_content, size.concurrency) for _ in range(2)]
    try:
        probes = [one_worker_start_up(clusters[0], f"probe{i}") for i in range(size.start_up_probes)]
        start_up = statistics.median(probes)
        outcome = burst(clusters[1], size)
    finally:
        for cluster in clusters:
            cluster.stop()
    ideal = size.tasks * size.task_seconds / size.concurrency
    metrics = {
        "first_result_s": outcome["first_s"],
        "total_s": outcome["total_s"],
        "worker_start_up_s": start_up,
        "total_over_ideal_plus_start_up": outcome["total_s"] / (ideal + start_up),
        "scale_down_s": outcome["scale_down_s"],
    }
    info = {
        **dataclasses.asdict(size),
        "ideal_s": ideal,
        "start_up_probes_s": probes,
        "policy_content": policy_content,
        "peak_workers": outcome["peak"],
        "workers_left_at_cap": outcome["left"],
        "scale_down_capped": outcome["left"] > 0,
    }
    return metrics, info
