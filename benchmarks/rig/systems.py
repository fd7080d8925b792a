"""Each system of the rig benchmark started on the rig's hosts with its own commands, from its own venv
(benchmarks/.venvs/<system>): a server side on the storage host, two task slots on each worker host, the client on the
client host.

- ours (and ours-before, an earlier commit's tree: benchmarks/harness/systems.py): `scaler_object_storage_server` and
  `scaler_scheduler` on the storage host, `scaler_cluster -n SLOTS` on each worker host (tests/rig/stack.py);
- ray: a 0-CPU head on the storage host, then one `ray start` per host, one after another (all at once timed out on
  2 cores), each with its address given (`--node-ip-address`: Ray finds its own by a route off the rig otherwise),
  SLOTS CPUs on worker hosts and a 0-CPU node on the client host (a driver needs a raylet on its host);
- dask: `dask scheduler` on the storage host, `dask worker --nworkers SLOTS --nthreads 1` on each worker host.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from tests.rig import Rig, RigProcess
from tests.rig.stack import RigStack, key_variables

RAY_PORT = 6379
DASK_PORT = 8786
#: Ray's object store on each node: small next to a host's memory, large enough for the workloads.
RAY_OBJECT_STORE_BYTES = 1_500_000_000
START_SECONDS = 300.0


@dataclass
class Running:
    """A system up on the rig: what its client needs, and how it stops."""

    system: str
    address: str
    client_env: dict[str, str] = field(default_factory=dict)
    processes: list[RigProcess] = field(default_factory=list)
    stack: RigStack | None = None

    def stop(self) -> None:
        if self.stack is not None:
            self.stack.stop()
        for process in self.processes:
            process.stop(5.0)


def start(system: str, rig: Rig, venv_bin: Path, worker_hosts: list[str], slots: int) -> Running:
    if system in ("ours", "ours-before"):
        return _ours(system, rig, venv_bin, worker_hosts, slots)
    if system == "ray":
        return _ray(rig, venv_bin, worker_hosts, slots)
    if system == "dask":
        return _dask(rig, venv_bin, worker_hosts, slots)
    raise ValueError(f"unknown system {system!r}")


def _ours(system: str, rig: Rig, venv_bin: Path, worker_hosts: list[str], slots: int) -> Running:
    stack = RigStack.start(rig, "storage", dict.fromkeys(worker_hosts, slots), bin_dir=venv_bin)
    return Running(system, stack.scheduler_address, key_variables("client"), stack=stack)


def _ray(rig: Rig, venv_bin: Path, worker_hosts: list[str], slots: int) -> Running:
    head = rig.host("storage")
    address = f"{head.address}:{RAY_PORT}"
    common = ["--disable-usage-stats", f"--object-store-memory={RAY_OBJECT_STORE_BYTES}"]
    nodes = [("storage", ["--head", f"--port={RAY_PORT}", "--num-cpus=0", "--include-dashboard=false"])]
    nodes += [(name, [f"--address={address}", f"--num-cpus={slots}"]) for name in worker_hosts]
    nodes += [("client", [f"--address={address}", "--num-cpus=0"])]
    for name, arguments in nodes:
        host = rig.host(name)
        done = host.run(str(venv_bin / "ray"), "start", f"--node-ip-address={host.address}", *arguments, *common,
                        timeout_seconds=START_SECONDS)  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"ray start on {name} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return Running("ray", address)


def _dask(rig: Rig, venv_bin: Path, worker_hosts: list[str], slots: int) -> Running:
    head = rig.host("storage")
    address = f"tcp://{head.address}:{DASK_PORT}"
    running = Running("dask", address)
    scheduler = head.start(str(venv_bin / "dask"), "scheduler", "--host", head.address, "--port", str(DASK_PORT),
                           "--no-dashboard", name="dask-scheduler")  # fmt: skip
    running.processes.append(scheduler)
    scheduler.wait_for_log("Scheduler at:", START_SECONDS)
    for name in worker_hosts:
        host = rig.host(name)
        running.processes.append(
            host.start(
                str(venv_bin / "dask"), "worker", address, "--host", host.address, "--nworkers", str(slots),
                "--nthreads", "1", "--no-dashboard", "--memory-limit", "0", name="dask-worker",
            )
        )  # fmt: skip
    wanted = len(worker_hosts) * slots
    probe = (
        "import sys; from distributed import Client\n"
        "with Client(sys.argv[1], timeout=120) as c: c.wait_for_workers(int(sys.argv[2]), timeout=300)"
    )
    done = rig.host("client").run(str(venv_bin / "python"), "-c", probe, address, str(wanted),
                                  timeout_seconds=START_SECONDS)  # fmt: skip
    if done.returncode != 0:
        logs = "\n".join(process.log_text()[-2000:] for process in running.processes)
        raise RuntimeError(f"{wanted} dask workers did not come:\n{done.stderr[-3000:]}\n{logs}")
    return running
