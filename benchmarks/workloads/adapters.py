"""One small adapter per API family, so that every workload is written once.

`ours` and `opengris` share the Scaler API (`scaler.Client`, `scaler.SchedulerClusterCombo`): one adapter serves
both, each imported from its own virtual environment. `dask` has its own adapter. Every adapter starts a local
cluster of `n_workers` single-threaded worker processes and keeps the cluster's logs out of stdout.
"""

import importlib.metadata
import inspect
import logging
import socket
import subprocess
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Protocol

import bench_tasks
import procs
import psutil


class Adapter(Protocol):
    system: str

    def version(self) -> str: ...
    def start(self, n_workers: int, separate_scheduler: bool = False) -> None: ...
    def stop(self) -> None: ...
    def submit(self, fn: Callable[..., Any], *args: Any) -> Any: ...
    def gather(self, futures: list[Any]) -> list[Any]: ...
    def map(self, fn: Callable[..., Any], items: Iterable[Any]) -> list[Any]: ...
    def send_object(self, obj: Any) -> Any: ...
    def get(self, graph: dict[str, Any], key: str) -> Any: ...
    def fibonacci(self, n: int) -> int: ...
    def scheduler_process(self) -> psutil.Process: ...
    def describe_scheduler(self) -> str: ...


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class ScalerAdapter:
    """`ours` and `opengris-scaler` 2.9: `SchedulerClusterCombo` (object storage + scheduler + fixed workers)."""

    DISTRIBUTIONS = {"ours": "scaler-compute", "opengris": "opengris-scaler"}

    def __init__(self, system: str, log_dir: Path) -> None:
        self.system = system
        self._log_dir = log_dir
        self._cluster: Any = None
        self._client: Any = None

    def version(self) -> str:
        return importlib.metadata.version(self.DISTRIBUTIONS[self.system])

    def start(self, n_workers: int, separate_scheduler: bool = False) -> None:
        # The scheduler is a separate process in SchedulerClusterCombo already: `separate_scheduler` is moot.
        from scaler import Client, SchedulerClusterCombo

        self._cluster = SchedulerClusterCombo(n_workers=n_workers, **self._logging_kwargs(SchedulerClusterCombo))
        self._client = Client(address=self._cluster.get_address())

    def _logging_kwargs(self, combo: type) -> dict[str, Any]:
        """Send the cluster's logs to a file, if this build's SchedulerClusterCombo takes the 2.x logging arguments."""
        wanted = {"logging_paths": (str(self._log_dir / "cluster.log"),), "logging_level": "WARNING"}
        parameters = inspect.signature(combo).parameters
        return {name: value for name, value in wanted.items() if name in parameters}

    def stop(self) -> None:
        if self._client is not None:
            self._client.disconnect()
        if self._cluster is not None:
            self._cluster.shutdown()

    def submit(self, fn: Callable[..., Any], *args: Any) -> Any:
        return self._client.submit(fn, *args)

    def gather(self, futures: list[Any]) -> list[Any]:
        return [future.result() for future in futures]

    def map(self, fn: Callable[..., Any], items: Iterable[Any]) -> list[Any]:
        return list(self._client.map(fn, items))

    def send_object(self, obj: Any) -> Any:
        return self._client.send_object(obj)

    def get(self, graph: dict[str, Any], key: str) -> Any:
        return self._client.get(graph, keys=[key])[key]

    def fibonacci(self, n: int) -> int:
        return int(self._client.submit(bench_tasks.fibonacci, self._client, n).result())

    def scheduler_process(self) -> psutil.Process:
        return procs.find_listener(procs.port_of(self._cluster.get_address()))

    def describe_scheduler(self) -> str:
        return f"process listening on the scheduler address {self._cluster.get_address()} (SchedulerClusterCombo)"


class DaskAdapter:
    """dask.distributed: `LocalCluster(processes=True)` with one thread per worker, or, when the scheduler must be
    its own process (W7), `dask scheduler` + `dask worker --nworkers 1 --nthreads 1` command-line processes.

    Submissions use `pure=False`: every call is a real task, as in Scaler, instead of being deduplicated by key
    (it also skips hashing the arguments, which only helps dask).
    """

    system = "dask"

    def __init__(self, log_dir: Path) -> None:
        self._log_dir = log_dir
        self._cluster: Any = None
        self._client: Any = None
        self._commands: list[subprocess.Popen[bytes]] = []
        self._address = ""

    def version(self) -> str:
        return importlib.metadata.version("distributed")

    def start(self, n_workers: int, separate_scheduler: bool = False) -> None:
        from distributed import Client, LocalCluster

        if not separate_scheduler:
            self._cluster = LocalCluster(
                n_workers=n_workers,
                threads_per_worker=1,
                processes=True,
                dashboard_address=None,
                silence_logs=logging.WARNING,
            )
            self._client = Client(self._cluster)
            self._address = self._cluster.scheduler_address
            return

        self._address = f"tcp://127.0.0.1:{free_port()}"
        dask = str(Path(sys.executable).parent / "dask")
        port = str(procs.port_of(self._address))
        self._launch([dask, "scheduler", "--host", "127.0.0.1", "--port", port, "--no-dashboard"], "scheduler")
        procs.find_listener(procs.port_of(self._address), timeout_seconds=60)
        for index in range(n_workers):
            command = [dask, "worker", self._address, "--nworkers", "1", "--nthreads", "1", "--no-dashboard"]
            self._launch([*command, "--host", "127.0.0.1"], f"worker-{index}")
        self._client = Client(self._address)
        self._client.wait_for_workers(n_workers, timeout=60)

    def _launch(self, command: list[str], name: str) -> None:
        with open(self._log_dir / f"dask-{name}.log", "wb") as log:
            self._commands.append(subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT))

    def stop(self) -> None:
        if self._client is not None:
            self._client.close()
        if self._cluster is not None:
            self._cluster.close()
        for process in reversed(self._commands):
            process.terminate()
        for process in self._commands:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()

    def submit(self, fn: Callable[..., Any], *args: Any) -> Any:
        return self._client.submit(fn, *args, pure=False)

    def gather(self, futures: list[Any]) -> list[Any]:
        return list(self._client.gather(futures))

    def map(self, fn: Callable[..., Any], items: Iterable[Any]) -> list[Any]:
        return list(self._client.gather(self._client.map(fn, list(items), pure=False)))

    def send_object(self, obj: Any) -> Any:
        # hash=False: by default scatter tokenizes the payload, which for 100 MB of bytes takes ~2 s in dask
        # 2026.8 (it would dominate W5); Scaler's send_object does not hash the payload that way either.
        return self._client.scatter(obj, broadcast=False, hash=False)

    def get(self, graph: dict[str, Any], key: str) -> Any:
        return self._client.get(graph, [key])[0]

    def fibonacci(self, n: int) -> int:
        return int(self._client.submit(bench_tasks.fibonacci_dask, n, pure=False).result())

    def scheduler_process(self) -> psutil.Process:
        return procs.find_listener(procs.port_of(self._address))

    def describe_scheduler(self) -> str:
        if self._commands:
            return f"`dask scheduler` process listening on {self._address}"
        return "the client process (LocalCluster runs the scheduler in-process)"


def make_adapter(system: str, log_dir: Path) -> Adapter:
    if system == "dask":
        return DaskAdapter(log_dir)
    if system in ScalerAdapter.DISTRIBUTIONS:
        return ScalerAdapter(system, log_dir)
    raise ValueError(f"unknown system {system!r}")
