"""The laptop's link (#42 goal 3): one system's rows, its client on loopback or behind a slow link to its cluster.

Run by `benchmarks/laptop_link.py` with the system's own venv python:

    .venvs/<system>/bin/python workloads/laptop.py --system dask --log-dir DIR [--link SCALER_LINK --rtt-ms 40
        --jitter-ms 0 --bandwidth 50Mbit --loss 0] [--quick]

The cluster (2 single-threaded workers) runs on this machine's loopback; with `--link`, `scaler_link` (our relay,
given by path) sits between the client and everything the client talks to: ours' scheduler and object storage, the
Dask scheduler (the client is told not to talk to workers directly: a laptop cannot reach them), Ray's client server
(`ray://`). Prints `BENCH-RESULT {json}` with each row's figures.
"""

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")]))

import bench_tasks  # noqa: E402
from main import emit  # noqa: E402

FULL = {"round_trips": 200, "tasks": 10_000, "map": 10_000, "arguments": 1_250, "megabytes": 100}
QUICK = {"round_trips": 30, "tasks": 1_000, "map": 1_000, "arguments": 100, "megabytes": 10}
ARGUMENT_BYTES = 100_000


def free_ports(count: int) -> int:
    """The first of `count` consecutive free ports of 127.0.0.1."""
    for _ in range(200):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            first = int(probe.getsockname()[1])
        if first + count >= 65_000:
            continue
        taken = []
        try:
            for port in range(first, first + count):
                sock = socket.socket()
                taken.append(sock)
                sock.bind(("127.0.0.1", port))
            return first
        except OSError:
            continue
        finally:
            for sock in taken:
                sock.close()
    raise RuntimeError(f"no {count} consecutive free ports")


def wait_for_port(port: int, timeout_seconds: float = 90.0) -> None:
    deadline = time.monotonic() + timeout_seconds
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port} after {timeout_seconds:g} s")


class Link:
    """`scaler_link` relaying `count` ports from a fresh range to `target`, in its own process group."""

    def __init__(self, arguments: argparse.Namespace, target: int, count: int, log_dir: Path) -> None:
        self.port = free_ports(count)
        command = [
            arguments.link, f"tcp://127.0.0.1:{self.port}=tcp://127.0.0.1:{target}", "--ports", str(count),
            "--rtt-ms", str(arguments.rtt_ms), "--jitter-ms", str(arguments.jitter_ms),
            "--bandwidth", arguments.bandwidth, "--loss", str(arguments.loss), "--seed", "42",
        ]  # fmt: skip
        with open(log_dir / "link.log", "wb") as log:
            self._process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:  # the link is the instrument: on a busy machine it must not be late (root may raise its priority)
            os.setpriority(os.PRIO_PROCESS, self._process.pid, -5)
        except OSError:
            pass
        wait_for_port(self.port + count - 1)

    def stop(self) -> None:
        self._process.terminate()
        try:
            self._process.wait(10)
        except subprocess.TimeoutExpired:
            self._process.kill()


# ---------------------------------------------------------------- one client per system


class Ours:
    """Ours as users run it: CURVE on every connection (the default)."""

    insecure = False

    def __init__(self, arguments: argparse.Namespace, log_dir: Path) -> None:
        from scaler import Client, SchedulerClusterCombo

        port = free_ports(3)
        self._cluster = SchedulerClusterCombo(
            n_workers=2, address=f"tcp://127.0.0.1:{port}", object_storage_address=f"tcp://127.0.0.1:{port + 1}",
            monitor_address=f"tcp://127.0.0.1:{port + 2}", logging_paths=(str(log_dir / "cluster.log"),),
            insecure=self.insecure,
        )  # fmt: skip
        self.link = Link(arguments, port, 2, log_dir) if arguments.link else None
        there = self.link.port if self.link else port
        if self.link:
            # a laptop is another host: its client does not see the storage's segment directory (here, on the same
            # machine, it would, and its objects would skip the link through shared memory)
            from scaler.object_storage import local_segments

            local_segments.sees = lambda directory: False
        self.client = Client(f"tcp://127.0.0.1:{there}", object_storage_address=f"tcp://127.0.0.1:{there + 1}")

    def stop(self) -> None:
        self.client.disconnect()
        if self.link:
            self.link.stop()
        self._cluster.shutdown()

    def submit(self, fn: Callable[..., Any], *args: Any) -> Any:
        return self.client.submit(fn, *args)

    def gather(self, futures: list[Any]) -> list[Any]:
        return [future.result() for future in futures]

    def map(self, fn: Callable[..., Any], items: range) -> list[Any]:
        return list(self.client.map(fn, items))

    def put(self, data: bytes) -> Any:
        return self.client.send_object(data)


class OursPlain(Ours):
    """Ours with plain TCP (`insecure=True`), as Dask and Ray run here: what CURVE costs on each row. The link
    registers the cluster's "insecure" connection files at its own addresses, so the client connects without keys."""

    insecure = True


class Dask:
    def __init__(self, arguments: argparse.Namespace, log_dir: Path) -> None:
        import logging

        from distributed import Client, LocalCluster

        port = free_ports(1)
        self._cluster = LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None, host="127.0.0.1",
            scheduler_port=port, silence_logs=logging.WARNING,
        )  # fmt: skip
        self.link = Link(arguments, port, 1, log_dir) if arguments.link else None
        there = self.link.port if self.link else port
        # a laptop reaches the scheduler only: data goes through it (scatter, gather), as over a real link
        self.client = Client(f"tcp://127.0.0.1:{there}", direct_to_workers=False)

    def stop(self) -> None:
        self.client.close()
        if self.link:
            self.link.stop()
        self._cluster.close()

    def submit(self, fn: Callable[..., Any], *args: Any) -> Any:
        return self.client.submit(fn, *args, pure=False)

    def gather(self, futures: list[Any]) -> list[Any]:
        return list(self.client.gather(futures))

    def map(self, fn: Callable[..., Any], items: range) -> list[Any]:
        return list(self.client.gather(self.client.map(fn, list(items), pure=False)))

    def put(self, data: bytes) -> Any:
        return self.client.scatter(data, broadcast=False, hash=False, direct=False)


class RayFuture:
    def __init__(self, ref: Any) -> None:
        self.ref = ref

    def result(self) -> Any:
        import ray

        return ray.get(self.ref)


class Ray:
    """A Ray head (`ray start --head --block`, its own process group) with its client server, reached by `ray://`.

    Token authentication on both sides: Ray 2.60's `ray start` turns it on for a new cluster by default (its token
    in ~/.ray/auth_token), but a `ray://` client adds the token to its calls only when RAY_AUTH_MODE=token is set in
    its own environment; without it the client server refuses every call and `ray.init` ends, 30 s on, with "ray
    client connection timeout". So the mode is set here for the head and the client alike, as a user of a secured
    cluster sets it."""

    def __init__(self, arguments: argparse.Namespace, log_dir: Path) -> None:
        os.environ.setdefault("RAY_AUTH_MODE", "token")
        import ray

        self._temp = tempfile.mkdtemp(prefix="rl-", dir="/tmp")  # its AF_UNIX socket paths must stay short
        gcs, client_port = free_ports(1), free_ports(1)
        ray_command = str(Path(sys.executable).parent / "ray")
        command = [
            ray_command, "start", "--head", "--block", "--num-cpus", "2", "--port", str(gcs),
            "--ray-client-server-port", str(client_port), "--include-dashboard", "false", "--temp-dir", self._temp,
            "--disable-usage-stats",
        ]  # fmt: skip
        with open(log_dir / "ray-head.log", "wb") as log:
            self._head = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        wait_for_port(client_port, 120)
        self.link = Link(arguments, client_port, 1, log_dir) if arguments.link else None
        there = self.link.port if self.link else client_port
        self._remotes: dict[Callable[..., Any], Any] = {}
        try:
            for attempt in (1, 2):
                try:
                    ray.init(f"ray://127.0.0.1:{there}", logging_level="WARNING")
                    break
                except ConnectionAbortedError as error:
                    # "Starting Ray client server failed": the head starts a server process of this client's own,
                    # which a busy machine may not get running in time (1 of 4 runs at a load of 13 to 19)
                    if attempt == 2:
                        raise
                    print(f"ray.init failed, trying once more: {str(error)[-300:]}", file=sys.stderr, flush=True)
                    self._keep_logs(log_dir)
                    ray.shutdown()
        except BaseException:  # e.g. "ray client connection timeout" on a busy machine: leave no head behind
            self._keep_logs(log_dir)
            self.stop()
            raise

    def _keep_logs(self, log_dir: Path) -> None:
        """The head's client server and runtime-env agent logs, copied next to ours (stop() removes its temp dir):
        they say why a client could not connect."""
        import shutil

        for path in Path(self._temp).glob("session_*/logs/*"):
            if path.is_file() and any(part in path.name for part in ("client_server", "runtime_env", "raylet")):
                shutil.copy(path, log_dir / f"ray-{path.name}")

    def stop(self) -> None:
        import os
        import shutil
        import signal

        import ray

        ray.shutdown()
        if self.link:
            self.link.stop()
        try:
            os.killpg(self._head.pid, signal.SIGTERM)
            self._head.wait(30)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(self._head.pid, signal.SIGKILL)
        shutil.rmtree(self._temp, ignore_errors=True)

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

    def map(self, fn: Callable[..., Any], items: range) -> list[Any]:
        import ray

        remote = self._remote(fn)
        return list(ray.get([remote.remote(item) for item in items]))

    def put(self, data: bytes) -> Any:
        import ray

        return ray.put(data)


SYSTEMS: dict[str, Callable[[argparse.Namespace, Path], Any]] = {
    "ours": Ours,
    "ours-plain": OursPlain,
    "ours-before": Ours,  # our code at an earlier commit (SCALER_BENCH_BEFORE, benchmarks/harness/systems.py)
    "dask": Dask,
    "ray": Ray,
}


# ---------------------------------------------------------------- the rows


def timed(work: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    value = work()
    return time.perf_counter() - start, value


def rows(system: Any, sizes: dict[str, int], bulk_only: bool = False) -> dict[str, float]:
    figures: dict[str, float] = {}
    for _ in range(2):  # warm: every worker has run something, the function is cached
        system.gather([system.submit(bench_tasks.inc, i) for i in range(4)])
    if bulk_only:
        figures["put_seconds"], figures["get_seconds"] = bulk(system, sizes["megabytes"] * 1_000_000)
        return figures

    latencies = []
    for i in range(sizes["round_trips"]):
        start = time.perf_counter()
        assert system.submit(bench_tasks.inc, i).result() == i + 1
        latencies.append(time.perf_counter() - start)
    latencies.sort()
    figures["W3_p50_ms"] = 1000 * latencies[len(latencies) // 2]

    n = sizes["tasks"]
    seconds, results = timed(lambda: system.gather([system.submit(bench_tasks.inc, i) for i in range(n)]))
    assert results == [i + 1 for i in range(n)], "W1: wrong results"
    figures["W1_seconds"] = seconds

    n = sizes["map"]
    seconds, results = timed(lambda: system.map(bench_tasks.inc, range(n)))
    assert results == [i + 1 for i in range(n)], "map: wrong results"
    figures["map_seconds"] = seconds

    figures["U3_seconds"] = own_arguments(system, sizes["arguments"])
    figures["put_seconds"], figures["get_seconds"] = bulk(system, sizes["megabytes"] * 1_000_000)
    return figures


def own_arguments(system: Any, n: int) -> float:
    arguments = [os.urandom(ARGUMENT_BYTES) for _ in range(n)]
    seconds, results = timed(lambda: system.gather([system.submit(bench_tasks.size_of, a) for a in arguments]))
    assert results == [ARGUMENT_BYTES] * n, "U3: wrong results"
    return seconds


def bulk(system: Any, size: int) -> tuple[float, float]:
    """An object of `size` bytes sent and read by a task; a task's result of `size` bytes fetched."""
    data = os.urandom(size)
    put, result = timed(lambda: system.submit(bench_tasks.size_of, system.put(data)).result())
    assert result == size, "put: wrong size"
    get, fetched = timed(lambda: system.submit(bench_tasks.zeros, size).result())
    assert len(fetched) == size, "get: wrong size"
    return put, get


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--system", choices=tuple(SYSTEMS), required=True)
    parser.add_argument("--log-dir", type=Path, required=True)
    parser.add_argument("--link", default="", help="path of scaler_link; none: loopback")
    parser.add_argument("--rtt-ms", type=float, default=40.0)
    parser.add_argument("--jitter-ms", type=float, default=0.0)
    parser.add_argument("--bandwidth", default="50Mbit")
    parser.add_argument("--loss", type=float, default=0.0)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--bulk-only", action="store_true", help="only the 100 MB rows (put, get)")
    arguments = parser.parse_args()
    arguments.log_dir.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    system = SYSTEMS[arguments.system](arguments, arguments.log_dir)
    started = time.perf_counter() - start
    try:
        figures = rows(system, QUICK if arguments.quick else FULL, arguments.bulk_only)
        emit({"system": arguments.system, "link": bool(arguments.link), "figures": figures, "start_seconds": started})
    finally:
        system.stop()


if __name__ == "__main__":
    main()
