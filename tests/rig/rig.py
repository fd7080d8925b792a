"""A rig of hosts on this machine (issue 74): each host its own network namespace on a shaped link to a router's
bridge, its own /dev/shm, /tmp, HOME, host name and PID namespace (plan.py draws it; host_init.py is its first
process). Processes start on a host with their ordinary commands (`host.start("scaler_scheduler", ...)`), their
output kept in a log for the test's failure message; the rig counts each host's bytes and makes the faults a test
needs: a link cut, two hosts firewalled from each other, a host killed.

    with Rig.open(["storage", "client", "w1", "w2"], workdir, rate_bits=100 * MBIT) as rig:
        rig.host("storage").start("scaler_object_storage_server", f"tcp://{rig.host('storage').address}:2346")
        ...
        rig.link_bytes()["storage"].sent

Needs root (`unavailable()` says why not). Everything it makes is gone when it closes, when the process that made it
is killed (its watchdog, watchdog.py), and after the test run (the suite's reaper knows the names, tests/reaping.py).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import select
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil

from tests.rig import network
from tests.rig.network import LinkBytes, RigError, Shaping
from tests.rig.plan import NAMESPACE_NAME, HostPlan, RigPlan

MBIT = 1_000_000
#: How long a host may take to come up (its first process mounting its folders), and a process to show itself.
START_SECONDS = 30.0
#: Where the console commands of this environment live.
BIN_DIR = Path(sys.executable).parent
_HERE = Path(__file__).parent
#: The numbers of the rigs this process makes (two at once must not share names).
_NUMBERS = itertools.count(1)


def unavailable() -> str | None:
    """Why no rig can be made here (None: one can): for a test's skip."""
    return network.unavailable()


@dataclass(frozen=True)
class HostMemory:
    """What a host holds: its /dev/shm (objects in shared memory, counted once however many map them) and its
    processes' anonymous memory (their private copies; files and shared memory they map are not counted again)."""

    shm_bytes: int
    anonymous_bytes: int

    @property
    def total_bytes(self) -> int:
        return self.shm_bytes + self.anonymous_bytes


class RigProcess:
    """A command running on a host (started through nsenter; `pid` is the command's own process, as the machine sees
    it), its output in `log_path`."""

    def __init__(self, host: Host, name: str, popen: subprocess.Popen[bytes], log_path: Path) -> None:
        self.host = host
        self.name = name
        self.popen = popen  #: nsenter: it waits for the command and exits with its status
        self.log_path = log_path
        self._pid = 0

    @property
    def pid(self) -> int:
        """The command's process (nsenter's child), as seen from the machine."""
        if not self._pid:
            deadline = time.monotonic() + START_SECONDS
            while not self._pid:
                with contextlib.suppress(psutil.NoSuchProcess):
                    children = psutil.Process(self.popen.pid).children()
                    if children:
                        self._pid = children[0].pid
                        break
                if self.popen.poll() is not None or time.monotonic() > deadline:
                    raise RigError(
                        f"{self.name} on {self.host.name} did not start; its log:\n{self.log_text()[-4000:]}"
                    )
                time.sleep(0.01)
        return self._pid

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def is_running(self) -> bool:
        return self.popen.poll() is None

    def wait_for_log(self, text: str, timeout_seconds: float = START_SECONDS) -> None:
        """Until `text` is in the log; fails naming the process, with its log, if it exits first or time runs out."""
        deadline = time.monotonic() + timeout_seconds
        while text not in self.log_text():
            if not self.is_running() or time.monotonic() > deadline:
                state = "is running" if self.is_running() else f"exited ({self.popen.returncode})"
                raise AssertionError(
                    f"no {text!r} in the log of {self.name} on {self.host.name} within {timeout_seconds:g} s; it "
                    f"{state}; its log:\n{self.log_text()[-6000:]}"
                )
            time.sleep(0.05)

    def signal(self, number: int) -> None:
        """Signal the command. A stopped command stops its nsenter too (nsenter passes job control on): SIGCONT
        continues both, or nsenter would never reap the command, and the host could not end."""
        with contextlib.suppress(ProcessLookupError, RigError):
            os.kill(self.pid, number)
        if number == signal.SIGCONT:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.popen.pid, signal.SIGCONT)

    def stop(self, timeout_seconds: float = 10.0) -> int | None:
        """SIGTERM, then SIGKILL after `timeout_seconds`; its exit status."""
        if self.is_running():
            self.signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout_seconds)
            except subprocess.TimeoutExpired:
                self.signal(signal.SIGKILL)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.popen.wait(timeout_seconds)
        return self.popen.poll()


class Host:
    """One host of the rig: its name, address, first process, and the commands started on it."""

    def __init__(self, rig: Rig, plan: HostPlan) -> None:
        self.rig = rig
        self.plan = plan
        self._init_popen: subprocess.Popen[bytes] | None = None
        self._init_pid = 0
        self.processes: list[RigProcess] = []

    @property
    def name(self) -> str:
        return self.plan.name

    @property
    def address(self) -> str:
        return self.plan.address

    @property
    def init_pid(self) -> int:
        """The host's first process (PID 1 of its PID namespace), as the machine sees it."""
        return self._init_pid

    def boot(self, shared: list[str]) -> None:
        log = self.rig.log_dir / f"{self.name}-init.log"
        argv = ["ip", "netns", "exec", self.plan.namespace, "unshare", "--mount", "--uts", "--ipc", "--pid",
                "--fork", "--propagation", "private", "--", sys.executable, "-I", str(_HERE / "host_init.py"),
                self.name, *shared]  # fmt: skip
        with open(log, "wb") as errors:
            popen = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=errors)
        self._init_popen = popen
        assert popen.stdout is not None
        ready, _, _ = select.select([popen.stdout], [], [], START_SECONDS)
        line = popen.stdout.readline() if ready else b""
        popen.stdout.close()
        if line.strip() != b"ready":
            with contextlib.suppress(ProcessLookupError):
                popen.kill()
            popen.wait()
            raise RigError(f"host {self.name} did not come up: {log.read_text(errors='replace').strip()[-2000:]}")
        children = psutil.Process(popen.pid).children()
        if len(children) != 1:
            raise RigError(f"host {self.name}: unshare has {len(children)} children, not its first process")
        self._init_pid = children[0].pid

    def is_alive(self) -> bool:
        return self._init_popen is not None and self._init_popen.poll() is None

    def command(self, argv: list[str], cwd: Path | None = None) -> list[str]:
        """`argv` as run on the host (nsenter into its namespaces; the command in this environment's bin when there)."""
        if not self.is_alive():
            raise RigError(f"host {self.name} is not running")
        program = argv[0]
        if "/" not in program and (BIN_DIR / program).exists():
            program = str(BIN_DIR / program)
        folder = str(cwd if cwd is not None else self.rig.workdir)
        return ["nsenter", f"--target={self._init_pid}", "--net", "--mount", "--uts", "--ipc", "--pid",
                f"--wd={folder}", "--", program, *argv[1:]]  # fmt: skip

    def environment(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        """This process's environment (the test run's markers included), with the host's own HOME and /tmp, and the
        configuration folder of the rig's maker (`Rig.config_home`)."""
        own = {"HOME": "/tmp/home", "TMPDIR": "/tmp", "XDG_CONFIG_HOME": str(self.rig.config_home)}
        return {**os.environ, **own, **(extra or {})}

    def start(self, command: str, *args: str, env: dict[str, str] | None = None, name: str = "") -> RigProcess:
        """Start a command on the host; its output goes to a log of the rig's."""
        label = name or Path(command).name
        log_path = self.rig.next_log(f"{self.name}-{label}")
        with open(log_path, "wb") as log:
            popen = subprocess.Popen(
                self.command([command, *args]), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                env=self.environment(env),
            )  # fmt: skip
        process = RigProcess(self, label, popen, log_path)
        self.processes.append(process)
        return process

    def run(
        self, command: str, *args: str, timeout_seconds: float = 120.0, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        """Run a command on the host to its end; fails naming it, with its output, if it outlives the deadline."""
        argv = self.command([command, *args])
        try:
            return subprocess.run(argv, capture_output=True, text=True, timeout=timeout_seconds,
                                  stdin=subprocess.DEVNULL, env=self.environment(env))  # fmt: skip
        except subprocess.TimeoutExpired as error:
            raise AssertionError(
                f"{command} on {self.name} did not end within {timeout_seconds:g} s; its output: {error.stdout!r} "
                f"{error.stderr!r}"
            ) from None

    def python(self, code: str, *args: str, timeout_seconds: float = 120.0) -> subprocess.CompletedProcess[str]:
        """Run Python code on the host (this environment's interpreter)."""
        return self.run(sys.executable, "-c", code, *args, timeout_seconds=timeout_seconds)

    def pids(self) -> list[int]:
        """The host's processes (its first process included), as the machine sees them."""
        if not self._init_pid:
            return []
        try:
            mine = os.readlink(f"/proc/{self._init_pid}/ns/pid")
        except OSError:
            return []
        found = []
        for entry in os.scandir("/proc"):
            if entry.name.isdigit():
                with contextlib.suppress(OSError):
                    if os.readlink(f"{entry.path}/ns/pid") == mine:
                        found.append(int(entry.name))
        return found

    def memory(self) -> HostMemory:
        """What the host holds now: its /dev/shm in use and its processes' anonymous memory."""
        shm = shutil.disk_usage(f"/proc/{self._init_pid}/root/dev/shm").used if self.is_alive() else 0
        anonymous = 0
        for pid in self.pids():
            with contextlib.suppress(psutil.Error):
                info = psutil.Process(pid).memory_info()
                anonymous += max(0, info.rss - info.shared)
        return HostMemory(shm, anonymous)

    def die(self) -> None:
        """Its first process killed: every process of the host ends with it (the kernel ends the PID namespace)."""
        if self._init_popen is None:
            return
        with contextlib.suppress(ProcessLookupError):
            if self._init_pid:
                os.kill(self._init_pid, signal.SIGKILL)
        for process in self.processes:  # a command's nsenter must reap it for the PID namespace to end
            with contextlib.suppress(ProcessLookupError):
                os.kill(process.popen.pid, signal.SIGCONT)
        for process in self.processes:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.popen.wait(START_SECONDS)
        self._init_popen.wait(START_SECONDS)


class Rig:
    """N hosts on this machine (see the module's docstring). Made by `open`, gone with `close`."""

    def __init__(self, plan: RigPlan, workdir: Path, rate_bits: int) -> None:
        self.plan = plan
        self.workdir = workdir
        self.log_dir = workdir / "logs"
        self.rate_bits = rate_bits
        self.python = sys.executable  #: the interpreter hosts run scripts with (this environment's)
        #: The configuration folder of the process that made the rig (the user's keys: scaler's servers make and use
        #: theirs there, and RigStack's key variables are read from there), seen by every host at its path. Named to
        #: the hosts explicitly: each host's HOME is its own, so without it a host's servers would make keys of their
        #: own under it, and no other host's peer could complete a CURVE handshake with them.
        self.config_home = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
        self.hosts = {host.name: Host(self, host) for host in plan.hosts}
        self._logs = 0
        self._watchdog: subprocess.Popen[bytes] | None = None
        self._closed = False

    @classmethod
    @contextlib.contextmanager
    def open(cls, names: list[str], workdir: Path, rate_bits: int = 100 * MBIT) -> Iterator[Rig]:
        """The rig of `names`, each host's link shaped to `rate_bits` per second each way; `workdir` (logs, scripts)
        is seen by every host at its path."""
        rig = cls.make(names, workdir, rate_bits)
        try:
            yield rig
        finally:
            rig.close()

    @classmethod
    def make(cls, names: list[str], workdir: Path, rate_bits: int = 100 * MBIT) -> Rig:
        """As `open`, for a caller that closes it (`close`)."""
        why = unavailable()
        if why is not None:
            raise RigError(why)
        workdir.mkdir(parents=True, exist_ok=True)
        rig = cls(RigPlan.of(os.getpid(), next(_NUMBERS), names), workdir.resolve(), rate_bits)
        rig.log_dir.mkdir(exist_ok=True)
        rig.config_home.mkdir(parents=True, exist_ok=True)  # a host binds it back at its path: it must exist
        remove_leftovers()
        rig._start_watchdog()
        try:
            network.make_router(rig.plan)
            shared = [str(rig.workdir), str(rig.config_home)]
            for host in rig.hosts.values():
                network.make_link(rig.plan, host.plan, rate_bits)
                host.boot(shared)
        except BaseException:
            rig.close()
            raise
        return rig

    def host(self, name: str) -> Host:
        self.plan.host(name)  # a clear error for a name it does not have
        return self.hosts[name]

    def next_log(self, label: str) -> Path:
        self._logs += 1
        return self.log_dir / f"{self._logs:03d}-{label}.log"

    # ------------------------------------------------------------ what a test reads

    def link_bytes(self) -> dict[str, LinkBytes]:
        """Every host's bytes sent and received so far (at the router's end of its link)."""
        return network.link_bytes(self.plan)

    def shaping(self, name: str) -> tuple[Shaping, Shaping]:
        """The shaping of the host's link: (its own end, the router's end)."""
        host = self.plan.host(name)
        return network.shaping(host.namespace, "eth0"), network.shaping(self.plan.router, host.router_port)

    def shape(self, name: str, rate_bits: int) -> None:
        """The host's link shaped to `rate_bits` per second each way from now on."""
        network.shape(self.plan, self.plan.host(name), rate_bits)

    # ------------------------------------------------------------ faults

    def cut(self, name: str) -> None:
        """The host's link drops everything from now on (silently: its peers hear nothing)."""
        network.set_cut(self.plan, self.plan.host(name), True)

    def heal(self, name: str) -> None:
        network.set_cut(self.plan, self.plan.host(name), False)

    def block(self, one: str, other: str) -> None:
        """Each host's firewall drops what comes from or goes to the other."""
        network.set_blocked(self.plan.host(one), self.plan.host(other), True)

    def unblock(self, one: str, other: str) -> None:
        network.set_blocked(self.plan.host(one), self.plan.host(other), False)

    def kill(self, name: str) -> None:
        """The host dies: its link cut first (its peers get no goodbye, as from a machine that lost power), then its
        first process killed, and with it every process of the host."""
        self.cut(name)
        self.host(name).die()

    # ------------------------------------------------------------ the end

    def close(self) -> None:
        """Every host killed, every namespace (links, queues, rules) removed; the watchdog told."""
        if self._closed:
            return
        self._closed = True
        for host in self.hosts.values():
            host.die()
        from tests.rig.watchdog import remove_rig

        remove_rig(self.plan.owner_pid, self.plan.number)
        if self._watchdog is not None:
            assert self._watchdog.stdin is not None
            self._watchdog.stdin.close()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._watchdog.wait(START_SECONDS)

    def _start_watchdog(self) -> None:
        self._watchdog = subprocess.Popen(
            [sys.executable, "-I", str(_HERE / "watchdog.py"), str(os.getpid()), str(self.plan.number)],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip


def remove_leftovers() -> list[str]:
    """What rigs of processes that are gone left (a watchdog killed with its maker): removed."""
    from tests.rig.watchdog import remove_rig

    owners = set()
    for line in network.run("ip", "netns", "list", check=False).splitlines():
        found = NAMESPACE_NAME.match(line.split()[0] if line.strip() else "")
        if found and not psutil.pid_exists(int(found.group(1))):
            owners.add(int(found.group(1)))
    return [name for owner in sorted(owners) for name in remove_rig(owner)]
