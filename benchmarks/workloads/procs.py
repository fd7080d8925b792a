"""psutil helpers: find a cluster's scheduler process, sample its RSS, and account CPU time per process."""

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
    daemon thread: the peak RSS of each process and its CPU seconds since the sampler started.

    CPU of a process that was already alive at the start counts from its first sample; a process that exits between
    two samples keeps the CPU of its last sample (so CPU burnt in its last `interval` is missed). RSS counts pages
    shared with other processes (shared memory, copy-on-write after fork) in every process that maps them.
    """

    def __init__(self, interval: float = 0.1) -> None:
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tree-sampler", daemon=True)
        self._processes: dict[int, psutil.Process] = {}
        self.first_cpu: dict[int, float] = {}
        self.last_cpu: dict[int, float] = {}
        self.peak_rss: dict[int, int] = {}
        self.labels: dict[int, str] = {}

    def __enter__(self) -> "TreeSampler":
        self._sample(starting=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._sample(starting=False)

    def _sample(self, starting: bool) -> None:
        me = psutil.Process()
        try:
            current = [me, *me.children(recursive=True)]
        except psutil.NoSuchProcess:
            current = [me]
        for process in current:
            known = self._processes.setdefault(process.pid, process)  # keep the object: its create time is checked
            try:
                with known.oneshot():
                    times = known.cpu_times()
                    rss = known.memory_info().rss
                    if known.pid not in self.labels:
                        self.labels[known.pid] = label(known)
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
            cpu = times.user + times.system
            self.first_cpu.setdefault(known.pid, cpu if starting else 0.0)
            self.last_cpu[known.pid] = cpu
            self.peak_rss[known.pid] = max(self.peak_rss.get(known.pid, 0), rss)

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            self._sample(starting=False)

    def cpu_seconds(self) -> float:
        return sum(self.last_cpu[pid] - self.first_cpu[pid] for pid in self.last_cpu)

    def per_process(self) -> list[dict[str, object]]:
        rows = [
            {
                "pid": pid,
                "process": self.labels.get(pid, "?"),
                "cpu_s": round(self.last_cpu[pid] - self.first_cpu[pid], 3),
                "peak_rss_mb": round(self.peak_rss[pid] / MB, 1),
            }
            for pid in self.last_cpu
        ]
        return sorted(rows, key=lambda row: -float(row["cpu_s"]))  # type: ignore[arg-type]


def label(process: psutil.Process) -> str:
    """A short name for a process: the client, a python -m module or script, or the executable's name."""
    if process.pid == psutil.Process().pid:
        return "client (this process)"
    try:
        cmdline = process.cmdline()
        name = process.name()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return "?"
    if "-m" in cmdline[:-1]:
        return f"{name} -m {cmdline[cmdline.index('-m') + 1]}"
    words = [word.rsplit("/", 1)[-1] for word in cmdline[:3]]
    return " ".join(words)[:80] or name
