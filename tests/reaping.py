"""How tests/run_reaper.py finds and removes what a test run started (it says what belongs to a run), and the
watchdog process that does it when the run's pytest is gone: `python tests/reaping.py watch CONTROLLER FD REPORT`
(started by the plugin). Standard library only, so that the watchdog is up at once.

`python -m tests.reaping cpu FILE` sums a SCALER_TEST_CPU file (tests/run_reaper.py) per module.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

#: The run's id, set by the controller, inherited by every process the run starts.
RUN_VARIABLE = "SCALER_TEST_RUN"
#: The run's control group (a folder of the cgroup file system), when there is one.
GROUP_VARIABLE = "SCALER_TEST_RUN_GROUP"
#: Per-test CPU accounting: the file each test process appends `test-id cpu-seconds` to.
CPU_VARIABLE = "SCALER_TEST_CPU"
#: How often the watchdog records the run's pids.
POLL_SECONDS = 0.5
#: How long the reaper keeps killing a group that keeps forking.
KILL_SECONDS = 30.0
#: How long the reaper of a run that ended lets the run's processes end on their own before it kills them. A process a
#: test process started may end just after it: multiprocessing's and loky's resource trackers (started by joblib's own
#: backends in the test process) read to the end of a pipe only the test process held, then unlink what is still
#: registered and exit, some 0.1 s after the test process is gone, when the reaper already looks.
EXIT_GRACE_SECONDS = 5.0
#: Names that carry the pid of the process that made them (the first group of each pattern).
#: (the fake cloud's VPCs, test_partitioned_peers' namespaces, the rig of hosts' router and hosts: tests/rig/plan.py)
NAMESPACE_NAMES = (re.compile(r"^sfc-(\d+)-"), re.compile(r"^scaler(\d+)n\d+$"), re.compile(r"^rig(\d+)n\d+[rh]\d*$"))
LINK_NAMES = (re.compile(r"^sfc(\d+)h$"), re.compile(r"^sc(\d+)h\d+$"))
#: Memory cgroups a test process made, named after it: the memory tests' limits, and its local Slurm's slurmd's group
#: (tests/integration/slurm_cluster.py: `scaler-test-<pid>-slurm-*`, with Slurm's groups of the jobs under it).
MEMORY_GROUPS = Path("/sys/fs/cgroup/memory")
MEMORY_GROUP_NAME = re.compile(r"^scaler-test-(\d+)-")
#: Object storage segment directories (scaler/object_storage/segment_directory.py) under these parents: one whose lock
#: file names a pid of the run is the run's (its server and the server's reaper were killed with the run).
SEGMENT_PARENTS = (Path("/dev/shm"), Path(os.environ.get("TMPDIR") or "/tmp"))
SEGMENT_PREFIX = "scaler-objects-"
#: What joblib's loky pools leave in /dev/shm when a task that started one is killed (the joblib conformance suite
#: and the joblib backend's tests do that): memmapping folders and semaphores named after the pool's maker.
POOL_LEFTOVERS = (re.compile(r"^joblib_memmapping_folder_(\d+)_"), re.compile(r"^sem\.loky-(\d+)-"))
#: A worker's computing-marks folder (scaler/worker/computing_mark.py), named after the worker's pid: its worker
#: removes it when it stops, and a later worker removes an orphan's, so one left after the run is a killed worker's.
MARKS_NAME = re.compile(r"^scaler-marks-(\d+)-")
CONTAINER_LABEL = "scaler-fake-cloud"
#: The test session's configuration folder (tests/conftest.py), named after the pytest process that made it; the
#: state folder of a test process's local Slurm (tests/integration/slurm_cluster.py), likewise.
CONFIG_HOME_NAME = re.compile(r"^scaler-test-config-(\d+)-")
SLURM_STATE_NAME = re.compile(r"^scaler-slurm-(\d+)-")


# ---------------------------------------------------------------- membership: a control group, or the environment


@dataclass(frozen=True)
class Hierarchy:
    """A cgroup hierarchy this process may make groups in: v1's cpuacct (CPU accounted) or v2's."""

    mount: Path
    version: int

    def own_group(self) -> Path:
        """The group this process is in."""
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            number, controllers, path = line.split(":", 2)
            if (self.version == 2 and number == "0") or (self.version == 1 and "cpuacct" in controllers.split(",")):
                return self.mount / path.lstrip("/")
        raise OSError(f"this process is in no group of {self.mount}")

    def cpu_seconds(self, group: Path) -> float:
        """CPU (user + system) of every process that ran in the group or under it, since it was made."""
        if self.version == 1:
            return int((group / "cpuacct.usage").read_text()) / 1e9
        for line in (group / "cpu.stat").read_text().splitlines():
            if line.startswith("usage_usec "):
                return int(line.split()[1]) / 1e6
        return 0.0


def find_hierarchy() -> Hierarchy | None:
    """cgroup v1's cpuacct hierarchy if mounted, else the cgroup v2 one (None when neither is)."""
    found: dict[int, Path] = {}
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        before, _dash, after = line.partition(" - ")
        fields, kind = before.split(), after.split()
        if len(fields) < 5 or len(kind) < 3 or fields[3] != "/":
            continue
        if kind[0] == "cgroup" and "cpuacct" in kind[2].split(","):
            found.setdefault(1, Path(fields[4]))
        elif kind[0] == "cgroup2":
            found.setdefault(2, Path(fields[4]))
    version = min(found, default=None)
    return None if version is None else Hierarchy(found[version], version)


def group_pids(group: Path) -> list[int]:
    """Every process in the group and the groups under it."""
    pids: list[int] = []
    for folder, _subfolders, _files in os.walk(group):
        with contextlib.suppress(OSError):
            pids.extend(int(line) for line in Path(folder, "cgroup.procs").read_text().split())
    return pids


def join_group(group: Path, pid: int) -> None:
    (group / "cgroup.procs").write_text(str(pid))


def remove_groups(group: Path) -> None:
    """The group and those under it, deepest first (each must be empty)."""
    for folder, _subfolders, _files in sorted(os.walk(group), key=lambda entry: -len(entry[0])):
        with contextlib.suppress(OSError):
            os.rmdir(folder)


def environment_pids(run_id: str, variables: dict[str, str] | None = None) -> list[int]:
    """The processes whose environment carries the run's id (and each of `variables`), when there is no group."""
    wanted = {RUN_VARIABLE: run_id, **(variables or {})}
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            raw = Path(entry.path, "environ").read_bytes()
        except OSError:
            continue
        environment = dict(item.partition(b"=")[::2] for item in raw.split(b"\0") if item)
        if all(environment.get(key.encode()) == value.encode() for key, value in wanted.items()):
            found.append(int(entry.name))
    return found


def is_zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] in ("Z", "X")
    except (OSError, IndexError):
        return True


def command_of(pid: int) -> str:
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()[:160]
    return "?"


def kind_of(pid: int) -> str | None:
    """What a process runs, for the run's tally: its name (a forked component names itself: `scaler-schedule`,
    `scaler-worker`, ...; a console command is named after its script), or for a Python interpreter the module it
    runs (`-m`), `python -c`, or its script's name; None when it is gone."""
    try:
        name = Path(f"/proc/{pid}/comm").read_text().strip()
        arguments = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return None
    if not name.startswith("python") or len(arguments) < 2:
        return name
    words = [word.decode(errors="replace") for word in arguments[1:] if word]
    if words[:1] == ["-m"] and len(words) > 1:
        return words[1]
    if words[:1] == ["-c"]:
        return "python -c"
    return next((Path(word).name for word in words if not word.startswith("-")), name)


def living(members: Callable[[], Iterable[int]], spared: set[int]) -> list[int]:
    return [pid for pid in members() if pid not in spared and not is_zombie(pid)]


def wait_for_ends(members: Callable[[], Iterable[int]], spared: set[int], seconds: float) -> None:
    """Until every member but `spared` has ended, for at most `seconds`."""
    deadline = time.monotonic() + seconds
    while living(members, spared) and time.monotonic() < deadline:
        time.sleep(0.05)


def kill_all(members: Callable[[], Iterable[int]], spared: set[int]) -> dict[int, str]:
    """SIGKILL every member but `spared` until none is left (a member may fork meanwhile); returns the killed pids
    with their command lines."""
    killed: dict[int, str] = {}
    deadline = time.monotonic() + KILL_SECONDS
    while time.monotonic() < deadline:
        alive = living(members, spared)
        if not alive:
            break
        for pid in alive:
            killed.setdefault(pid, command_of(pid))
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.05)
    return killed


def described(killed: dict[int, str]) -> list[str]:
    return [f"process {pid} ({command})" for pid, command in killed.items()]


# ---------------------------------------------------------------- things named after a pid of the run


def _run(*argv: str) -> str:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ""


def _owner(name: str, patterns: Iterable[re.Pattern[str]]) -> int | None:
    for pattern in patterns:
        found = pattern.match(name)
        if found:
            return int(found.group(1))
    return None


def _lock_pid(directory: Path) -> int | None:
    try:
        return int((directory / ".lock").read_text().strip())
    except (OSError, ValueError):
        return None


def _remove_segment_directories(pids: set[int]) -> list[str]:
    removed: list[str] = []
    for parent in SEGMENT_PARENTS:
        with contextlib.suppress(OSError):
            for directory in parent.iterdir():
                if directory.name.startswith(SEGMENT_PREFIX) and _lock_pid(directory) in pids:
                    shutil.rmtree(directory, ignore_errors=True)
                    removed.append(f"segment directory {directory}")
    return removed


def remove_marks_directories(pids: set[int], parents: Iterable[Path] = SEGMENT_PARENTS) -> list[str]:
    removed: list[str] = []
    for parent in parents:
        with contextlib.suppress(OSError):
            for directory in parent.iterdir():
                if _owner(directory.name, (MARKS_NAME,)) in pids:
                    shutil.rmtree(directory, ignore_errors=True)
                    removed.append(f"computing marks {directory}")
    return removed


def _remove_pool_leftovers(pids: set[int]) -> list[str]:
    removed: list[str] = []
    with contextlib.suppress(OSError):
        for entry in Path("/dev/shm").iterdir():
            if _owner(entry.name, POOL_LEFTOVERS) in pids:
                if entry.is_dir():
                    shutil.rmtree(entry, ignore_errors=True)
                else:
                    entry.unlink(missing_ok=True)
                removed.append(f"pool leftover {entry}")
    return removed


def remove_config_homes(pids: set[int], parent: Path = SEGMENT_PARENTS[1]) -> list[str]:
    """The session configuration folders (XDG_CONFIG_HOME, tests/conftest.py) and local Slurms' state folders
    (tests/integration/slurm_cluster.py) made by one of `pids`: a run whose pytest was killed never reached its own
    removal of them (the Slurm daemons, their slurmstepd and jobs went with the run's control group)."""
    removed: list[str] = []
    with contextlib.suppress(OSError):
        for entry in parent.iterdir():
            if entry.is_dir() and _owner(entry.name, [CONFIG_HOME_NAME]) in pids:
                shutil.rmtree(entry, ignore_errors=True)
                removed.append(f"configuration folder {entry}")
            elif entry.is_dir() and _owner(entry.name, [SLURM_STATE_NAME]) in pids:
                removed.extend(kill_holders(entry))
                shutil.rmtree(entry, ignore_errors=True)
                removed.append(f"Slurm state folder {entry}")
    return removed


def open_paths(pid: int) -> list[str]:
    """What the process `pid`'s open files point at (none when it is gone); a file it closes meanwhile is skipped,
    not the process (a process starting up opens and closes files all the time)."""
    paths = []
    try:
        with os.scandir(f"/proc/{pid}/fd") as fds:
            for fd in fds:
                with contextlib.suppress(OSError):
                    paths.append(os.readlink(fd.path))
    except OSError:
        pass
    return paths


def kill_holders(folder: Path) -> list[str]:
    """SIGKILL the processes with a file of `folder` open: a slurmstepd outlives its slurmd (it keeps trying to report
    its job's end), and keeps the folder's slurmd.log open, where nothing else of the run names it (its environment
    is empty when membership is by environment)."""
    killed: list[str] = []
    prefix = f"{folder}/"
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        if any(path.startswith(prefix) for path in open_paths(int(entry.name))):
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(entry.name), signal.SIGKILL)
                killed.append(f"process {entry.name} holding {folder}")
    return killed


def remove_named(pids: set[int]) -> list[str]:
    """Network namespaces, links, memory cgroups, containers, segment directories, workers' computing-marks folders,
    loky pools' /dev/shm leftovers and the session's configuration folder named after one of `pids`."""
    removed: list[str] = []
    if shutil.which("ip"):
        for line in _run("ip", "netns", "list").splitlines():
            name = line.split()[0] if line.strip() else ""
            if _owner(name, NAMESPACE_NAMES) in pids:
                for pid in _run("ip", "netns", "pids", name).split():
                    with contextlib.suppress(ProcessLookupError, ValueError):
                        os.kill(int(pid), signal.SIGKILL)
                _run("ip", "netns", "delete", name)
                removed.append(f"network namespace {name}")
        for line in _run("ip", "-o", "link", "show").splitlines():
            parts = line.split(":")
            name = parts[1].strip().split("@")[0] if len(parts) > 2 else ""
            if _owner(name, LINK_NAMES) in pids:
                _run("ip", "link", "delete", name)
                removed.append(f"link {name}")
    with contextlib.suppress(OSError):
        for group in MEMORY_GROUPS.iterdir():
            if group.is_dir() and _owner(group.name, [MEMORY_GROUP_NAME]) in pids:
                kill_all(lambda group=group: group_pids(group), set())
                remove_groups(group)
                removed.append(f"memory cgroup {group}")
    removed.extend(_remove_segment_directories(pids))
    removed.extend(_remove_pool_leftovers(pids))
    removed.extend(remove_marks_directories(pids))
    removed.extend(remove_config_homes(pids))
    if shutil.which("docker"):
        template = f'{{{{.ID}}}} {{{{.Label "{CONTAINER_LABEL}"}}}}'
        listed = _run("docker", "ps", "-a", "--filter", f"label={CONTAINER_LABEL}", "--format", template)
        for line in listed.splitlines():
            container, _space, owner = line.partition(" ")
            if owner.isdigit() and int(owner) in pids:
                _run("docker", "rm", "-f", container)
                removed.append(f"container {container}")
    return removed


# ---------------------------------------------------------------- the run


@dataclass
class Run:
    """One run: its id, its group (None: membership by environment) and the pids seen in it."""

    run_id: str
    group: Path | None
    hierarchy: Hierarchy | None
    seen: set[int] = field(default_factory=set)
    #: how many processes of each kind (`kind_of`) the run started, as seen twice a second
    started: Counter[str] = field(default_factory=Counter)
    #: seen at the last poll, their kind read at this one (a forked or exec'd child takes its name in between)
    _new: set[int] = field(default_factory=set)

    def members(self, variables: dict[str, str] | None = None) -> list[int]:
        if self.group is not None:
            return group_pids(self.group)
        return environment_pids(self.run_id, variables)

    def record(self) -> None:
        for pid in self._new:
            kind = kind_of(pid)
            if kind is not None:
                self.started[kind] += 1
        members = set(self.members())
        self._new = members - self.seen
        self.seen |= members

    def reap(self, spared: set[int], grace_seconds: float = 0.0) -> list[str]:
        """Kill what is left of the run (after `grace_seconds` for it to end on its own) and remove what is named after
        it; returns what was removed."""
        self.record()
        wait_for_ends(self.members, spared, grace_seconds)
        killed = kill_all(self.members, spared)
        self.seen.update(killed)
        removed = described(killed) + remove_named(self.seen)
        if self.group is not None:
            remove_groups(self.group)
        return removed


def run_from_environment() -> Run | None:
    run_id = os.environ.get(RUN_VARIABLE)
    if not run_id:
        return None
    group = os.environ.get(GROUP_VARIABLE)
    return Run(run_id, Path(group) if group else None, find_hierarchy() if group else None)


def watch(run: Run, controller: int, pipe: int, report: Path) -> None:
    """The watchdog: record the run's pids until the controller asks for the reap (a line on the pipe) or is gone
    (the pipe closes); then reap, and write what was removed to `report` (and to stderr when nobody asked)."""
    run.seen.add(controller)  # it leaves the group before it asks (and may have been there less than a poll)
    asked = False
    while not asked:
        readable, _, _ = select.select([pipe], [], [], POLL_SECONDS)
        run.record()
        if readable:
            data = os.read(pipe, 4096)
            if not data:
                break
            asked = b"reap" in data
    removed = run.reap({os.getpid(), controller}, EXIT_GRACE_SECONDS if asked else 0.0)
    report.write_text(json.dumps({"removed": removed, "started": dict(run.started.most_common())}))
    if not asked and removed:
        print(f"\nscaler test reaper: run {run.run_id} was cut short; removed what it left:", file=sys.stderr)
        for line in removed:
            print(f"  {line}", file=sys.stderr)
    if not asked:
        shutil.rmtree(report.parent, ignore_errors=True)


# ---------------------------------------------------------------- per-module CPU


def cpu_by_module(lines: Iterable[str]) -> Iterator[tuple[str, float, int]]:
    """(module, CPU seconds, tests) from the lines of a SCALER_TEST_CPU file, most CPU first."""
    totals: dict[str, list[float]] = {}
    for line in lines:
        nodeid, _space, seconds = line.rpartition(" ")
        if nodeid:
            entry = totals.setdefault(nodeid.split("::", 1)[0], [0.0, 0])
            entry[0] += float(seconds)
            entry[1] += 1
    for module, (seconds, count) in sorted(totals.items(), key=lambda item: -item[1][0]):
        yield module, seconds, int(count)


def main(argv: list[str]) -> None:
    if argv[:1] == ["watch"]:
        run_id = os.environ[RUN_VARIABLE + "_WATCHED"]
        group = os.environ.get(GROUP_VARIABLE)
        run = Run(run_id, Path(group) if group else None, find_hierarchy() if group else None)
        watch(run, int(argv[1]), int(argv[2]), Path(argv[3]))
    elif argv[:1] == ["cpu"] and len(argv) == 2:
        rows = list(cpu_by_module(Path(argv[1]).read_text().splitlines()))
        for module, seconds, count in rows:
            print(f"{seconds:9.1f} s  {count:4d} tests  {module}")
        print(f"{sum(row[1] for row in rows):9.1f} s  {sum(row[2] for row in rows):4d} tests  in all")
    else:
        raise SystemExit("usage: python -m tests.reaping cpu FILE  (sums a SCALER_TEST_CPU file per module)")


if __name__ == "__main__":
    main(sys.argv[1:])
