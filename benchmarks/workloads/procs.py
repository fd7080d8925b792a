"""psutil helpers: find a cluster's scheduler process, sample memory (RSS, PSS) and account CPU time per process."""

import dataclasses
import threading
import time
from urllib.parse import urlsplit

import psutil

MB = 1024 * 1024


def port_of(address: str) -> int:
    port = urlsplit(address).port
    if port is None:
        raise ValueError(f"address has no port: {address!r}")
    return port


def listening_ports(process: psutil.Process) -> set[int]:
    try:
        return {c.laddr.port for c in process.net_connections(kind="tcp") if c.status == psutil.CONN_LISTEN}
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return set()


def cluster_processes() -> list[psutil.Process]:
    """This process and all of its descendants: every local cluster in this harness is started from here."""
    me = psutil.Process()
    return [me, *me.children(recursive=True)]


def describe(process: psutil.Process) -> str:
    try:
        cmdline = " ".join(process.cmdline())
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        cmdline = "?"
    return f"pid {process.pid}: {cmdline[:160]}"


def find_listener(port: int, timeout_seconds: float = 10.0) -> psutil.Process:
    """The process of our tree that listens on `port` (TCP). That is the scheduler when `port` is the scheduler's:
    the definition holds for every system whatever its process layout or process names."""
    deadline = time.monotonic() + timeout_seconds
    while True:
        processes = cluster_processes()
        for process in processes:
            if port in listening_ports(process):
                return process
        if time.monotonic() > deadline:
            tree = "\n".join(describe(p) for p in processes)
            raise RuntimeError(f"no process of the cluster listens on TCP port {port}; process tree:\n{tree}")
        time.sleep(0.05)


class RssSampler:
    """Samples one process's RSS every `interval` seconds in a daemon thread and keeps the peak."""

    def __init__(self, process: psutil.Process, interval: float = 0.05) -> None:
        self._process = process
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)
        self.peak_bytes = 0
        self.samples = 0

    def __enter__(self) -> "RssSampler":
        self._sample()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()

    def _sample(self) -> None:
        try:
            rss = self._process.memory_info().rss
        except psutil.NoSuchProcess:
            return
        self.peak_bytes = max(self.peak_bytes, rss)
        self.samples += 1

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            self._sample()


@dataclasses.dataclass
class CpuSnapshot:
    """CPU seconds (user + system) per live process, with what is needed to tell the processes apart."""

    cpu: dict[int, float]
    info: dict[int, tuple[int, str, list[str]]]  # pid -> (parent pid, process name, command line)

    @staticmethod
    def take() -> "CpuSnapshot":
        cpu: dict[int, float] = {}
        info: dict[int, tuple[int, str, list[str]]] = {}
        for process in cluster_processes():
            try:
                times = process.cpu_times()
                cpu[process.pid] = times.user + times.system
                info[process.pid] = (process.ppid(), process.name(), process.cmdline())
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
        return CpuSnapshot(cpu, info)


class TreeSampler:
    """Samples every process of the run's tree (this process and its descendants) every `interval` seconds in a
    daemon thread: the peak RSS and PSS of each process, the peak of their sums over the tree at one sample, and each
    process's CPU seconds since the sampler started.

    RSS counts a page in every process that maps it: the shared-memory segments N processors map, the interpreter
    pages processors forked from one zygote share, a Ray plasma store's /dev/shm pages in the raylet and every
    worker. PSS (proportional set size, /proc/<pid>/smaps_rollup) divides each page among the processes that map it,
    so its sum over the tree counts every page of the tree once. Pages no process maps (a tmpfs file nobody has
    mapped at the time of the sample) are in neither. PSS costs a walk of the process's page tables (about 1.6 ms of
    kernel CPU per process on this machine, RSS 0.01 ms), so it is read every `pss_every`-th sample only (every
    0.5 s by default; and at the first and last), RSS and CPU at every one. The sampler's own CPU (a thread of the
    client process, `cost()`) is measured and left out of the run's CPU (`cpu_seconds`).

    CPU of a process that was already alive at the start counts from its first sample; a process that exits between
    two samples keeps the CPU of its last sample (so CPU burnt in its last `interval` is missed).
    """

    def __init__(self, interval: float = 0.1, pss_every: int = 5) -> None:
        self._interval = interval
        self._pss_every = pss_every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tree-sampler", daemon=True)
        self._processes: dict[int, psutil.Process] = {}
        self.first_cpu: dict[int, float] = {}
        self.last_cpu: dict[int, float] = {}
        self.peak_rss: dict[int, int] = {}
        self.peak_pss: dict[int, int] = {}
        self.peak_rss_total = 0  # the largest sum over the tree at one sample
        self.peak_pss_total = 0
        self.labels: dict[int, str] = {}
        self.samples = 0
        self.pss_samples = 0
        self.sampler_cpu = 0.0  # CPU seconds of the sampling thread itself (its thread_time)
        self.sampler_wall = 0.0

    def __enter__(self) -> "TreeSampler":
        self._sample(starting=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._sample(starting=False, with_pss=True)

    def _sample(self, starting: bool, with_pss: bool = False) -> None:
        began_cpu, began_wall = time.thread_time(), time.perf_counter()
        with_pss = with_pss or self.samples % self._pss_every == 0
        me = psutil.Process()
        try:
            current = [me, *me.children(recursive=True)]
        except psutil.NoSuchProcess:
            current = [me]
        rss_total = pss_total = 0
        for process in current:
            known = self._processes.setdefault(process.pid, process)  # keep the object: its create time is checked
            try:
                with known.oneshot():
                    times = known.cpu_times()
                    # rss from /proc/<pid>/statm; pss from smaps_rollup (memory_full_info)
                    memory = known.memory_full_info() if with_pss else known.memory_info()
                    if known.pid not in self.labels:
                        self.labels[known.pid] = label(known)
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
            cpu = times.user + times.system
            self.first_cpu.setdefault(known.pid, cpu if starting else 0.0)
            self.last_cpu[known.pid] = cpu
            self.peak_rss[known.pid] = max(self.peak_rss.get(known.pid, 0), memory.rss)
            rss_total += memory.rss
            if with_pss:
                self.peak_pss[known.pid] = max(self.peak_pss.get(known.pid, 0), memory.pss)
                pss_total += memory.pss
        self.peak_rss_total = max(self.peak_rss_total, rss_total)
        self.peak_pss_total = max(self.peak_pss_total, pss_total)
        self.samples += 1
        self.pss_samples += with_pss
        self.sampler_cpu += time.thread_time() - began_cpu
        self.sampler_wall += time.perf_counter() - began_wall

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            self._sample(starting=False)

    def cpu_seconds(self) -> float:
        """CPU of the run's processes since the start, less the sampler's own."""
        return sum(self.last_cpu[pid] - self.first_cpu[pid] for pid in self.last_cpu) - self.sampler_cpu

    def per_process(self) -> list[dict[str, object]]:
        rows = [
            {
                "pid": pid,
                "process": self.labels.get(pid, "?"),
                "cpu_s": round(self.last_cpu[pid] - self.first_cpu[pid], 3),
                "peak_rss_mb": round(self.peak_rss[pid] / MB, 1),
                "peak_pss_mb": round(self.peak_pss.get(pid, 0) / MB, 1),  # 0: it lived between two PSS samples
            }
            for pid in self.last_cpu
        ]
        return sorted(rows, key=lambda row: -float(row["cpu_s"]))  # type: ignore[arg-type]

    def per_kind(self) -> list[dict[str, object]]:
        """The per-process peaks summed by kind of process (its label), largest PSS first."""
        kinds: dict[str, dict[str, float]] = {}
        for pid in self.last_cpu:
            kind = kinds.setdefault(self.labels.get(pid, "?"), {"count": 0, "pss": 0.0, "rss": 0.0})
            kind["count"] += 1
            kind["pss"] += self.peak_pss.get(pid, 0)
            kind["rss"] += self.peak_rss[pid]
        rows: list[dict[str, object]] = [
            {
                "process": name,
                "count": int(kind["count"]),
                "peak_pss_mb": round(kind["pss"] / MB, 1),
                "peak_rss_mb": round(kind["rss"] / MB, 1),
            }
            for name, kind in kinds.items()
        ]
        return sorted(rows, key=lambda row: -float(row["peak_pss_mb"]))  # type: ignore[arg-type]

    def cost(self) -> dict[str, float]:
        """What the sampling itself cost: samples taken (with PSS: how many), its CPU and wall time in all and per
        sample."""
        per = max(1, self.samples)
        return {
            "samples": self.samples,
            "pss_samples": self.pss_samples,
            "interval_s": self._interval,
            "cpu_s": round(self.sampler_cpu, 3),
            "cpu_ms_per_sample": round(1000 * self.sampler_cpu / per, 2),
            "wall_ms_per_sample": round(1000 * self.sampler_wall / per, 2),
        }


def label(process: psutil.Process) -> str:
    """A short name for a process: the client, a python -m module or script, or the executable's name."""
    if process.pid == psutil.Process().pid:
        return "client (this process)"
    try:
        cmdline = process.cmdline()
        name = process.name()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return "?"
    if cmdline and not name.startswith("python") and not cmdline[0].rsplit("/", 1)[-1].startswith(name):
        return str(name)  # it named itself (scaler-zygote, scaler-processor forked from it): that name says more
    if "-m" in cmdline[:-1]:
        return f"{name} -m {cmdline[cmdline.index('-m') + 1]}"
    words = [word.rsplit("/", 1)[-1] for word in cmdline[:3]]
    return " ".join(words)[:80] or name
