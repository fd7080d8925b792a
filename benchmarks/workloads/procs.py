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
