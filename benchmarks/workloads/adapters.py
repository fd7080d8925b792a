"""One small adapter per API family, so that every workload is written once.

`ours` and `opengris` share the Scaler API (`scaler.Client`, `scaler.SchedulerClusterCombo`): one adapter serves
both, each imported from its own virtual environment. `dask` and `ray` have their own adapters, each on its
system's public API only. Every adapter starts a local
cluster of `n_workers` single-threaded worker processes and keeps the cluster's logs out of stdout.

`preimport` (U4p): modules each system's workers import when they start, before any task, with the system's own
means: ours' `preimport` (imported once per worker, in the zygote its processors are forked from), Dask's worker
`preload` (module names are imported by each worker process) and Ray's `worker_process_setup_hook` (run by each worker
process before its first task).
"""

import importlib.metadata
import inspect
import logging
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Protocol

import bench_tasks
import procs
import psutil


class Adapter(Protocol):
    system: str

    def version(self) -> str: ...
    def start(self, n_workers: int, separate_scheduler: bool = False, preimport: tuple[str, ...] = ()) -> None: ...
    def stop(self) -> None: ...
    def submit(self, fn: Callable[..., Any], *args: Any) -> Any: ...
    def gather(self, futures: list[Any]) -> list[Any]: ...
    def map(self, fn: Callable[..., Any], items: Iterable[Any]) -> list[Any]: ...
    def send_object(self, obj: Any) -> Any: ...
    def get(self, graph: dict[str, Any], key: str) -> Any: ...
    def fibonacci(self, n: int) -> int: ...
    def grid_search(self, search: Any, x: Any, y: Any) -> Any: ...
    def scheduler_process(self) -> psutil.Process: ...
    def describe_scheduler(self) -> str: ...


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class ScalerAdapter:
    """`ours` and `opengris-scaler` 2.9: `SchedulerClusterCombo` (object storage + scheduler + fixed workers)."""

    DISTRIBUTIONS = {"ours": "scaler-compute", "ours-before": "scaler-compute", "opengris": "opengris-scaler"}

    def __init__(self, system: str, log_dir: Path) -> None:
        self.system = system
        self._log_dir = log_dir
        self._cluster: Any = None
        self._client: Any = None

    def version(self) -> str:
        return importlib.metadata.version(self.DISTRIBUTIONS[self.system])

    def start(self, n_workers: int, separate_scheduler: bool = False, preimport: tuple[str, ...] = ()) -> None:
        # The scheduler is a separate process in SchedulerClusterCombo already: `separate_scheduler` is moot.
        from scaler import Client, SchedulerClusterCombo

        extra: dict[str, Any] = {}
        if preimport:
            if "preimport" not in inspect.signature(SchedulerClusterCombo).parameters:
                raise NotImplementedError(f"{self.system} {self.version()} has no `preimport` setting")
            extra["preimport"] = preimport
        self._cluster = SchedulerClusterCombo(
            n_workers=n_workers, **self._logging_kwargs(SchedulerClusterCombo), **extra
        )
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

    def grid_search(self, search: Any, x: Any, y: Any) -> Any:
        """joblib's "scaler" backend, registered by `import scaler.joblib` (ours; opengris-scaler has none)."""
        import joblib

        try:
            import scaler.joblib  # noqa: F401
        except ImportError:
            raise NotImplementedError(f"{self.system} {self.version()} has no `scaler.joblib` backend") from None
        with joblib.parallel_config(backend="scaler", client=self._client):
            return search.fit(x, y)

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

    def start(self, n_workers: int, separate_scheduler: bool = False, preimport: tuple[str, ...] = ()) -> None:
        from distributed import Client, LocalCluster

        if preimport and separate_scheduler:
            raise NotImplementedError("preimport with the scheduler as a command of its own")
        if not separate_scheduler:
            self._cluster = LocalCluster(
                n_workers=n_workers,
                threads_per_worker=1,
                processes=True,
                dashboard_address=None,
                silence_logs=logging.WARNING,
                **({"preload": list(preimport)} if preimport else {}),
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

    def grid_search(self, search: Any, x: Any, y: Any) -> Any:
        import joblib

        with joblib.parallel_config(backend="dask"):
            return search.fit(x, y)

    def scheduler_process(self) -> psutil.Process:
        return procs.find_listener(procs.port_of(self._address))

    def describe_scheduler(self) -> str:
        if self._commands:
            return f"`dask scheduler` process listening on {self._address}"
        return "the client process (LocalCluster runs the scheduler in-process)"


class RayFuture:
    """An ObjectRef with the `result()` the workloads call on a submitted task (W3, W8): `ray.get` of it."""

    def __init__(self, ref: Any) -> None:
        self.ref = ref

    def result(self) -> Any:
        import ray

        return ray.get(self.ref)


class RayAdapter:
    """Ray on one machine: `ray.init(num_cpus=n_workers)` starts its own head (GCS, raylet, object store) and
    `n_workers` CPU slots, each task taking one, as each of the other systems' workers runs one task at a time.
    `stop` is `ray.shutdown()`, which stops the processes this `ray.init` started; the driver kills the run's
    process group after it anyway."""

    system = "ray"

    def __init__(self, log_dir: Path) -> None:
        self._log_dir = log_dir
        self._remotes: dict[Callable[..., Any], Any] = {}
        self._started = False
        self._temp_dir = ""

    def version(self) -> str:
        return importlib.metadata.version("ray")

    def start(self, n_workers: int, separate_scheduler: bool = False, preimport: tuple[str, ...] = ()) -> None:
        import ray

        def setup_hook() -> None:  # a function of its own: Ray exports it by name (a partial is refused)
            bench_tasks.import_modules(preimport)

        # Ray's session folder holds its AF_UNIX sockets, whose paths may not exceed 107 bytes: a short folder of its
        # own, whose logs are copied to the run's log folder at the end.
        self._temp_dir = tempfile.mkdtemp(prefix="bench-ray-")
        ray.init(
            num_cpus=n_workers,
            include_dashboard=False,
            log_to_driver=False,
            logging_level=logging.WARNING,
            _temp_dir=self._temp_dir,
            **({"runtime_env": {"worker_process_setup_hook": setup_hook}} if preimport else {}),
        )
        self._started = True

    def stop(self) -> None:
        if self._started:
            import ray

            ray.shutdown()
        if self._temp_dir:
            shutil.copytree(self._temp_dir, self._log_dir / "ray", dirs_exist_ok=True, ignore_dangling_symlinks=True,
                            ignore=shutil.ignore_patterns("sockets", "*.sock"))  # fmt: skip
            shutil.rmtree(self._temp_dir, ignore_errors=True)

    def _remote(self, fn: Callable[..., Any]) -> Any:
        remote = self._remotes.get(fn)
        if remote is None:
            import ray

            remote = self._remotes[fn] = ray.remote(num_cpus=1)(fn)
        return remote

    def submit(self, fn: Callable[..., Any], *args: Any) -> Any:
        return RayFuture(self._remote(fn).remote(*args))

    def gather(self, futures: list[Any]) -> list[Any]:
        import ray

        return list(ray.get([future.ref for future in futures]))

    def map(self, fn: Callable[..., Any], items: Iterable[Any]) -> list[Any]:
        import ray

        remote = self._remote(fn)
        return list(ray.get([remote.remote(item) for item in items]))

    def send_object(self, obj: Any) -> Any:
        import ray

        return ray.put(obj)

    def get(self, graph: dict[str, Any], key: str) -> Any:
        """A Dask-style graph as Ray tasks: each node a task whose key arguments are the other tasks' ObjectRefs
        (Ray resolves top-level ObjectRef arguments before the task runs); data nodes are passed as values."""
        import ray

        refs: dict[str, Any] = {}

        def build(node_key: str) -> Any:
            if node_key not in refs:
                node = graph[node_key]
                if isinstance(node, tuple) and node and callable(node[0]):
                    args = [build(a) if isinstance(a, str) and a in graph else a for a in node[1:]]
                    refs[node_key] = self._remote(node[0]).remote(*args)
                else:
                    refs[node_key] = node
            return refs[node_key]

        for node_key in graph:  # iteratively, leaves first where the graph lists them first (no deep recursion)
            build(node_key)
        result = refs[key]
        return ray.get(result) if isinstance(result, ray.ObjectRef) else result

    def fibonacci(self, n: int) -> int:
        return int(self.gather([self.submit(bench_tasks.fibonacci_ray, n)])[0])

    def grid_search(self, search: Any, x: Any, y: Any) -> Any:
        import joblib
        from ray.util.joblib import register_ray

        register_ray()
        with joblib.parallel_config(backend="ray"):
            return search.fit(x, y)

    def scheduler_process(self) -> psutil.Process:
        raise NotImplementedError("Ray has no single scheduler process to compare (W7 is not run for ray)")

    def describe_scheduler(self) -> str:
        return "none"


def make_adapter(system: str, log_dir: Path) -> Adapter:
    if system == "dask":
        return DaskAdapter(log_dir)
    if system == "ray":
        return RayAdapter(log_dir)
    if system in ScalerAdapter.DISTRIBUTIONS:
        return ScalerAdapter(system, log_dir)
    raise ValueError(f"unknown system {system!r}")
